// SimResult → timelines::Timeline; the layouts are metron::timelines'.

#include "metron/sim/trace_export.h"

#include <utility>

#include "metron/timelines/kineto_trace.h"
#include "metron/timelines/merged_trace.h"

namespace metron::sim {

timelines::Timeline simulation_timeline(const ir::Graph& graph, const SimResult& result,
                                        std::vector<std::int64_t> static_memory_bytes) {
  timelines::Timeline timeline;
  timeline.tasks.reserve(result.tasks.size());
  for (const TaskTiming& t : result.tasks) timeline.tasks.push_back({t.start, t.end});
  // A partial result (a deadlock) may lack tasks at the end: they never ran.
  timeline.tasks.resize(static_cast<std::size_t>(graph.num_tasks()));
  timeline.step_end_ns = result.makespan;
  timeline.static_memory_bytes = std::move(static_memory_bytes);
  for (const RankMetrics& m : result.ranks) {
    timeline.memory.push_back(m.memory_timeline);
    std::vector<timelines::BubbleSpan> bubbles;
    for (const Bubble& b : m.bubbles) {
      timelines::BubbleSpan span{
          .start_ns = b.start, .end_ns = b.end, .reason = std::string(to_string(b.cause))};
      if (b.waited_on.valid()) span.waited_on_task = b.waited_on.value();
      bubbles.push_back(std::move(span));
    }
    timeline.bubbles.push_back(std::move(bubbles));
  }
  return timeline;
}

traces::TraceDocument simulation_trace(const ir::Graph& graph, const SimResult& result,
                                       std::vector<traces::Arg> metadata,
                                       const TraceOptions& options) {
  return timelines::merged_trace(
      graph, simulation_timeline(graph, result, options.static_memory_bytes),
      options.layout ? *options.layout : timelines::graph_world_layout(graph), std::move(metadata));
}

std::vector<traces::TraceDocument> simulation_rank_traces(const ir::Graph& graph,
                                                          const SimResult& result,
                                                          std::vector<traces::Arg> metadata,
                                                          const TraceOptions& options) {
  return timelines::rank_traces(
      graph, simulation_timeline(graph, result, options.static_memory_bytes),
      options.layout ? *options.layout : timelines::graph_world_layout(graph), std::move(metadata));
}

}  // namespace metron::sim
