#include "rank_tracker.h"

#include <algorithm>
#include <utility>

namespace metron::sim::detail {

void RankTracker::advance(Time now) noexcept {
  const Time dt = now - last_change_;
  if (computes_ > 0) compute_busy_ += dt;
  if (comms_ > 0) {
    comm_total_ += dt;
    if (computes_ == 0) comm_exposed_ += dt;
  }
  last_change_ = now;
}

void RankTracker::compute_started(Time now, BubbleCause cause, ir::TaskId waited_on) {
  advance(now);
  if (computes_++ > 0) return;
  if (!any_busy_) {
    // Before the first compute task everything is warm-up, whatever the task waited for.
    if (now > 0) bubbles_.push_back({0, now, BubbleCause::kWarmup, waited_on});
    any_busy_ = true;
  } else if (now > busy_end_) {
    bubbles_.push_back({busy_end_, now, cause, waited_on});
  }
}

void RankTracker::compute_ended(Time now) {
  advance(now);
  if (--computes_ == 0) busy_end_ = now;
}

void RankTracker::comm_started(Time now) {
  advance(now);
  ++comms_;
}

void RankTracker::comm_ended(Time now) {
  advance(now);
  --comms_;
}

void RankTracker::record_memory(Time now) {
  peak_ = std::max(peak_, allocated_);
  // One point per instant: changes at one time (frees before allocations, Note [simulation
  // semantics]) collapse into the value after the last of them. The peak still sees every
  // intermediate value.
  if (!timeline_.empty() && timeline_.back().first == now) {
    timeline_.back().second = allocated_;
  } else {
    timeline_.emplace_back(now, allocated_);
  }
}

void RankTracker::allocate(Time now, std::int64_t bytes) {
  allocated_ += bytes;
  record_memory(now);
}

void RankTracker::release(Time now, std::int64_t bytes) {
  allocated_ -= bytes;
  record_memory(now);
}

void RankTracker::add_bytes_sent(ir::GroupId group, std::int64_t bytes) {
  for (auto& [g, sum] : bytes_sent_) {
    if (g == group) {
      sum += bytes;
      return;
    }
  }
  bytes_sent_.emplace_back(group, bytes);
}

RankMetrics RankTracker::finish(Time makespan) {
  advance(makespan);
  RankMetrics m;
  m.compute_busy = compute_busy_;
  m.idle = makespan - compute_busy_;
  m.comm_total = comm_total_;
  m.comm_exposed = comm_exposed_;
  m.comm_overlapped = comm_total_ - comm_exposed_;
  m.peak_memory_bytes = peak_;
  m.memory_timeline = std::move(timeline_);
  m.bubbles = std::move(bubbles_);
  m.bytes_sent.insert(bytes_sent_.begin(), bytes_sent_.end());
  if (!any_busy_) {
    // No compute at all: the whole run is "before the first compute task".
    if (makespan > 0) m.bubbles.push_back({0, makespan, BubbleCause::kWarmup, ir::TaskId{}});
  } else if (makespan > busy_end_) {
    m.bubbles.push_back({busy_end_, makespan, BubbleCause::kCooldown, ir::TaskId{}});
  }
  for (BubbleCause c : {BubbleCause::kWarmup, BubbleCause::kCooldown, BubbleCause::kWaitRecv,
                        BubbleCause::kWaitCollective, BubbleCause::kOther}) {
    m.bubble[c] = 0;
  }
  for (const Bubble& b : m.bubbles) m.bubble[b.cause] += b.end - b.start;
  return m;
}

}  // namespace metron::sim::detail
