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

/// What the interpreters' inner loops read of every task, packed into 44 bytes and indexed by
/// TaskId (FlatIndex::tasks), derived at build() from the Task and the indexes of Graph. A run
/// over a million tasks then touches one record per task instead of a ~250-byte Task and a dozen
/// separate index arrays (each one more cache line and TLB entry per rank it advances on).
struct TaskFacts {
  RankId rank;
  TaskId stream_successor;          ///< Graph::stream_successor
  TaskId queue_successor;           ///< Graph::queue_successor
  std::int32_t comm_instance = -1;  ///< Graph::comm_instance
  /// Conditions 2-4 of Note [ordering rules] (ir/ordering.h) the task starts with: one for a
  /// stream predecessor, one for a hardware-queue predecessor, one per dependency, one for a
  /// HostWait's target. Issuing it (rule 1) is one more.
  std::int32_t conditions = 0;
  /// Graph::dependents(id) is FlatIndex::dependents[dependents_begin, dependents_end).
  std::int32_t dependents_begin = 0;
  std::int32_t dependents_end = 0;
  /// FlatIndex::buffer_effects[allocates_begin, uses_begin) is Task::allocates,
  /// [uses_begin, uses_end) is Task::uses.
  std::int32_t allocates_begin = 0;
  std::int32_t uses_begin = 0;
  std::int32_t uses_end = 0;
  TaskKind kind = TaskKind::kCompute;
};

/// A communication instance (FlatIndex::instances). Its members agree on bytes (validated), and
/// a Send or collective member reports them as sent.
struct CommFacts {
  std::int64_t bytes = 0;
  GroupId group;  ///< a collective's group; none for a send–recv pair
  /// Graph::comm_members(instance) is FlatIndex::comm_members[members_begin, members_end).
  std::int32_t members_begin = 0;
  std::int32_t members_end = 0;
};

/// The per-task and per-instance arrays an interpreter's inner loop reads (Graph::flat_index()),
/// as spans over storage the Graph owns.
struct FlatIndex {
  std::span<const TaskFacts> tasks;          ///< by TaskId
  std::span<const TaskId> dependents;        ///< every task's dependents, back to back
  std::span<const BufferId> buffer_effects;  ///< every task's allocates then uses, back to back
  std::span<const CommFacts> instances;      ///< by communication instance
  std::span<const TaskId> comm_members;      ///< every instance's members, back to back
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

  /// Flat arrays for interpreters' inner loops (FlatIndex).
  [[nodiscard]] FlatIndex flat_index() const noexcept;

  [[nodiscard]] std::string describe(TaskId id) const { return describe_task(data(), id); }

  friend bool operator==(const Graph& a, const Graph& b) { return a.data() == b.data(); }

  struct Impl;

 private:
  friend class GraphBuilder;
  explicit Graph(std::shared_ptr<const Impl> impl) noexcept : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace metron::ir
