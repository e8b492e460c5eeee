#pragma once
// The simulator's result figures for a step that was measured rather than simulated: the same
// RankMetrics (compute, idle, bubble by cause, exposed and overlapped communication, bytes, peak
// memory), computed from when each task ran, so that `metron run --json` and `metron simulate
// --json` line up field by field (issue 16). Note [timeline metrics]:
//   - Busy time is the union of a rank's compute intervals; communication time the union of its
//     collective, send and receive intervals; exposed communication is the part of the latter
//     outside the former; idle = iteration time − busy, split into bubbles at the gaps of the
//     compute union.
//   - A gap's cause follows the simulator's (Engine::gap_cause): the task whose end let the
//     compute task after the gap start. Measured, that is the latest-ending of its conditions:
//     its stream predecessor, its dependencies, and the HostWait the host passed just before
//     issuing it (standing for the task it waited on). A receive makes it wait_recv, a
//     collective wait_collective, anything else other; before the first compute task it is
//     warmup, after the last cooldown.
//   - A communication task counts as communication from its rendezvous, the latest start of
//     its instance's members (a collective's group, a send and its receive), to its end. A
//     measured receive is often posted long before its send (a blocking Gloo or NCCL call
//     occupies its stream from the post), and a collective member waits inside the
//     communicator for the last one to join; that wait is idle time the bubbles already count
//     (wait_recv, wait_collective), not data moving. The simulator starts every member at the
//     rendezvous, so both sides count the same thing and exposed communication compares.
//   - No critical path: which task held up which is not observable in a measurement.

#include "metron/ir/graph.h"
#include "metron/sim/simulator.h"
#include "metron/timelines/timeline.h"

namespace metron::sim {

/// The result of `timeline` (spans by task, memory by rank; issue_ns used when given) as the
/// simulator would report it; makespan = timeline.step_end_ns. Tasks that never ran (-1) count
/// for nothing. Throws InvalidConfig when the timeline does not fit the graph.
SimResult timeline_result(const ir::Graph& graph, const timelines::Timeline& timeline);

}  // namespace metron::sim
