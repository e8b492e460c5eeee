#pragma once
// Private: what one rank's device is doing, kept up to date event by event, so that the metrics
// of RankMetrics come out of the run directly, without collecting and sorting intervals.

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
  /// A compute task starts; `cause` and `waited_on` describe the gap it ends, if any.
  void compute_started(Time now, BubbleCause cause, ir::TaskId waited_on);
  void compute_ended(Time now);
  void comm_started(Time now);
  void comm_ended(Time now);

  /// Bytes a completed Send (group none) or collective member moved.
  void add_bytes_sent(ir::GroupId group, std::int64_t bytes);

  void allocate(Time now, std::int64_t bytes);
  void release(Time now, std::int64_t bytes);

  /// The metrics at `makespan` (nothing may run any more).
  [[nodiscard]] RankMetrics finish(Time makespan);

 private:
  /// Integrates busy / communication time over [last_change_, now) with the current counts.
  void advance(Time now) noexcept;
  void record_memory(Time now);

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
  std::vector<std::pair<Time, std::int64_t>> timeline_;
  /// A rank talks in a handful of groups: a flat list beats a map on the hot path.
  std::vector<std::pair<ir::GroupId, std::int64_t>> bytes_sent_;
};

}  // namespace metron::sim::detail
