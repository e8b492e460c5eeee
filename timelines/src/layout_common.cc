// Note [merged trace layout] (merged_trace.h) for the rows and names both layouts share.

#include "layout_common.h"

#include <set>
#include <string>
#include <variant>

namespace metron::timelines::detail {
namespace {

constexpr std::int64_t kComputeTid = 7;
constexpr std::int64_t kTpTid = 20;
constexpr std::int64_t kDpTid = 21;
constexpr std::int64_t kSendTid = 22;
constexpr std::int64_t kRecvTid = 23;
constexpr std::int64_t kEpTid = 24;
constexpr std::int64_t kFirstOtherTid = 40;

std::int64_t preferred_tid(const std::string& name) {
  if (name == "compute") return kComputeTid;
  if (name.starts_with("pp-send")) return kSendTid;
  if (name.starts_with("pp-recv")) return kRecvTid;
  if (name.starts_with("tp")) return kTpTid;
  if (name.starts_with("dp")) return kDpTid;
  if (name.starts_with("ep")) return kEpTid;
  return kFirstOtherTid;
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

void add_tag(std::vector<traces::Arg>& args, const char* key, std::int32_t value, bool valid) {
  if (valid) args.push_back({key, std::int64_t{value}});
}

}  // namespace

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

void add_task_args(std::vector<traces::Arg>& args, std::int64_t rank, const ir::Task& task,
                   ir::TaskId id) {
  args.push_back({"rank", rank});
  add_tag(args, "stage", task.stage.value(), task.stage.valid());
  add_tag(args, "microbatch", task.microbatch.value(), task.microbatch.valid());
  add_tag(args, "chunk", task.chunk.value(), task.chunk.valid());
  args.push_back({"task", std::int64_t{id.value()}});
}

void add_memory_counter(traces::TraceDocument& doc, std::int64_t pid, std::int64_t tid,
                        const std::vector<std::pair<std::int64_t, std::int64_t>>& samples,
                        std::int64_t static_bytes, std::int64_t offset_ns) {
  if (static_bytes != 0 && (samples.empty() || samples.front().first > 0)) {
    // The static memory is there from the start: a sample at the step's start shows its level
    // before the first allocation (Perfetto draws nothing before a counter's first sample).
    doc.counters.push_back({.pid = pid,
                            .tid = tid,
                            .name = "HBM",
                            .ts_ns = offset_ns,
                            .series = {{"allocated_bytes", static_cast<double>(static_bytes)}}});
  }
  for (const auto& [time, bytes] : samples) {
    doc.counters.push_back(
        {.pid = pid,
         .tid = tid,
         .name = "HBM",
         .ts_ns = time + offset_ns,
         .series = {{"allocated_bytes", static_cast<double>(static_bytes + bytes)}}});
  }
}

}  // namespace metron::timelines::detail
