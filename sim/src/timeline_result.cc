#include "metron/sim/timeline_result.h"

#include <algorithm>
#include <utility>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/intervals.h"
#include "metron/sim/comm_bytes.h"

namespace metron::sim {
namespace {

class RankResult {
 public:
  RankResult(const ir::Graph& graph, const timelines::Timeline& timeline)
      : graph_(graph), timeline_(timeline), rendezvous_(rendezvous(graph, timeline)) {}

  RankMetrics metrics(ir::RankId rank) const {
    RankMetrics m;
    std::vector<Interval> compute;
    std::vector<Interval> comm;
    for (const ir::TaskId id : graph_.issue_order(rank)) {
      const timelines::TaskSpan& span = timeline_.tasks[id.index()];
      if (span.start_ns < 0 || span.end_ns < span.start_ns) continue;
      const ir::Task& task = graph_.task(id);
      if (task.kind() == ir::TaskKind::kCompute) compute.emplace_back(span.start_ns, span.end_ns);
      if (task.is_communication()) {
        const std::int32_t instance = graph_.comm_instance(id);
        const Time from =
            instance < 0 ? span.start_ns
                         : std::max(span.start_ns, rendezvous_[static_cast<std::size_t>(instance)]);
        comm.emplace_back(from, span.end_ns);
        if (const auto* c = std::get_if<ir::Collective>(&task.op); c != nullptr && c->bytes != 0) {
          m.bytes_sent[c->group] += wire_bytes(graph_, instance);
          m.collective_bytes[c->group] += c->bytes;
        }
        if (const auto* s = std::get_if<ir::Send>(&task.op); s != nullptr && s->bytes != 0) {
          m.bytes_sent[ir::GroupId{}] += s->bytes;
          m.collective_bytes[ir::GroupId{}] += s->bytes;
        }
      }
    }
    const std::vector<Interval> busy = merged(std::move(compute));
    const std::vector<Interval> talking = merged(std::move(comm));
    const Time makespan = timeline_.step_end_ns;
    m.compute_busy = length(busy);
    m.idle = makespan - m.compute_busy;
    m.comm_total = length(talking);
    m.comm_overlapped = overlap(talking, busy);
    m.comm_exposed = m.comm_total - m.comm_overlapped;
    bubbles(rank, busy, makespan, m);
    if (rank.index() < timeline_.memory.size()) {
      m.memory_timeline = timeline_.memory[rank.index()];
      for (const auto& [at, bytes] : m.memory_timeline) {
        m.peak_memory_bytes = std::max(m.peak_memory_bytes, bytes);
      }
    }
    return m;
  }

 private:
  void bubbles(ir::RankId rank, const std::vector<Interval>& busy, Time makespan,
               RankMetrics& m) const {
    for (BubbleCause c : {BubbleCause::kWarmup, BubbleCause::kCooldown, BubbleCause::kWaitRecv,
                          BubbleCause::kWaitCollective, BubbleCause::kOther}) {
      m.bubble[c] = 0;
    }
    const auto add = [&](Time start, Time end, BubbleCause cause, ir::TaskId by) {
      if (end <= start) return;
      m.bubbles.push_back({start, end, cause, by});
      m.bubble[cause] += end - start;
    };
    if (busy.empty()) {
      add(0, makespan, BubbleCause::kWarmup, ir::TaskId{});
      return;
    }
    add(0, busy.front().first, BubbleCause::kWarmup, ir::TaskId{});
    for (std::size_t i = 1; i < busy.size(); ++i) {
      const auto [cause, by] = gap_cause(rank, busy[i].first);
      add(busy[i - 1].second, busy[i].first, cause, by);
    }
    add(busy.back().second, makespan, BubbleCause::kCooldown, ir::TaskId{});
  }

  // What the compute task starting at `at` (the first one of the rank) waited for last.
  std::pair<BubbleCause, ir::TaskId> gap_cause(ir::RankId rank, Time at) const {
    ir::TaskId host_wait;  // the last HostWait issued before the task
    for (const ir::TaskId id : graph_.issue_order(rank)) {
      const ir::Task& task = graph_.task(id);
      if (task.kind() == ir::TaskKind::kHostWait) host_wait = id;
      if (task.kind() != ir::TaskKind::kCompute || timeline_.tasks[id.index()].start_ns != at) {
        continue;
      }
      ir::TaskId by;
      Time latest = -1;
      const auto consider = [&](ir::TaskId t) {
        if (!t.valid()) return;
        const Time end = timeline_.tasks[t.index()].end_ns;
        if (end >= latest) {  // on a tie the later condition, as the simulator's order
          latest = end;
          by = t;
        }
      };
      consider(graph_.stream_predecessor(id));
      for (const ir::TaskId d : task.deps) consider(d);
      consider(host_wait);
      if (!by.valid()) return {BubbleCause::kOther, by};
      if (const auto* w = std::get_if<ir::HostWait>(&graph_.task(by).op)) by = w->target;
      switch (graph_.task(by).kind()) {
        case ir::TaskKind::kRecv:
          return {BubbleCause::kWaitRecv, by};
        case ir::TaskKind::kCollective:
          return {BubbleCause::kWaitCollective, by};
        default:
          return {BubbleCause::kOther, by};
      }
    }
    return {BubbleCause::kOther, ir::TaskId{}};
  }

  // Note [timeline metrics]: each communication instance's rendezvous, the latest start of
  // its members that ran (-1 when none did).
  static std::vector<Time> rendezvous(const ir::Graph& graph, const timelines::Timeline& timeline) {
    std::vector<Time> out(static_cast<std::size_t>(graph.num_comm_instances()), -1);
    for (std::int32_t i = 0; i < graph.num_comm_instances(); ++i) {
      for (const ir::TaskId member : graph.comm_members(i)) {
        out[static_cast<std::size_t>(i)] =
            std::max(out[static_cast<std::size_t>(i)], timeline.tasks[member.index()].start_ns);
      }
    }
    return out;
  }

  const ir::Graph& graph_;
  const timelines::Timeline& timeline_;
  std::vector<Time> rendezvous_;
};

}  // namespace

SimResult timeline_result(const ir::Graph& graph, const timelines::Timeline& timeline) {
  if (std::ssize(timeline.tasks) != graph.num_tasks()) {
    throw InvalidConfig("timeline: expected a span per task (" + std::to_string(graph.num_tasks()) +
                        "); got " + std::to_string(timeline.tasks.size()));
  }
  SimResult out;
  out.makespan = timeline.step_end_ns;
  for (const timelines::TaskSpan& span : timeline.tasks) {
    out.tasks.push_back({span.start_ns, span.end_ns});
  }
  const RankResult ranks(graph, timeline);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r)
    out.ranks.push_back(ranks.metrics(ir::RankId{r}));
  return out;
}

}  // namespace metron::sim
