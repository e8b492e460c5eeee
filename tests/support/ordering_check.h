#pragma once
// An independent check that a measured timeline obeys the ordering rules of the task-graph
// contract (Note [ordering rules] in metron/ir/ordering.h), for the executor's tests: written
// from the rules, not from the executor's code, so that a run that broke a rule is caught
// whatever the executor believed it did.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/timelines/timeline.h"

namespace metron::testing {

/// Every violation, one line each; empty when the timeline obeys the rules. `tolerance_ns`
/// applies to comparisons across ranks only (their clocks are aligned by a barrier, not equal).
inline std::vector<std::string> ordering_violations(const ir::Graph& graph,
                                                    const timelines::Timeline& timeline,
                                                    std::int64_t tolerance_ns) {
  std::vector<std::string> out;
  const auto span = [&](ir::TaskId t) { return timeline.tasks[t.index()]; };
  const auto bad = [&](ir::TaskId t, const std::string& what) {
    out.push_back(graph.describe(t) + ": " + what);
  };
  for (std::int32_t i = 0; i < graph.num_tasks(); ++i) {
    const ir::TaskId id{i};
    const ir::Task& task = graph.task(id);
    const timelines::TaskSpan s = span(id);
    if (s.start_ns < 0 || s.end_ns < s.start_ns) {
      bad(id, "never ran");
      continue;
    }
    // Rule 2: a stream is a FIFO.
    if (const ir::TaskId p = graph.stream_predecessor(id);
        p.valid() && s.start_ns < span(p).end_ns) {
      bad(id, "started before its stream predecessor ended");
    }
    // Rule 3: dependencies complete first.
    for (const ir::TaskId d : task.deps) {
      if (s.start_ns < span(d).end_ns)
        bad(id, "started before its dependency " + graph.describe(d) + " ended");
    }
    // Rule 4: a hardware queue starts its tasks in issue order.
    if (const ir::TaskId q = graph.queue_predecessor(id);
        q.valid() && s.start_ns < span(q).start_ns) {
      bad(id, "started before the task issued before it on its hardware queue");
    }
  }
  // Rule 1: nothing is issued after a HostWait before the awaited task ends.
  if (!timeline.issue_ns.empty()) {
    for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
      std::int64_t released = 0;
      for (const ir::TaskId id : graph.issue_order(ir::RankId{r})) {
        if (timeline.issue_ns[id.index()] < released) bad(id, "issued before the host wait ended");
        if (const auto* w = std::get_if<ir::HostWait>(&graph.task(id).op)) {
          released = std::max(released, span(w->target).end_ns);
        }
      }
    }
  }
  // Rule 5: members of an instance meet: they overlap in time, and a receive ends after its send
  // started.
  for (std::int32_t c = 0; c < graph.num_comm_instances(); ++c) {
    const auto members = graph.comm_members(c);
    std::int64_t latest_start = 0;
    std::int64_t earliest_end = INT64_MAX;
    for (const ir::TaskId m : members) {
      latest_start = std::max(latest_start, span(m).start_ns);
      earliest_end = std::min(earliest_end, span(m).end_ns);
    }
    const ir::Task& first = graph.task(members.front());
    if (first.kind() == ir::TaskKind::kCollective && latest_start > earliest_end + tolerance_ns) {
      bad(members.front(), "its collective's members do not overlap in time");
    }
    if (first.kind() == ir::TaskKind::kSend || first.kind() == ir::TaskKind::kRecv) {
      const ir::TaskId send = first.kind() == ir::TaskKind::kSend ? members[0] : members[1];
      const ir::TaskId recv = first.kind() == ir::TaskKind::kSend ? members[1] : members[0];
      if (span(recv).end_ns + tolerance_ns < span(send).start_ns) {
        bad(recv, "ended before its send started");
      }
    }
  }
  return out;
}

}  // namespace metron::testing
