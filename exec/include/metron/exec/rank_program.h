#pragma once
// What one rank's host does in a step, derived once from the graph so that the executor's loop
// and every backend only follow instructions: which stream each task goes to, which events it
// waits for and records, a collective's place in its group's order and a transfer's tag.
//
// Note [rank program] (how the graph's ordering rules, Note [ordering rules] in ir/ordering.h,
// become CUDA-like stream operations):
//   - Rule 1: the host walks the rank's issue order; a HostWait synchronizes on the event
//     recorded after its target.
//   - Rule 2: a task goes to its stream, in issue order; a stream is a FIFO, so a dependency on
//     the same stream needs nothing more.
//   - Rule 3: a dependency on another stream is an event: recorded after the dependency, waited
//     for by the task's stream just before the task is enqueued (a dependency is always issued
//     first: validated, ir/validate.cc).
//   - Rule 4: the backend dispatches stream s through hardware queue s mod hardware_queues, s the
//     stream's index among the rank's streams (ir::Graph::queue_of).
//   - Rule 5, rendezvous: a collective blocks in its communicator until every member has called
//     it. Communicators match calls by issue order (Gloo and NCCL alike), so every member must
//     reach its group's collectives in one order: the order of their `seq`. A collective's
//     `ordinal` is its position among the rank's collectives on its group sorted by seq; the
//     backend issues a group's calls in ordinal order whatever stream they run on. A send–recv
//     pair meets by (peer, tag), the tag being the pair's communication instance, which both
//     ranks compute from the same graph.
//   - Memory: a buffer is allocated when its allocating task starts and freed when the last of
//     its users (the allocator and every task that uses it) completes, as the simulator counts
//     it; `buffer_users` is that count.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::exec {

/// One entry of a rank's issue order.
struct ProgramStep {
  ir::TaskId task;
  std::int32_t stream = -1;  ///< index among the rank's streams; -1 for a HostWait
  /// Dependencies on other streams: the stream waits for the events recorded after them.
  std::vector<ir::TaskId> waits;
  /// Whether an event is recorded after the task (a task of another stream or a HostWait needs
  /// it).
  bool records_event = false;
  std::int64_t ordinal = -1;  ///< collective: its place in the rank's order of its group
  std::int32_t tag = -1;      ///< send or receive: its communication instance
};

/// A rank's instructions for one step (Note [rank program]).
struct RankProgram {
  ir::RankId rank;
  std::vector<std::string> stream_names;  ///< by stream index
  std::int32_t hardware_queues = 1;
  std::vector<ProgramStep> steps;  ///< in issue order
  /// By GroupId: how many collectives the rank runs on the group per step (0 for a group it is
  /// not in), so that iteration i's ordinals continue at i times this.
  std::vector<std::int64_t> group_collectives;
  /// By BufferId: how many of the rank's tasks free the buffer by completing (allocator and
  /// users); 0 for the buffers of other ranks.
  std::vector<std::int32_t> buffer_users;
};

/// The program of `rank` (a rank of `graph`).
RankProgram rank_program(const ir::Graph& graph, ir::RankId rank);

}  // namespace metron::exec
