#pragma once
// The simulator's traces, written through the shared layouts of metron::timelines: the merged
// Perfetto file (docs/TRACES.md §6.3, Note [merged trace layout] in metron/timelines/
// merged_trace.h) and per-rank Kineto-shaped files for HTA (§6.2, Note [kineto trace layout] in
// metron/timelines/kineto_trace.h). This file only turns a SimResult into a Timeline.

#include <cstdint>
#include <optional>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/sim/simulator.h"
#include "metron/timelines/timeline.h"
#include "metron/traces/trace_events.h"

namespace metron::sim {

/// What the trace shows beyond the SimResult.
struct TraceOptions {
  /// By rank: weights + gradients + optimizer state, added to the HBM counter so that its peak is
  /// the rank's peak memory; empty = 0.
  std::vector<std::int64_t> static_memory_bytes;
  /// World ranks, devices and process-group names (the real world when the graph holds part of
  /// it); unset = timelines::graph_world_layout(graph).
  std::optional<timelines::WorldLayout> layout;
};

/// The Timeline of a (possibly partial) simulation: spans, makespan, memory, bubbles; issue
/// times left to derive (timelines::issue_times).
timelines::Timeline simulation_timeline(const ir::Graph& graph, const SimResult& result,
                                        std::vector<std::int64_t> static_memory_bytes = {});

/// The merged trace; `metadata` goes to otherData / metadata (tool, schedule, parallel sizes,
/// ...). Tasks that never started are left out.
traces::TraceDocument simulation_trace(const ir::Graph& graph, const SimResult& result,
                                       std::vector<traces::Arg> metadata = {},
                                       const TraceOptions& options = {});

/// One Kineto-shaped document per graph rank (by RankId), to be written as
/// timelines::rank_trace_file_name(layout.world_rank[r]) in one directory.
std::vector<traces::TraceDocument> simulation_rank_traces(const ir::Graph& graph,
                                                          const SimResult& result,
                                                          std::vector<traces::Arg> metadata = {},
                                                          const TraceOptions& options = {});

}  // namespace metron::sim
