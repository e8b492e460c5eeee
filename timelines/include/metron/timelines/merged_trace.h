#pragma once
// The merged trace of one step: every rank in one Chrome trace, for Perfetto (docs/TRACES.md
// §6.3). Note [merged trace layout]:
//
//   pid = graph rank, named "Rank R (pp=S tp=T dp=D)", sorted by R. Rows (tids, each named and
//   sorted):
//     1 host (host waits, the HBM counter)   7 compute   20 tp   21 dp   22 pp-send   23 pp-recv
//     24 ep   40, 41, ... any further stream   90 bubbles   91 annotations (the step)
//   chosen by stream name ("compute", "tp*", "dp*", "pp-send*", "pp-recv*", "ep*"; a second
//   stream of a kind — the send stream to the other neighbour, say — takes the next free tid
//   from 40).
//   Slices: compute "F3 mb=3 chunk=0" (B, I, W likewise; "OPT step=0"), p2p
//   "SEND_F3 mb=3 ->r1" / "RECV_F3 mb=3 <-r0" (F: activations, B: gradients) joined by a v2 flow
//   arrow (a receive posted before its send started, as measured ones are, gets a nested
//   "RECV_... (data)" slice from the send's start, where the arrow ends: arrows never run
//   backwards), collectives "all-reduce dp0 bytes=N" with Kineto's collective args
//   (kineto_names.h); args rank, stage, microbatch, chunk, task, stream, flops/bytes where known.
//   Bubbles "bubble" with args reason and waited_on; an "HBM" counter per rank (allocated_bytes =
//   static memory + dynamic bytes, so its peak is the rank's peak memory) on the host row; the step
//   as an annotation slice and a global instant at its end. Zero-length tasks and tasks that never
//   ran are left out (nothing to see, and Perfetto draws zero-length slices as instants).

#include <vector>

#include "metron/ir/graph.h"
#include "metron/timelines/timeline.h"
#include "metron/traces/trace_events.h"

namespace metron::timelines {

/// The merged trace; `metadata` goes to otherData / metadata (tool, schedule, parallel sizes,
/// ...). Throws InvalidConfig when the inputs do not fit the graph (check_inputs).
traces::TraceDocument merged_trace(const ir::Graph& graph, const Timeline& timeline,
                                   const WorldLayout& layout, std::vector<traces::Arg> metadata);

}  // namespace metron::timelines
