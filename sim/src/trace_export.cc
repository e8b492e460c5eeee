// Note [simulator trace layout] (trace_export.h).

#include "metron/sim/trace_export.h"

#include <map>
#include <set>
#include <string>
#include <variant>

namespace metron::sim {
namespace {

constexpr std::int64_t kHostTid = 1;
constexpr std::int64_t kComputeTid = 7;
constexpr std::int64_t kTpTid = 20;
constexpr std::int64_t kDpTid = 21;
constexpr std::int64_t kSendTid = 22;
constexpr std::int64_t kRecvTid = 23;
constexpr std::int64_t kEpTid = 24;
constexpr std::int64_t kFirstOtherTid = 40;
constexpr std::int64_t kBubbleTid = 90;
constexpr std::int64_t kAnnotationTid = 91;

std::int64_t preferred_tid(const std::string& name) {
  if (name == "compute") return kComputeTid;
  if (name.starts_with("pp-send")) return kSendTid;
  if (name.starts_with("pp-recv")) return kRecvTid;
  if (name.starts_with("tp")) return kTpTid;
  if (name.starts_with("dp")) return kDpTid;
  if (name.starts_with("ep")) return kEpTid;
  return kFirstOtherTid;
}

/// tid of every stream, per Note [simulator trace layout].
std::vector<std::int64_t> stream_tids(const ir::Graph& graph) {
  std::vector<std::int64_t> tids(graph.data().streams.size(), 0);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    std::set<std::int64_t> taken;
    for (ir::StreamId s : graph.streams_of(ir::RankId{r})) {
      std::int64_t tid = preferred_tid(graph.stream(s).name);
      if (taken.contains(tid)) tid = kFirstOtherTid;
      while (taken.contains(tid)) ++tid;
      taken.insert(tid);
      tids[s.index()] = tid;
    }
  }
  return tids;
}

std::string phase_letter(ir::Phase phase) {
  switch (phase) {
    case ir::Phase::kForward:
      return "F";
    case ir::Phase::kBackwardInput:
      return "I";
    case ir::Phase::kBackwardWeight:
      return "W";
    case ir::Phase::kBackward:
      return "B";
    case ir::Phase::kRecompute:
      return "R";
    case ir::Phase::kOptimizer:
      return "OPT";
    case ir::Phase::kOther:
      break;
  }
  return "OTHER";
}

std::string mb_text(const ir::Task& t) {
  return t.microbatch.valid() ? std::to_string(t.microbatch.value()) : "-";
}

std::string slice_name(const ir::Graph& graph, const ir::Task& t) {
  if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
    if (c->phase == ir::Phase::kOptimizer) return "OPT step=0";
    std::string name = phase_letter(c->phase) + mb_text(t) + " mb=" + mb_text(t) +
                       " chunk=" + (t.chunk.valid() ? std::to_string(t.chunk.value()) : "0");
    if (c->overlapped) name += " +" + phase_letter(c->overlapped->phase) + " (overlapped)";
    return name;
  }
  if (const auto* s = std::get_if<ir::Send>(&t.op)) {
    return std::string("SEND_") + (s->what == ir::P2PKind::kGradient ? "B" : "F") + mb_text(t) +
           " mb=" + mb_text(t) + " ->r" + std::to_string(s->peer.value());
  }
  if (const auto* r = std::get_if<ir::Recv>(&t.op)) {
    return std::string("RECV_") + (r->what == ir::P2PKind::kGradient ? "B" : "F") + mb_text(t) +
           " mb=" + mb_text(t) + " <-r" + std::to_string(r->peer.value());
  }
  if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
    return std::string(ir::to_string(c->op)) + " " + graph.group(c->group).name +
           " bytes=" + std::to_string(c->bytes);
  }
  return "host wait";
}

std::string category(const ir::Task& t) {
  if (t.kind() == ir::TaskKind::kCompute) return "compute";
  if (t.kind() == ir::TaskKind::kHostWait) return "annotation";
  return "comm";
}

void add_tag(std::vector<traces::Arg>& args, const char* key, std::int32_t value, bool valid) {
  if (valid) args.push_back({key, std::int64_t{value}});
}

}  // namespace

traces::TraceDocument simulation_trace(const ir::Graph& graph, const SimResult& result,
                                       std::vector<traces::Arg> metadata) {
  traces::TraceDocument doc;
  doc.metadata = std::move(metadata);
  const std::vector<std::int64_t> tids = stream_tids(graph);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const ir::RankCoords& c = graph.rank(ir::RankId{r}).coords;
    doc.processes.push_back({.pid = r,
                             .name = "Rank " + std::to_string(r) + " (pp=" + std::to_string(c.pp) +
                                     " tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp) +
                                     ")",
                             .sort_index = r});
    doc.threads.push_back({.pid = r, .tid = kHostTid, .name = "host", .sort_index = kHostTid});
    for (ir::StreamId s : graph.streams_of(ir::RankId{r})) {
      const std::int64_t tid = tids[s.index()];
      doc.threads.push_back({.pid = r,
                             .tid = tid,
                             .name = "stream " + std::to_string(tid) + " " + graph.stream(s).name,
                             .sort_index = tid});
    }
    doc.threads.push_back(
        {.pid = r, .tid = kBubbleTid, .name = "bubbles", .sort_index = kBubbleTid});
    doc.threads.push_back(
        {.pid = r, .tid = kAnnotationTid, .name = "annotations", .sort_index = kAnnotationTid});
  }

  for (std::int32_t i = 0; i < graph.num_tasks(); ++i) {
    const ir::TaskId id{i};
    const ir::Task& t = graph.task(id);
    const TaskTiming& timing = result.tasks[id.index()];
    if (timing.start < 0 || timing.end <= timing.start) continue;
    traces::Slice slice{.pid = t.rank.value(),
                        .tid = t.stream.valid() ? tids[t.stream.index()] : kHostTid,
                        .name = slice_name(graph, t),
                        .cat = category(t),
                        .start_ns = timing.start,
                        .duration_ns = timing.end - timing.start};
    slice.args.push_back({"rank", std::int64_t{t.rank.value()}});
    add_tag(slice.args, "stage", t.stage.value(), t.stage.valid());
    add_tag(slice.args, "microbatch", t.microbatch.value(), t.microbatch.valid());
    add_tag(slice.args, "chunk", t.chunk.value(), t.chunk.valid());
    slice.args.push_back({"task", std::int64_t{i}});
    if (t.stream.valid()) slice.args.push_back({"stream", slice.tid});
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      if (c->flops > 0) slice.args.push_back({"flops", c->flops});
      if (c->bytes_moved > 0) slice.args.push_back({"bytes", c->bytes_moved});
    } else if (const auto* coll = std::get_if<ir::Collective>(&t.op)) {
      const ir::Group& group = graph.group(coll->group);
      std::string members;
      for (ir::RankId m : group.ranks) {
        members += (members.empty() ? "[" : ", ") + std::to_string(m.value());
      }
      slice.args.push_back({"Collective name", std::string(ir::to_string(coll->op))});
      slice.args.push_back({"In msg nelems", coll->bytes});
      slice.args.push_back({"Group size", static_cast<std::int64_t>(group.ranks.size())});
      slice.args.push_back({"dtype", std::string(ir::to_string(coll->dtype))});
      slice.args.push_back({"Process Group Ranks", members + "]"});
    } else if (t.kind() == ir::TaskKind::kSend || t.kind() == ir::TaskKind::kRecv) {
      // One arrow per transfer: both ends carry the instance's id.
      const std::int64_t bind = graph.comm_instance(id) + 1;
      if (t.kind() == ir::TaskKind::kSend) {
        slice.flow_out = bind;
      } else {
        slice.flow_in = bind;
      }
    }
    doc.slices.push_back(std::move(slice));
  }

  for (std::size_t r = 0; r < result.ranks.size(); ++r) {
    const auto pid = static_cast<std::int64_t>(r);
    const RankMetrics& m = result.ranks[r];
    for (const Bubble& b : m.bubbles) {
      if (b.end <= b.start) continue;
      traces::Slice slice{.pid = pid,
                          .tid = kBubbleTid,
                          .name = "bubble",
                          .cat = "bubble",
                          .start_ns = b.start,
                          .duration_ns = b.end - b.start};
      slice.args.push_back({"reason", std::string(to_string(b.cause))});
      if (b.waited_on.valid())
        slice.args.push_back({"waited_on", std::int64_t{b.waited_on.value()}});
      doc.slices.push_back(std::move(slice));
    }
    for (const auto& [time, bytes] : m.memory_timeline) {
      doc.counters.push_back({.pid = pid,
                              .name = "HBM",
                              .ts_ns = time,
                              .series = {{"allocated_bytes", static_cast<double>(bytes)}}});
    }
    if (result.makespan > 0) {
      doc.slices.push_back({.pid = pid,
                            .tid = kAnnotationTid,
                            .name = "step 0",
                            .cat = "annotation",
                            .start_ns = 0,
                            .duration_ns = result.makespan});
    }
  }
  doc.instants.push_back({.pid = 0,
                          .tid = kAnnotationTid,
                          .name = "step 0 end",
                          .ts_ns = result.makespan,
                          .global = true});
  return doc;
}

}  // namespace metron::sim
