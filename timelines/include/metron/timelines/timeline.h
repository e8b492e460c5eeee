#pragma once
// The input of every trace layout (docs/TRACES.md §6): when each task of a graph ran, from the
// simulator or the executor, and how the graph's ranks and groups are named in the real world.
// Nothing here knows who produced the times, so both write their traces through the same code.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::timelines {

/// When one task ran, in nanoseconds from the step's start.
struct TaskSpan {
  std::int64_t start_ns = -1;  ///< -1: never ran
  std::int64_t end_ns = -1;
  friend bool operator==(const TaskSpan&, const TaskSpan&) = default;
};

/// An idle stretch of a rank's compute streams and why (shown as a "bubble" slice).
struct BubbleSpan {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::string reason;                          ///< warmup, cooldown, wait_recv, ...
  std::optional<std::int32_t> waited_on_task;  ///< the task whose end ended it, when known
  friend bool operator==(const BubbleSpan&, const BubbleSpan&) = default;
};

/// One step of a graph as it ran.
struct Timeline {
  std::vector<TaskSpan> tasks;  ///< by TaskId
  /// By TaskId: when the host issued (launched) it; empty = derive it (issue_times()).
  std::vector<std::int64_t> issue_ns;
  std::int64_t step_end_ns = 0;  ///< the makespan
  /// By rank: (time, dynamic bytes allocated), in time order.
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> memory;
  /// By rank: weights + gradients + optimizer state, added to the memory counter; empty = 0.
  std::vector<std::int64_t> static_memory_bytes;
  std::vector<std::vector<BubbleSpan>> bubbles;  ///< by rank
};

/// Names for the real world when the graph holds only part of it (the simulator's symmetric mode
/// keeps one data-parallel replica and no tensor-parallel peers; a group then has one member in
/// the graph but stands for the real group). Naming only, never semantics.
struct GroupNaming {
  std::string pg_name;                    ///< Process Group Name, e.g. "0"
  std::string description;                ///< Process Group Description, e.g. "dp0"
  std::vector<std::int64_t> world_ranks;  ///< the real group's global ranks, in group order
  friend bool operator==(const GroupNaming&, const GroupNaming&) = default;
};

struct WorldLayout {
  std::int64_t world_size = 0;
  std::vector<std::int64_t> world_rank;    ///< by graph RankId
  std::vector<std::int64_t> local_device;  ///< by graph RankId: CUDA device index on its node
  std::vector<GroupNaming> groups;         ///< by GroupId
  /// By graph RankId: the group its sends and receives go through (Megatron-LM's pipeline group,
  /// PIPELINE_MODEL_PARALLEL_GROUP); empty = the default (world) group, as plain c10d send/recv.
  std::vector<GroupNaming> pipeline_groups;
  friend bool operator==(const WorldLayout&, const WorldLayout&) = default;
};

/// GPUs per node that graph_world_layout assumes (local device = rank % 8).
inline constexpr std::int64_t kDevicesPerNode = 8;

/// The identity layout: the graph's ranks are the world (world rank = graph rank, device =
/// rank % 8), and each group is named as PyTorch names process groups, by creation order:
/// pg_name = the group's index as a string ("0", "1", ...), description = the graph's group name
/// ("dp0", "tp1", ...), world_ranks = its members.
WorldLayout graph_world_layout(const ir::Graph& graph);

/// Throws InvalidConfig when `layout` does not fit `graph` (sizes of world_rank, local_device and
/// groups; a world rank outside [0, world_size); a device < 0) or `timeline` does not (tasks and,
/// when given, issue_ns sized by task; memory, bubbles and static memory by rank or empty).
void check_inputs(const ir::Graph& graph, const Timeline& timeline, const WorldLayout& layout);

/// Issue times by TaskId: timeline.issue_ns when given, else derived as the host issues
/// (docs/ARCHITECTURE.md, ordering rule 1): each rank walks its issue order and blocks only at a
/// HostWait until the awaited task ends, so a task's issue time is the end of the last HostWait
/// before it in issue order (0 when none; a HostWait that never ended leaves the rest at -1).
std::vector<std::int64_t> issue_times(const ir::Graph& graph, const Timeline& timeline);

}  // namespace metron::timelines
