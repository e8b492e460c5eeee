#pragma once
// Collects ranks, streams, groups, buffers and tasks, then produces an immutable validated Graph.
// Nothing is checked while adding: build() checks everything at once and reports every problem.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::ir {

/// Builds a Graph. Tasks join their rank's host issue order in the order they are added, unless
/// set_issue_order() says otherwise.
/// @code
///   ir::GraphBuilder b;
///   RankId r0 = b.add_rank();
///   StreamId compute = b.add_stream(r0, "compute");
///   TaskId f = b.add({.rank = r0, .stream = compute, .stage = StageId{0},
///                     .microbatch = MicrobatchId{0}, .op = Compute{.phase = Phase::kForward}});
///   ir::Graph g = std::move(b).build();
/// @endcode
class GraphBuilder {
 public:
  GraphBuilder() = default;
  /// Starts from an existing graph, for passes that transform one graph into another.
  explicit GraphBuilder(const Graph& graph) : data_(graph.data()) {}
  /// Starts from plain data (the JSON reader uses this).
  explicit GraphBuilder(GraphData data) : data_(std::move(data)) {}

  RankId add_rank(Rank rank = {});
  StreamId add_stream(RankId rank, std::string name);
  /// Returns the stream of `rank` called `name`, adding it when it does not exist yet.
  StreamId stream(RankId rank, const std::string& name);
  GroupId add_group(std::string name, std::vector<RankId> ranks);
  BufferId add_buffer(RankId rank, std::int64_t bytes, std::string name);
  /// Adds a task at the end of its rank's issue order.
  TaskId add(Task&& task);
  TaskId add(const Task& task) { return add(Task(task)); }
  /// Makes room for `tasks` tasks in all, so adding them moves none (a Task is large). A quarter
  /// more is kept free, so that a later pass adding a few tasks (the sync policies after the
  /// intra-layer collectives) does not move them all either.
  void reserve_tasks(std::size_t tasks) {
    if (tasks > data_.tasks.capacity()) data_.tasks.reserve(tasks + tasks / 4);
  }
  /// Makes `after` wait for `before` (an event wait when they are on different streams).
  void precede(TaskId before, TaskId after);
  /// Replaces a rank's issue order.
  void set_issue_order(RankId rank, std::vector<TaskId> order);

  [[nodiscard]] const GraphData& data() const noexcept { return data_; }
  [[nodiscard]] Task& task(TaskId id);

  /// Validates and freezes. Throws InvalidGraph naming every problem.
  [[nodiscard]] Graph build() &&;

 private:
  GraphData data_;
  /// rank -> its streams in creation order, for stream(); covers data_.streams[0 ..
  /// streams_indexed_). A rank has a handful of streams, so a scan beats a map keyed by strings.
  std::vector<std::vector<StreamId>> streams_by_rank_;
  std::size_t streams_indexed_ = 0;
};

/// Every problem of a graph's content (structure, references, ordering, matching), each naming its
/// task with rank, stage and microbatch. Empty when build() would succeed.
std::vector<std::string> find_problems(const GraphData& data);

}  // namespace metron::ir
