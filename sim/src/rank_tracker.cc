#include "rank_tracker.h"

#include <algorithm>
#include <utility>

namespace metron::sim::detail {

RankMetrics RankTracker::finish(Time makespan) {
  advance(makespan);
  RankMetrics m;
  m.compute_busy = compute_busy_;
  m.idle = makespan - compute_busy_;
  m.comm_total = comm_total_;
  m.comm_exposed = comm_exposed_;
  m.comm_overlapped = comm_total_ - comm_exposed_;
  m.peak_memory_bytes = peak_;
  m.memory_timeline.assign(points_, points_ + num_points_);
  m.bubbles = std::move(bubbles_);
  for (const auto& [group, sums] : bytes_sent_) {
    m.bytes_sent[group] = sums.wire;
    m.collective_bytes[group] = sums.buffer;
  }
  if (any_p2p_sent_) {
    m.bytes_sent[ir::GroupId{}] = p2p_bytes_sent_;
    m.collective_bytes[ir::GroupId{}] = p2p_bytes_sent_;
  }
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
