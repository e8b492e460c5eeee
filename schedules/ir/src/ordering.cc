#include "metron/ir/ordering.h"

#include <string>

#include "metron/base/error.h"
#include "metron/base/huge_pages.h"

namespace metron::ir {

OrderingState::OrderingState(const Graph& graph)
    : graph_(graph),
      facts_(graph.flat_index().tasks.data()),
      dependents_(graph.flat_index().dependents.data()),
      instances_(graph.flat_index().instances.data()),
      comm_members_(graph.flat_index().comm_members.data()),
      num_tasks_(graph.num_tasks()),
      issue_order_(static_cast<std::size_t>(graph.num_ranks())),
      host_next_(static_cast<std::size_t>(graph.num_ranks()), 0),
      host_blocked_on_(static_cast<std::size_t>(graph.num_ranks())) {
  const auto n = static_cast<std::size_t>(graph.num_tasks());
  progress_.reserve(n);
  advise_huge_pages(progress_.data(), n * sizeof(Progress));
  progress_.resize(n);
  const auto instances = graph.flat_index().instances;
  members_not_ready_.reserve(instances.size());
  advise_huge_pages(members_not_ready_.data(), instances.size() * sizeof(std::int32_t));
  for (const CommFacts& c : instances)
    members_not_ready_.push_back(c.members_end - c.members_begin);
  for (std::size_t r = 0; r < issue_order_.size(); ++r) {
    issue_order_[r] = graph.issue_order(RankId{static_cast<std::int32_t>(r)});
  }
  for (std::size_t r = 0; r < host_next_.size(); ++r) advance_host(r);
}

void OrderingState::advance_host(std::size_t rank) {
  const auto order = issue_order_[rank];
  while (host_next_[rank] < order.size()) {
    const TaskId t = order[host_next_[rank]++];
    const TaskFacts& f = facts_[t.index()];
    // Issue is the task's last unmet condition: met now, and the others counted down already.
    Progress& p = progress_[t.index()];
    p.state = TaskState::kWaiting;
    p.pending += f.conditions;
    METRON_ASSERT(p.pending >= 0, "condition satisfied twice for " + graph_.describe(t));
    if (p.pending == 0) on_ready(t);
    if (f.kind == TaskKind::kHostWait) {
      host_blocked_on_[rank] = t;
      return;
    }
  }
}

bool OrderingState::pop_startable(std::vector<TaskId>& unit) {
  unit.clear();
  StartableUnit next;
  if (!pop_startable(next)) return false;
  if (next.instance < 0) {
    unit.push_back(next.task);
  } else {
    unit.assign(next.members.begin(), next.members.end());
  }
  return true;
}

void OrderingState::fail_start(TaskId task) const {
  throw InternalError(__FILE__, __LINE__,
                      "start of a task that may not start: " + graph_.describe(task));
}

void OrderingState::fail_complete(TaskId task) const {
  throw InternalError(__FILE__, __LINE__,
                      "completion of a task that is not running: " + graph_.describe(task));
}

void OrderingState::fail_satisfy(TaskId task) const {
  throw InternalError(__FILE__, __LINE__, "condition satisfied twice for " + graph_.describe(task));
}

}  // namespace metron::ir
