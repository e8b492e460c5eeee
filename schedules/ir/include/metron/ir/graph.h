#pragma once
// The immutable, validated task graph that both interpreters (simulator and executor) run.
// Built only by GraphBuilder::build(), which validates; afterwards nothing can change it, so many
// threads may share one Graph (copies share the same storage).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metron/ir/ids.h"
#include "metron/ir/task.h"

namespace metron::ir {

/// Where a rank sits in the parallel layout; used for naming (traces) only, never for semantics.
struct RankCoords {
  std::int32_t tp = 0;
  std::int32_t pp = 0;
  std::int32_t dp = 0;
  std::int32_t cp = 0;
  std::int32_t ep = 0;
  friend bool operator==(const RankCoords&, const RankCoords&) = default;
};

/// One rank: one process driving one device.
struct Rank {
  /// Hardware queues the device dispatches streams through; 1 reproduces
  /// CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream dispatched in global issue order). 8 is CUDA's
  /// default.
  std::int32_t hardware_queues = 8;
  RankCoords coords;
  friend bool operator==(const Rank&, const Rank&) = default;
};

/// A named stream of one rank's device ("compute", "tp", "dp-grad", "pp-send", ...).
struct Stream {
  RankId rank;
  std::string name;
  friend bool operator==(const Stream&, const Stream&) = default;
};

/// A communication group: a named set of ranks (one NCCL communicator / Gloo process group).
struct Group {
  std::string name;
  std::vector<RankId> ranks;
  friend bool operator==(const Group&, const Group&) = default;
};

/// A memory buffer of one rank: allocated when its allocating task starts, freed when the last
/// task that uses it completes.
struct Buffer {
  RankId rank;
  std::int64_t bytes = 0;
  std::string name;
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

/// The plain content of a graph, as the builder collects it and the JSON form stores it.
/// Ids are indices into these vectors.
struct GraphData {
  std::vector<Rank> ranks;
  std::vector<Stream> streams;
  std::vector<Group> groups;
  std::vector<Buffer> buffers;
  std::vector<Task> tasks;
  /// issue_order[r]: rank r's host issue order, every task of rank r exactly once.
  std::vector<std::vector<TaskId>> issue_order;
  friend bool operator==(const GraphData&, const GraphData&) = default;
};

/// "task 12 (rank 1, stage 1, microbatch 3): backward on stream "compute"". Robust to dangling ids,
/// so validation can use it before the graph is known to be well formed.
std::string describe_task(const GraphData& data, TaskId id);

/// An immutable, validated task graph plus the indexes both interpreters need.
/// @code
///   ir::Graph g = std::move(builder).build();   // throws InvalidGraph listing every problem
///   for (TaskId t : g.issue_order(RankId{0})) std::cout << g.describe(t) << "\n";
/// @endcode
class Graph {
 public:
  [[nodiscard]] const GraphData& data() const noexcept;

  [[nodiscard]] std::int32_t num_ranks() const noexcept;
  [[nodiscard]] std::int32_t num_tasks() const noexcept;
  [[nodiscard]] const Rank& rank(RankId id) const;
  [[nodiscard]] const Stream& stream(StreamId id) const;
  [[nodiscard]] const Group& group(GroupId id) const;
  [[nodiscard]] const Buffer& buffer(BufferId id) const;
  [[nodiscard]] const Task& task(TaskId id) const;
  [[nodiscard]] std::span<const Task> tasks() const noexcept;
  [[nodiscard]] std::span<const TaskId> issue_order(RankId rank) const;
  /// The streams of one rank in creation order (the order the device maps them to queues).
  [[nodiscard]] std::span<const StreamId> streams_of(RankId rank) const;
  [[nodiscard]] std::optional<StreamId> find_stream(RankId rank, std::string_view name) const;
  [[nodiscard]] std::optional<GroupId> find_group(std::string_view name) const;

  /// Position of a task in its rank's issue order.
  [[nodiscard]] std::int32_t issue_position(TaskId id) const;
  /// Tasks of one stream in issue order (the stream's FIFO).
  [[nodiscard]] std::span<const TaskId> stream_tasks(StreamId id) const;
  /// The task issued just before this one on the same stream, or none.
  [[nodiscard]] TaskId stream_predecessor(TaskId id) const;
  /// The task issued just after this one on the same stream, or none.
  [[nodiscard]] TaskId stream_successor(TaskId id) const;
  /// The task issued just before this one on the same hardware queue when that is not the stream
  /// predecessor (so it is a separate ordering constraint), or none. See Note [ordering rules]
  /// in ordering.h.
  [[nodiscard]] TaskId queue_predecessor(TaskId id) const;
  /// The task whose queue_predecessor() this one is, or none.
  [[nodiscard]] TaskId queue_successor(TaskId id) const;
  /// Tasks that wait for this one to complete: those listing it in deps, and HostWaits on it.
  [[nodiscard]] std::span<const TaskId> dependents(TaskId id) const;
  /// Hardware queue a stream is dispatched through: its index among its rank's streams, modulo
  /// the rank's hardware_queues.
  [[nodiscard]] std::int32_t queue_of(StreamId id) const;

  /// Communication instances: a collective's members (in group rank order) or a [send, recv] pair.
  [[nodiscard]] std::int32_t num_comm_instances() const noexcept;
  /// Instance of a communication task; -1 for compute and host-wait tasks.
  [[nodiscard]] std::int32_t comm_instance(TaskId id) const;
  [[nodiscard]] std::span<const TaskId> comm_members(std::int32_t instance) const;

  [[nodiscard]] std::string describe(TaskId id) const { return describe_task(data(), id); }

  friend bool operator==(const Graph& a, const Graph& b) { return a.data() == b.data(); }

  struct Impl;

 private:
  friend class GraphBuilder;
  explicit Graph(std::shared_ptr<const Impl> impl) noexcept : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace metron::ir
