// The event loop. Every round at one instant first completes all ends due then (in (rank, task)
// order), then starts everything that became startable, in the state machine's order; zero-length
// tasks end in a later round at the same instant. Nothing on the hot path allocates once the
// scratch vectors have grown, and no string is built unless the run deadlocks.

#include "engine.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <variant>

#include "metron/base/error.h"

namespace metron::sim::detail {

using ir::TaskId;
using ir::TaskState;

Engine::Engine(const ir::Graph& graph, std::span<const Time> durations, const SimOptions& options)
    : graph_(graph),
      durations_(durations),
      state_(graph),
      slowdown_factor_(1.0 + options.compute_slowdown_during_comm),
      slowdown_(options.compute_slowdown_during_comm > 0),
      trackers_(static_cast<std::size_t>(graph.num_ranks())) {
  const auto n = static_cast<std::size_t>(graph.num_tasks());
  rank_of_.resize(n);
  flags_.resize(n);
  setter_.assign(n, TaskId{});
  timing_.assign(n, TaskTiming{});
  extra_of_.assign(n, -1);
  const auto& buffers = graph.data().buffers;
  buffer_users_left_.assign(buffers.size(), 0);
  buffer_bytes_.resize(buffers.size());
  for (std::size_t b = 0; b < buffers.size(); ++b) buffer_bytes_[b] = buffers[b].bytes;
  const auto tasks = graph.tasks();
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Task& task = tasks[i];
    rank_of_[i] = task.rank.value();
    flags_[i] = task.kind() == ir::TaskKind::kCompute ? kCompute
                : task.is_communication()             ? kComm
                                                      : kHostWait;
    add_extra(task, i);
  }
  if (slowdown_) {
    slowing_comms_.assign(trackers_.size(), 0);
    running_compute_.resize(trackers_.size());
  }
}

void Engine::add_extra(const ir::Task& task, std::size_t i) {
  Extra extra{};
  if (const auto* s = std::get_if<ir::Send>(&task.op)) {
    extra.bytes = s->bytes;
  } else if (const auto* c = std::get_if<ir::Collective>(&task.op)) {
    extra.bytes = c->bytes;
    extra.group = c->group;
  }
  if (extra.bytes == 0 && task.allocates.empty() && task.uses.empty()) return;
  // A buffer lives until its allocator and every user completed (ir::Buffer).
  extra.allocates_begin = static_cast<std::uint32_t>(effects_.size());
  for (ir::BufferId b : task.allocates) {
    ++buffer_users_left_[b.index()];
    effects_.push_back(b.value());
  }
  extra.uses_begin = static_cast<std::uint32_t>(effects_.size());
  for (ir::BufferId b : task.uses) {
    ++buffer_users_left_[b.index()];
    effects_.push_back(b.value());
  }
  extra.uses_end = static_cast<std::uint32_t>(effects_.size());
  extra_of_[i] = static_cast<std::int32_t>(extras_.size());
  extras_.push_back(extra);
  flags_[i] |= kExtra;
}

bool Engine::run() {
  collect(TaskId{});
  for (;;) {
    start_ready();
    if (heap_.empty()) break;
    now_ = heap_.front().time;
    while (!heap_.empty() && heap_.front().time == now_) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const TaskId t{static_cast<std::int32_t>(heap_.back().order & 0xffff'ffffU)};
      heap_.pop_back();
      // Lazy invalidation: a slowed-down task leaves its earlier end times behind in the heap.
      if (timing_[t.index()].end != now_ || state_.state(t) != TaskState::kRunning) continue;
      finish_task(t);
    }
  }
  return state_.done();
}

void Engine::collect(TaskId setter) {
  while (state_.any_startable()) {
    state_.pop_startable(unit_);
    const auto begin = static_cast<std::uint32_t>(ready_tasks_.size());
    ready_tasks_.insert(ready_tasks_.end(), unit_.begin(), unit_.end());
    ready_units_.push_back({begin, static_cast<std::uint32_t>(ready_tasks_.size()), setter});
  }
}

void Engine::start_ready() {
  // Starting a task can make its hardware-queue successor startable: the list grows meanwhile.
  for (std::size_t i = 0; i < ready_units_.size(); ++i) start_unit(ready_units_[i]);
  ready_units_.clear();
  ready_tasks_.clear();
}

void Engine::start_unit(const ReadyUnit unit) {
  // The members of an instance run together for the longest of their durations; host waits
  // take no time.
  Time duration = 0;
  for (std::uint32_t i = unit.begin; i < unit.end; ++i) {
    const TaskId t = ready_tasks_[i];
    if ((flags_[t.index()] & kHostWait) == 0) duration = std::max(duration, durations_[t.index()]);
  }
  for (std::uint32_t i = unit.begin; i < unit.end; ++i) {
    start_task(ready_tasks_[i], duration, unit.setter);
  }
}

void Engine::start_task(TaskId t, Time duration, TaskId setter) {
  const std::size_t i = t.index();
  const auto r = static_cast<std::size_t>(rank_of_[i]);
  state_.start(t);
  setter_[i] = setter;
  timing_[i].start = now_;
  Time end = now_ + duration;
  RankTracker& tracker = trackers_[r];
  if (duration > 0 && (flags_[i] & kCompute) != 0) {
    flags_[i] |= kTracked;
    if (tracker.starts_after_gap(now_)) {
      const auto [cause, waited_on] = gap_cause(t);
      tracker.compute_started(now_, cause, waited_on);
    } else {
      tracker.compute_started(now_, BubbleCause::kOther, TaskId{});
    }
    if (slowdown_) {
      running_compute_[r].push_back({t, static_cast<double>(duration), now_});
      if (slowing_comms_[r] > 0) {
        end = now_ + std::llround(static_cast<double>(duration) * slowdown_factor_);
      }
    }
  } else if (duration > 0 && (flags_[i] & kComm) != 0) {
    flags_[i] |= kTracked;
    tracker.comm_started(now_);
    if (slowdown_ && slowing_comms_[r]++ == 0) retime(r, 1.0, slowdown_factor_);
  }
  if ((flags_[i] & kExtra) != 0) {
    const Extra& extra = extras_[static_cast<std::size_t>(extra_of_[i])];
    for (std::uint32_t e = extra.allocates_begin; e < extra.uses_begin; ++e) {
      tracker.allocate(now_, buffer_bytes_[static_cast<std::size_t>(effects_[e])]);
    }
  }
  timing_[i].end = end;
  push_end(t, end);
  collect(t);
}

void Engine::push_end(TaskId t, Time end) {
  // Ranks and task ids are non-negative, so (rank, task) order is the order of this packing.
  const std::uint64_t order = (static_cast<std::uint64_t>(rank_of_[t.index()]) << 32U) |
                              static_cast<std::uint64_t>(t.value());
  heap_.push_back({end, order});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void Engine::finish_task(TaskId t) {
  const std::size_t i = t.index();
  const auto r = static_cast<std::size_t>(rank_of_[i]);
  RankTracker& tracker = trackers_[r];
  const std::uint8_t f = flags_[i];
  if ((f & kTracked) != 0) {
    if ((f & kCompute) != 0) {
      tracker.compute_ended(now_);
      if (slowdown_) {
        auto& running = running_compute_[r];
        const auto it = std::find_if(running.begin(), running.end(),
                                     [&](const RunningCompute& c) { return c.task == t; });
        METRON_ASSERT(it != running.end(), "finished compute task was not running");
        *it = running.back();
        running.pop_back();
      }
    } else {
      tracker.comm_ended(now_);
      if (slowdown_ && --slowing_comms_[r] == 0) retime(r, slowdown_factor_, 1.0);
    }
  }
  if ((f & kExtra) != 0) {
    const Extra& extra = extras_[static_cast<std::size_t>(extra_of_[i])];
    if (extra.bytes != 0) tracker.add_bytes_sent(extra.group, extra.bytes);
    for (std::uint32_t e = extra.allocates_begin; e < extra.uses_end; ++e) {
      const auto b = static_cast<std::size_t>(effects_[e]);
      if (--buffer_users_left_[b] == 0) tracker.release(now_, buffer_bytes_[b]);
    }
  }
  state_.complete(t);
  last_completed_ = t;
  collect(t);
}

void Engine::retime(std::size_t rank, double old_factor, double new_factor) {
  for (RunningCompute& c : running_compute_[rank]) {
    const double done = static_cast<double>(now_ - c.since) / old_factor;
    c.remaining = std::max(0.0, c.remaining - done);
    c.since = now_;
    const Time end = now_ + std::llround(c.remaining * new_factor);
    if (end != timing_[c.task.index()].end) {
      timing_[c.task.index()].end = end;
      push_end(c.task, end);
    }
  }
}

std::pair<BubbleCause, TaskId> Engine::gap_cause(TaskId t) const {
  TaskId by = setter_[t.index()];
  if (!by.valid()) return {BubbleCause::kOther, TaskId{}};
  // A host wait that released the host stands for what it waited on (Megatron's batched p2p
  // waits on its receives).
  if ((flags_[by.index()] & kHostWait) != 0) by = std::get<ir::HostWait>(graph_.task(by).op).target;
  switch (graph_.task(by).kind()) {
    case ir::TaskKind::kRecv:
      return {BubbleCause::kWaitRecv, by};
    case ir::TaskKind::kCollective:
      return {BubbleCause::kWaitCollective, by};
    default:
      return {BubbleCause::kOther, by};
  }
}

std::vector<TaskId> Engine::critical_path() const {
  std::vector<TaskId> path;
  for (TaskId t = last_completed_; t.valid(); t = setter_[t.index()]) path.push_back(t);
  std::reverse(path.begin(), path.end());
  return path;
}

SimResult Engine::take_result() {
  SimResult result;
  result.makespan = last_completed_.valid() ? timing_[last_completed_.index()].end : 0;
  result.critical_path = critical_path();
  result.tasks = std::move(timing_);
  result.ranks.reserve(trackers_.size());
  for (RankTracker& tracker : trackers_) result.ranks.push_back(tracker.finish(result.makespan));
  return result;
}

}  // namespace metron::sim::detail
