#pragma once
// The simulator's trace: one merged Chrome trace for all ranks in the layout of docs/TRACES.md
// §6.3. Note [simulator trace layout]:
//
//   pid = rank, named "Rank R (pp=S tp=T dp=D)", sorted by R. Rows (tids, each named and sorted):
//     1 host (host waits)   7 compute   20 tp   21 dp   22 pp-send   23 pp-recv   24 ep
//     40, 41, ... any further stream   90 bubbles   91 annotations (the step)
//   chosen by stream name ("compute", "tp*", "dp*", "pp-send*", "pp-recv*", "ep*"; a second
//   stream of a kind — the send stream to the other neighbour, say — takes the next free tid
//   from 40).
//   Slices: compute "F3 mb=3 chunk=0" (B, I, W likewise; "OPT step=0"), p2p
//   "SEND_F3 mb=3 ->r1" / "RECV_F3 mb=3 <-r0" (F: activations, B: gradients) joined by a v2 flow
//   arrow, collectives "all-reduce dp0 bytes=N" with Kineto's collective args; args rank, stage,
//   microbatch, chunk, stream, flops/bytes where known. Bubbles "bubble" with args reason and
//   waited_on; an "HBM" counter per rank (allocated_bytes); the step as an annotation slice and
//   a global instant at its end. Zero-length tasks are left out (nothing to see, and Perfetto
//   draws them as instants).

#include <vector>

#include "metron/ir/graph.h"
#include "metron/sim/simulator.h"
#include "metron/traces/trace_events.h"

namespace metron::sim {

/// The trace of a (possibly partial) simulation; `metadata` goes to otherData / metadata
/// (tool, schedule, parallel sizes, ...). Tasks that never started are left out.
traces::TraceDocument simulation_trace(const ir::Graph& graph, const SimResult& result,
                                       std::vector<traces::Arg> metadata = {});

}  // namespace metron::sim
