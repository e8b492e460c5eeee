// Note [merged trace layout] (merged_trace.h).

#include "metron/timelines/merged_trace.h"

#include <string>
#include <variant>

#include "layout_common.h"
#include "metron/timelines/kineto_names.h"

namespace metron::timelines {
namespace {

// When the send of receive `recv` started (-1 when it never did).
std::int64_t send_start(const ir::Graph& graph, const Timeline& timeline, ir::TaskId recv) {
  for (const ir::TaskId member : graph.comm_members(graph.comm_instance(recv))) {
    if (member != recv) return timeline.tasks[member.index()].start_ns;
  }
  return -1;
}

}  // namespace

traces::TraceDocument merged_trace(const ir::Graph& graph, const Timeline& timeline,
                                   const WorldLayout& layout, std::vector<traces::Arg> metadata) {
  check_inputs(graph, timeline, layout);
  traces::TraceDocument doc;
  doc.metadata = std::move(metadata);
  const std::vector<std::int64_t> tids = detail::stream_tids(graph);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const ir::RankCoords& c = graph.rank(ir::RankId{r}).coords;
    doc.processes.push_back({.pid = r,
                             .name = "Rank " + std::to_string(r) + " (pp=" + std::to_string(c.pp) +
                                     " tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp) +
                                     ")",
                             .sort_index = r});
    doc.threads.push_back(
        {.pid = r, .tid = detail::kHostTid, .name = "host", .sort_index = detail::kHostTid});
    for (ir::StreamId s : graph.streams_of(ir::RankId{r})) {
      const std::int64_t tid = tids[s.index()];
      doc.threads.push_back({.pid = r,
                             .tid = tid,
                             .name = "stream " + std::to_string(tid) + " " + graph.stream(s).name,
                             .sort_index = tid});
    }
    doc.threads.push_back(
        {.pid = r, .tid = detail::kBubbleTid, .name = "bubbles", .sort_index = detail::kBubbleTid});
    doc.threads.push_back({.pid = r,
                           .tid = detail::kAnnotationTid,
                           .name = "annotations",
                           .sort_index = detail::kAnnotationTid});
  }

  for (std::int32_t i = 0; i < graph.num_tasks(); ++i) {
    const ir::TaskId id{i};
    const ir::Task& t = graph.task(id);
    const TaskSpan& span = timeline.tasks[id.index()];
    if (span.start_ns < 0 || span.end_ns <= span.start_ns) continue;
    traces::Slice slice{.pid = t.rank.value(),
                        .tid = t.stream.valid() ? tids[t.stream.index()] : detail::kHostTid,
                        .name = detail::slice_name(graph, t),
                        .cat = t.kind() == ir::TaskKind::kCompute    ? "compute"
                               : t.kind() == ir::TaskKind::kHostWait ? "annotation"
                                                                     : "comm",
                        .start_ns = span.start_ns,
                        .duration_ns = span.end_ns - span.start_ns};
    detail::add_task_args(slice.args, t.rank.value(), t, id);
    if (t.stream.valid()) slice.args.push_back({"stream", slice.tid});
    // Which members meet: compare counts communication from their rendezvous.
    if (t.is_communication())
      slice.args.push_back({"comm_instance", std::int64_t{graph.comm_instance(id)}});
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      if (c->flops > 0) slice.args.push_back({"flops", c->flops});
      if (c->bytes_moved > 0) slice.args.push_back({"bytes", c->bytes_moved});
    } else if (t.kind() == ir::TaskKind::kCollective) {
      for (traces::Arg& arg : communication_args(graph, id, layout)) {
        slice.args.push_back(std::move(arg));
      }
    } else if (t.kind() == ir::TaskKind::kSend || t.kind() == ir::TaskKind::kRecv) {
      for (traces::Arg& arg : communication_args(graph, id, layout)) {
        slice.args.push_back(std::move(arg));
      }
      // One arrow per transfer: both ends carry the instance's id.
      const std::int64_t bind = graph.comm_instance(id) + 1;
      if (t.kind() == ir::TaskKind::kSend) {
        slice.flow_out = bind;
      } else {
        const std::int64_t sent = send_start(graph, timeline, id);
        if (sent <= span.start_ns || sent >= span.end_ns) {
          slice.flow_in = bind;
        } else {
          // A measured receive is often posted before its send starts (the simulator's never
          // is: they meet). An arrow ends at its slice's start and may not run backwards
          // (Perfetto drops it), so it ends on a nested slice: the part of the receive after
          // the send started, when the data can move.
          traces::Slice arrival = slice;
          arrival.name += " (data)";
          arrival.start_ns = sent;
          arrival.duration_ns = span.end_ns - sent;
          arrival.flow_in = bind;
          doc.slices.push_back(std::move(slice));
          doc.slices.push_back(std::move(arrival));
          continue;
        }
      }
    }
    doc.slices.push_back(std::move(slice));
  }

  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const std::int64_t pid = r;
    const auto rank = static_cast<std::size_t>(r);
    if (rank < timeline.bubbles.size()) {
      for (const BubbleSpan& b : timeline.bubbles[rank]) {
        if (b.end_ns <= b.start_ns) continue;
        traces::Slice slice{.pid = pid,
                            .tid = detail::kBubbleTid,
                            .name = "bubble",
                            .cat = "bubble",
                            .start_ns = b.start_ns,
                            .duration_ns = b.end_ns - b.start_ns};
        slice.args.push_back({"reason", b.reason});
        if (b.waited_on_task) slice.args.push_back({"waited_on", std::int64_t{*b.waited_on_task}});
        doc.slices.push_back(std::move(slice));
      }
    }
    detail::add_memory_counter(
        doc, pid, detail::kHostTid,
        rank < timeline.memory.size() ? timeline.memory[rank]
                                      : std::vector<std::pair<std::int64_t, std::int64_t>>{},
        rank < timeline.static_memory_bytes.size() ? timeline.static_memory_bytes[rank] : 0, 0);
    if (timeline.step_end_ns > 0) {
      doc.slices.push_back({.pid = pid,
                            .tid = detail::kAnnotationTid,
                            .name = "step 0",
                            .cat = "annotation",
                            .start_ns = 0,
                            .duration_ns = timeline.step_end_ns});
    }
  }
  doc.instants.push_back({.pid = 0,
                          .tid = detail::kAnnotationTid,
                          .name = "step 0 end",
                          .ts_ns = timeline.step_end_ns,
                          .global = true});
  return doc;
}

}  // namespace metron::timelines
