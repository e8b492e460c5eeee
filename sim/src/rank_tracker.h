#pragma once
// Private: what one rank's device is doing, kept up to date event by event, so that the metrics
// of RankMetrics come out of the run directly, without collecting and sorting intervals.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "metron/sim/simulator.h"

namespace metron::sim::detail {

/// Per-rank running counts and the time integrals derived from them. Only tasks of positive
/// duration are reported to it: a zero-length interval adds nothing to a union, and a
/// zero-duration compute task does not split a bubble.
class RankTracker {
 public:
  /// Whether a compute task starting at `now` ends an idle stretch (so it needs a cause).
  [[nodiscard]] bool starts_after_gap(Time now) const noexcept {
    return computes_ == 0 && (!any_busy_ || now > busy_end_);
  }
  // The per-event updates are inline: the simulator calls them a few times per task.

  /// A compute task starts; `cause` and `waited_on` describe the gap it ends, if any.
  void compute_started(Time now, BubbleCause cause, ir::TaskId waited_on) {
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
  void compute_ended(Time now) {
    advance(now);
    if (--computes_ == 0) busy_end_ = now;
  }
  void comm_started(Time now) {
    advance(now);
    ++comms_;
  }
  void comm_ended(Time now) {
    advance(now);
    --comms_;
  }

  /// A completed Send (group none) or collective member: its buffer bytes and its wire bytes.
  void add_bytes_sent(ir::GroupId group, std::int64_t buffer, std::int64_t wire) {
    if (!group.valid()) {
      p2p_bytes_sent_ += wire;
      any_p2p_sent_ = true;
      return;
    }
    for (auto& [g, sums] : bytes_sent_) {
      if (g == group) {
        sums.buffer += buffer;
        sums.wire += wire;
        return;
      }
    }
    bytes_sent_.push_back({group, {buffer, wire}});
  }

  void allocate(Time now, std::int64_t bytes) {
    allocated_ += bytes;
    record_memory(now);
  }
  void release(Time now, std::int64_t bytes) {
    allocated_ -= bytes;
    record_memory(now);
  }

  /// Where the memory timeline goes: room for every point the rank can have. The engine keeps
  /// all ranks' timelines in one array, so that the run writes to a few pages, not one per rank
  /// (with hundreds of ranks, more than the TLB holds).
  void set_memory_points(std::pair<Time, std::int64_t>* points) noexcept { points_ = points; }

  /// The metrics at `makespan` (nothing may run any more).
  [[nodiscard]] RankMetrics finish(Time makespan);

 private:
  /// Integrates busy / communication time over [last_change_, now) with the current counts.
  void advance(Time now) noexcept {
    const Time dt = now - last_change_;
    if (computes_ > 0) compute_busy_ += dt;
    if (comms_ > 0) {
      comm_total_ += dt;
      if (computes_ == 0) comm_exposed_ += dt;
    }
    last_change_ = now;
  }
  void record_memory(Time now) {
    peak_ = std::max(peak_, allocated_);
    // One point per instant: changes at one time (frees before allocations, Note [simulation
    // semantics]) collapse into the value after the last of them. The peak still sees every
    // intermediate value.
    if (num_points_ > 0 && points_[num_points_ - 1].first == now) {
      points_[num_points_ - 1].second = allocated_;
    } else {
      points_[num_points_++] = {now, allocated_};
    }
  }

  std::int32_t computes_ = 0;
  std::int32_t comms_ = 0;
  Time last_change_ = 0;
  bool any_busy_ = false;
  Time busy_end_ = 0;  ///< end of the last compute-busy interval (valid when any_busy_)
  Time compute_busy_ = 0;
  Time comm_total_ = 0;
  Time comm_exposed_ = 0;
  std::vector<Bubble> bubbles_;
  std::int64_t allocated_ = 0;
  std::int64_t peak_ = 0;
  std::pair<Time, std::int64_t>* points_ = nullptr;  ///< the memory timeline (set_memory_points)
  std::size_t num_points_ = 0;
  /// A rank talks in a handful of groups: a flat list beats a map on the hot path. Sends (group
  /// none, the most frequent) add up here without touching a separate allocation.
  struct SentBytes {
    std::int64_t buffer = 0;
    std::int64_t wire = 0;
  };
  std::vector<std::pair<ir::GroupId, SentBytes>> bytes_sent_;
  std::int64_t p2p_bytes_sent_ = 0;
  bool any_p2p_sent_ = false;
};

}  // namespace metron::sim::detail
