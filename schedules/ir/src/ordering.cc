#include "metron/ir/ordering.h"

#include <string>

#include "metron/base/error.h"

namespace metron::ir {

OrderingState::OrderingState(const Graph& graph)
    : graph_(graph),
      pending_(static_cast<std::size_t>(graph.num_tasks()), 0),
      state_(static_cast<std::size_t>(graph.num_tasks()), TaskState::kNotIssued),
      is_host_wait_(static_cast<std::size_t>(graph.num_tasks()), 0),
      ready_members_(static_cast<std::size_t>(graph.num_comm_instances()), 0),
      host_next_(static_cast<std::size_t>(graph.num_ranks()), 0),
      host_blocked_on_(static_cast<std::size_t>(graph.num_ranks())) {
  const auto tasks = graph.tasks();
  for (std::int32_t i = 0; i < graph.num_tasks(); ++i) {
    const TaskId t{i};
    const Task& task = tasks[t.index()];
    auto& pending = pending_[t.index()];
    pending = 1;  // rule 1: not issued yet
    if (graph.stream_predecessor(t).valid()) ++pending;
    if (graph.queue_predecessor(t).valid()) ++pending;
    pending += static_cast<std::int32_t>(task.deps.size());
    if (std::holds_alternative<HostWait>(task.op)) {
      ++pending;
      is_host_wait_[t.index()] = 1;
    }
  }
  for (std::size_t r = 0; r < host_next_.size(); ++r) advance_host(r);
}

void OrderingState::advance_host(std::size_t rank) {
  const auto order = graph_.issue_order(RankId{static_cast<std::int32_t>(rank)});
  while (host_next_[rank] < order.size()) {
    const TaskId t = order[host_next_[rank]++];
    state_[t.index()] = TaskState::kWaiting;
    satisfy(t);
    if (is_host_wait_[t.index()] != 0) {
      host_blocked_on_[rank] = t;
      return;
    }
  }
}

void OrderingState::satisfy(TaskId task) {
  METRON_ASSERT(pending_[task.index()] > 0,
                "condition satisfied twice for " + graph_.describe(task));
  if (--pending_[task.index()] == 0) on_ready(task);
}

void OrderingState::on_ready(TaskId task) {
  const std::int32_t instance = graph_.comm_instance(task);
  if (instance < 0) {
    state_[task.index()] = TaskState::kStartable;
    startable_.push_back({-1, task});
    return;
  }
  state_[task.index()] = TaskState::kReady;
  const auto members = graph_.comm_members(instance);
  if (++ready_members_[static_cast<std::size_t>(instance)] ==
      static_cast<std::int32_t>(members.size())) {
    for (TaskId m : members) state_[m.index()] = TaskState::kStartable;
    startable_.push_back({instance, members.front()});
  }
}

bool OrderingState::pop_startable(std::vector<TaskId>& unit) {
  unit.clear();
  if (startable_head_ == startable_.size()) return false;
  const Unit next = startable_[startable_head_++];
  if (startable_head_ == startable_.size()) {
    startable_.clear();
    startable_head_ = 0;
  }
  if (next.instance < 0) {
    unit.push_back(next.task);
  } else {
    const auto members = graph_.comm_members(next.instance);
    unit.assign(members.begin(), members.end());
  }
  return true;
}

void OrderingState::start(TaskId task) {
  METRON_ASSERT(state_[task.index()] == TaskState::kStartable,
                "start of a task that may not start: " + graph_.describe(task));
  state_[task.index()] = TaskState::kRunning;
  if (const TaskId next = graph_.queue_successor(task); next.valid()) satisfy(next);
}

void OrderingState::complete(TaskId task) {
  METRON_ASSERT(state_[task.index()] == TaskState::kRunning,
                "completion of a task that is not running: " + graph_.describe(task));
  state_[task.index()] = TaskState::kCompleted;
  ++completed_;
  if (const TaskId next = graph_.stream_successor(task); next.valid()) satisfy(next);
  for (TaskId d : graph_.dependents(task)) satisfy(d);
  if (is_host_wait_[task.index()] != 0) {
    const auto rank = graph_.task(task).rank.index();
    host_blocked_on_[rank] = TaskId{};
    advance_host(rank);
  }
}

}  // namespace metron::ir
