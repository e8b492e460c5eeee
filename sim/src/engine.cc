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
#include "metron/base/huge_pages.h"
#include "metron/sim/comm_bytes.h"

namespace metron::sim::detail {

using ir::TaskFacts;
using ir::TaskId;
using ir::TaskKind;
using ir::TaskState;

Time EndQueue::take_earliest(std::vector<std::uint64_t>& orders) {
  if (buckets_[0].empty()) {
    // The lowest non-empty bucket holds the earliest time; re-bucketing its events relative to
    // that time moves each of them to a lower bucket, those at that time to bucket 0.
    const auto b = static_cast<std::size_t>(std::countr_zero(nonempty_));
    std::vector<Event>& from = buckets_[b];
    Time earliest = from.front().time;
    for (const Event& e : from) earliest = std::min(earliest, e.time);
    last_ = earliest;
    for (const Event& e : from) {
      const std::size_t to = bucket_of(e.time);
      buckets_[to].push_back(e);
      nonempty_ |= std::uint64_t{1} << to;
    }
    from.clear();
    nonempty_ &= ~(std::uint64_t{1} << b);
  }
  orders.clear();
  take_last_time(orders);
  return last_;
}

void EndQueue::take_last_time(std::vector<std::uint64_t>& orders) {
  std::vector<Event>& now = buckets_[0];
  for (const Event& e : now) orders.push_back(e.order);
  size_ -= now.size();
  now.clear();
  nonempty_ &= ~std::uint64_t{1};
}

Engine::Engine(const ir::Graph& graph, std::span<const Time> durations, const SimOptions& options)
    : graph_(graph),
      facts_(graph.flat_index().tasks.data()),
      effects_(graph.flat_index().buffer_effects.data()),
      instances_(graph.flat_index().instances.data()),
      state_(graph),
      slowdown_factor_(1.0 + options.compute_slowdown_during_comm),
      slowdown_(options.compute_slowdown_during_comm > 0),
      comm_factor_(1.0 + options.comm_slowdown_during_compute),
      comm_slowdown_(options.comm_slowdown_during_compute > 0),
      retiming_(slowdown_ || comm_slowdown_) {
  const auto n = static_cast<std::size_t>(graph.num_tasks());
  const std::size_t instances = graph.flat_index().instances.size();
  wire_bytes_.reserve(instances);
  for (std::size_t i = 0; i < instances; ++i) {
    const ir::GroupId group = graph.flat_index().instances[i].group;
    const std::int64_t ranks = group.valid() && group.index() < options.group_sizes.size()
                                   ? options.group_sizes[group.index()]
                                   : 0;
    wire_bytes_.push_back(sim::wire_bytes(graph, static_cast<std::int32_t>(i), ranks));
  }
  trackers_.reserve(static_cast<std::size_t>(graph.num_ranks()));
  trackers_.resize(static_cast<std::size_t>(graph.num_ranks()));
  // Until a task starts, its end holds its duration: one array fewer to read on the hot path.
  timing_.reserve(n);
  metron::advise_huge_pages(timing_.data(), n * sizeof(TaskTiming));
  for (std::size_t i = 0; i < n; ++i) timing_.push_back({-1, durations[i]});
  const auto& buffers = graph.data().buffers;
  buffer_bytes_.reserve(buffers.size());
  metron::advise_huge_pages(buffer_bytes_.data(), buffers.size() * sizeof(std::int64_t));
  for (const ir::Buffer& b : buffers) buffer_bytes_.push_back(b.bytes);
  // A buffer lives until its allocator and every user completed (ir::Buffer).
  buffer_users_left_.reserve(buffers.size());
  metron::advise_huge_pages(buffer_users_left_.data(), buffers.size() * sizeof(std::int32_t));
  buffer_users_left_.assign(buffers.size(), 0);
  for (const ir::BufferId b : graph.flat_index().buffer_effects) ++buffer_users_left_[b.index()];
  // A buffer adds at most two points to its rank's memory timeline: its allocation and its
  // release (it has exactly one allocator, and only tasks of its rank use it; validated).
  std::vector<std::size_t> buffers_of(trackers_.size(), 0);
  for (const ir::Buffer& b : buffers) ++buffers_of[b.rank.index()];
  memory_points_.reserve(2 * buffers.size());
  metron::advise_huge_pages(memory_points_.data(), 2 * buffers.size() * sizeof(memory_points_[0]));
  memory_points_.resize(2 * buffers.size());
  std::size_t first = 0;
  for (std::size_t r = 0; r < trackers_.size(); ++r) {
    trackers_[r].set_memory_points(memory_points_.data() + first);
    first += 2 * buffers_of[r];
  }
  if (slowdown_) {
    slowing_comms_.assign(trackers_.size(), 0);
    running_compute_.resize(trackers_.size());
  }
  if (comm_slowdown_) {
    computing_.assign(trackers_.size(), 0);
    comms_of_rank_.resize(trackers_.size());
    running_comm_.resize(static_cast<std::size_t>(graph.num_comm_instances()));
  }
}

bool Engine::run() {
  for (;;) {
    start_ready();
    if (queue_.empty()) break;
    now_ = queue_.take_earliest(batch_);
    finish_batch();
  }
  return state_.done();
}

void Engine::start_ready() {
  // Starting a task can make its hardware-queue successor startable: the FIFO grows meanwhile.
  ir::StartableUnit unit;
  while (state_.pop_startable(unit)) {
    if (unit.instance < 0) {
      // Host waits take no time.
      const std::size_t i = unit.task.index();
      start_task(unit.task, facts_[i].kind == TaskKind::kHostWait ? 0 : timing_[i].end);
      continue;
    }
    // The members of an instance run together for the longest of their durations.
    Time duration = 0;
    for (const TaskId m : unit.members) duration = std::max(duration, timing_[m.index()].end);
    if (comm_slowdown_ && duration > 0) {
      const bool slowed = overlaps_compute(unit.instance);
      running_comm_[static_cast<std::size_t>(unit.instance)] = {
          .remaining = static_cast<double>(duration), .since = now_, .slowed = slowed};
      for (const TaskId m : unit.members) {
        comms_of_rank_[facts_[m.index()].rank.index()].push_back(unit.instance);
      }
      if (slowed) duration = std::llround(static_cast<double>(duration) * comm_factor_);
    }
    for (const TaskId m : unit.members) start_task(m, duration);
  }
}

void Engine::start_task(TaskId t, Time duration) {
  const std::size_t i = t.index();
  const TaskFacts& f = facts_[i];
  const std::size_t r = f.rank.index();
  state_.start(t);
  if (f.stream_successor.valid()) {
    // What starting the stream successor will read (the state machine fetches the rest).
    const std::size_t n = f.stream_successor.index();
    __builtin_prefetch(&timing_[n]);
  }
  timing_[i].start = now_;
  Time end = now_ + duration;
  RankTracker& tracker = trackers_[r];
  if (duration > 0 && f.kind == TaskKind::kCompute) {
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
    if (comm_slowdown_ && computing_[r]++ == 0) retime_comms(r);
  } else if (duration > 0 && f.kind != TaskKind::kHostWait) {
    tracker.comm_started(now_);
    if (slowdown_ && slowing_comms_[r]++ == 0) retime(r, 1.0, slowdown_factor_);
  }
  for (std::int32_t e = f.allocates_begin; e < f.uses_begin; ++e) {
    tracker.allocate(now_, buffer_bytes_[effects_[e].index()]);
  }
  timing_[i].end = end;
  push_end(t, end);
}

void Engine::finish_batch() {
  std::sort(batch_.begin(), batch_.end());
  // The batch says which tasks complete next: fetch their state a few tasks ahead, so that the
  // fetches overlap the completions before them. With bench/sim_bench's 1F1B step this took
  // ~116 ms to ~110 ms; distances 2, 4 and 8 measured alike within the noise.
  constexpr std::size_t kPrefetchDistance = 4;
  const auto task_of = [](std::uint64_t order) {
    return TaskId{static_cast<std::int32_t>(order & 0xffff'ffffU)};
  };
  for (std::size_t k = 0; k < std::min(kPrefetchDistance, batch_.size()); ++k) {
    state_.prefetch(task_of(batch_[k]));
  }
  for (std::size_t k = 0; k < batch_.size(); ++k) {
    if (k + kPrefetchDistance < batch_.size()) {
      const TaskId ahead = task_of(batch_[k + kPrefetchDistance]);
      state_.prefetch(ahead);
      __builtin_prefetch(&timing_[ahead.index()]);
    }
    const TaskId t = task_of(batch_[k]);
    // Lazy invalidation: a slowed-down task leaves its earlier end times behind in the queue.
    // Without slow-down every task has exactly one end, so every event is due.
    if (retiming_ && (timing_[t.index()].end != now_ || state_.state(t) != TaskState::kRunning)) {
      continue;
    }
    finish_task(t);
    // Re-timing can move an end to now_ itself: it is due in this batch, in (rank, task) order
    // among the ends not completed yet.
    if (retiming_ && queue_.has_last_time()) {
      queue_.take_last_time(batch_);
      std::sort(batch_.begin() + static_cast<std::ptrdiff_t>(k) + 1, batch_.end());
    }
  }
}

void Engine::finish_task(TaskId t) {
  const std::size_t i = t.index();
  const TaskFacts& f = facts_[i];
  const std::size_t r = f.rank.index();
  RankTracker& tracker = trackers_[r];
  // Reported to the tracker at its start exactly when it had a positive duration and is not a
  // host wait; those, and only those, end later than they start (a slowed-down or re-timed end
  // only grows, or is now_ > start).
  if (timing_[i].end > timing_[i].start) {
    if (f.kind == TaskKind::kCompute) {
      tracker.compute_ended(now_);
      if (slowdown_) {
        auto& running = running_compute_[r];
        const auto it = std::find_if(running.begin(), running.end(),
                                     [&](const RunningCompute& c) { return c.task == t; });
        METRON_ASSERT(it != running.end(), "finished compute task was not running");
        *it = running.back();
        running.pop_back();
      }
      if (comm_slowdown_ && --computing_[r] == 0) retime_comms(r);
    } else {
      tracker.comm_ended(now_);
      if (slowdown_ && --slowing_comms_[r] == 0) retime(r, slowdown_factor_, 1.0);
      if (comm_slowdown_) {
        std::vector<std::int32_t>& running = comms_of_rank_[r];
        const auto it = std::find(running.begin(), running.end(), f.comm_instance);
        METRON_ASSERT(it != running.end(), "finished communication was not running");
        *it = running.back();
        running.pop_back();
      }
    }
  }
  if (f.kind == TaskKind::kSend || f.kind == TaskKind::kCollective) {
    const ir::CommFacts& c = instances_[f.comm_instance];
    if (c.bytes != 0) {
      tracker.add_bytes_sent(c.group, c.bytes,
                             wire_bytes_[static_cast<std::size_t>(f.comm_instance)]);
    }
  }
  for (std::int32_t e = f.allocates_begin; e < f.uses_end; ++e) {
    const std::size_t b = effects_[e].index();
    if (--buffer_users_left_[b] == 0) tracker.release(now_, buffer_bytes_[b]);
  }
  state_.complete(t);
  last_completed_ = t;
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

bool Engine::overlaps_compute(std::int32_t instance) const {
  for (const TaskId m : graph_.comm_members(instance)) {
    if (computing_[facts_[m.index()].rank.index()] > 0) return true;
  }
  return false;
}

void Engine::retime_comms(std::size_t rank) {
  for (const std::int32_t instance : comms_of_rank_[rank]) {
    RunningComm& c = running_comm_[static_cast<std::size_t>(instance)];
    const bool slowed = overlaps_compute(instance);
    if (slowed == c.slowed) continue;
    const std::span<const TaskId> members = graph_.comm_members(instance);
    // Ending now: its members complete in this batch, all at the same end.
    if (timing_[members.front().index()].end == now_) continue;
    const double done = static_cast<double>(now_ - c.since) / (c.slowed ? comm_factor_ : 1.0);
    c.remaining = std::max(0.0, c.remaining - done);
    c.since = now_;
    c.slowed = slowed;
    const Time end = now_ + std::llround(c.remaining * (slowed ? comm_factor_ : 1.0));
    for (const TaskId m : members) {
      if (timing_[m.index()].end == end) continue;
      timing_[m.index()].end = end;
      push_end(m, end);
    }
  }
}

std::pair<BubbleCause, TaskId> Engine::gap_cause(TaskId t) const {
  TaskId by = state_.cause(t);
  if (!by.valid()) return {BubbleCause::kOther, TaskId{}};
  // A host wait that released the host stands for what it waited on (Megatron's batched p2p
  // waits on its receives).
  if (facts_[by.index()].kind == TaskKind::kHostWait) {
    by = std::get<ir::HostWait>(graph_.task(by).op).target;
  }
  switch (facts_[by.index()].kind) {
    case TaskKind::kRecv:
      return {BubbleCause::kWaitRecv, by};
    case TaskKind::kCollective:
      return {BubbleCause::kWaitCollective, by};
    default:
      return {BubbleCause::kOther, by};
  }
}

std::vector<TaskId> Engine::critical_path() const {
  std::vector<TaskId> path;
  for (TaskId t = last_completed_; t.valid(); t = state_.cause(t)) path.push_back(t);
  std::reverse(path.begin(), path.end());
  return path;
}

SimResult Engine::take_result() {
  SimResult result;
  result.makespan = last_completed_.valid() ? timing_[last_completed_.index()].end : 0;
  result.critical_path = critical_path();
  if (!state_.done()) {
    // Tasks that never started still hold their durations.
    for (TaskTiming& t : timing_) {
      if (t.start < 0) t.end = -1;
    }
  }
  result.tasks = std::move(timing_);
  result.ranks.reserve(trackers_.size());
  for (RankTracker& tracker : trackers_) result.ranks.push_back(tracker.finish(result.makespan));
  return result;
}

}  // namespace metron::sim::detail
