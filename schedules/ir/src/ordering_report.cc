// The blocked-task report of OrderingState: what every interpreter prints when it stops making
// progress (SimGrid's status dump). Each blocked stream head is named with what it waits for,
// following partners across ranks one level deep.

#include <fmt/format.h>

#include <string>

#include "metron/ir/ordering.h"

namespace metron::ir {

std::string OrderingState::partner_status(TaskId partner) const {
  const Task& task = graph_.task(partner);
  switch (state(partner)) {
    case TaskState::kNotIssued:
      return fmt::format("which rank {} has not issued", task.rank.value());
    case TaskState::kReady:
    case TaskState::kStartable:
      return "which is ready";
    case TaskState::kRunning:
    case TaskState::kCompleted:
      return "which has started";
    case TaskState::kWaiting:
      break;
  }
  return "which " + why_waiting(partner);
}

std::string OrderingState::why_waiting(TaskId task) const {
  const Task& t = graph_.task(task);
  if (state(task) == TaskState::kNotIssued) {
    return fmt::format("is not issued: the host of rank {} is stopped at task {}", t.rank.value(),
                       host_blocked_on_[t.rank.index()].value());
  }
  std::vector<std::string> reasons;
  const auto unfinished = [&](TaskId d) { return state(d) != TaskState::kCompleted; };
  if (const TaskId p = graph_.stream_predecessor(task); p.valid() && unfinished(p)) {
    reasons.push_back(fmt::format("is queued behind {}", graph_.describe(p)));
  }
  if (const TaskId q = graph_.queue_predecessor(task);
      q.valid() && (state(q) == TaskState::kNotIssued || state(q) == TaskState::kWaiting ||
                    state(q) == TaskState::kReady)) {
    reasons.push_back(fmt::format("is behind {} on hardware queue {}", graph_.describe(q),
                                  graph_.queue_of(t.stream)));
  }
  for (TaskId d : t.deps) {
    if (unfinished(d)) reasons.push_back(fmt::format("waits for {}", graph_.describe(d)));
  }
  if (const auto* w = std::get_if<HostWait>(&t.op); w && unfinished(w->target)) {
    reasons.push_back(fmt::format("waits for {}", graph_.describe(w->target)));
  }
  if (reasons.empty()) return "is waiting";
  std::string out = reasons.front();
  for (std::size_t i = 1; i < reasons.size(); ++i) out += " and " + reasons[i];
  return out;
}

std::vector<std::string> OrderingState::describe_blocked() const {
  std::vector<std::string> out;
  for (std::int32_t r = 0; r < graph_.num_ranks(); ++r) {
    const RankId rank{r};
    if (const TaskId w = host_blocked_on_[rank.index()]; w.valid()) {
      const auto left = graph_.issue_order(rank).size() - host_next_[rank.index()];
      out.push_back(fmt::format("rank {} host: stopped at {} ({}); {} tasks not issued", r,
                                graph_.describe(w), why_waiting(w), left));
    }
    for (StreamId s : graph_.streams_of(rank)) {
      const auto fifo = graph_.stream_tasks(s);
      std::size_t head = 0;
      while (head < fifo.size() && state(fifo[head]) == TaskState::kCompleted) ++head;
      if (head == fifo.size()) continue;
      const TaskId t = fifo[head];
      const auto behind = fifo.size() - head - 1;
      std::string line =
          fmt::format("rank {} stream \"{}\": {} ", r, graph_.stream(s).name, graph_.describe(t));
      if (state(t) == TaskState::kReady) {
        line += "is ready but waits for its partners:";
        for (TaskId m : graph_.comm_members(graph_.comm_instance(t))) {
          if (m != t && state(m) != TaskState::kReady) {
            line += fmt::format("\n      {}, {}", graph_.describe(m), partner_status(m));
          }
        }
      } else if (state(t) == TaskState::kRunning) {
        continue;
      } else {
        line += why_waiting(t);
      }
      if (behind > 0) line += fmt::format(" ({} more queued behind it)", behind);
      out.push_back(std::move(line));
    }
  }
  return out;
}

}  // namespace metron::ir
