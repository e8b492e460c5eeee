#pragma once
// Private: the event loop behind sim::simulate (Note [simulation semantics] in simulator.h).

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metron/ir/ordering.h"
#include "metron/sim/simulator.h"
#include "rank_tracker.h"

namespace metron::sim::detail {

/// Pending task ends, earliest first: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster
/// algorithms for the shortest path problem", 1990) keyed by end time. It relies on the queue
/// being monotone — no end is ever earlier than the last time taken out, as a task ends no
/// earlier than now — and then pushes in O(1) and moves each event between buckets a few times
/// at most, instead of a binary heap's log2(running tasks) unpredictable compares per push and
/// pop. Events of one time come out together, in no particular order; the engine sorts them.
class EndQueue {
 public:
  struct Event {
    Time time;
    std::uint64_t order;  ///< rank in the high half, task id in the low half
  };

  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// `time` must not be earlier than the last time taken.
  void push(Time time, std::uint64_t order) {
    const std::size_t b = bucket_of(time);
    buckets_[b].push_back({time, order});
    nonempty_ |= std::uint64_t{1} << b;
    ++size_;
  }
  /// Whether events of the last time taken were pushed since it was taken.
  [[nodiscard]] bool has_last_time() const noexcept { return !buckets_[0].empty(); }
  /// Replaces `orders` with the orders of every event of the earliest time and returns that
  /// time. Not empty().
  Time take_earliest(std::vector<std::uint64_t>& orders);
  /// Appends the orders of the events pushed at the last time taken since it was taken.
  void take_last_time(std::vector<std::uint64_t>& orders);

 private:
  /// Bucket 0 holds events at last_; bucket b > 0 those whose time first differs from last_ in
  /// bit b − 1 (times are non-negative and not earlier than last_, so b <= 63).
  [[nodiscard]] std::size_t bucket_of(Time time) const noexcept {
    return static_cast<std::size_t>(
        std::bit_width(static_cast<std::uint64_t>(time) ^ static_cast<std::uint64_t>(last_)));
  }

  std::array<std::vector<Event>, 64> buckets_;
  std::uint64_t nonempty_ = 0;  ///< bit b: buckets_[b] holds events
  Time last_ = 0;
  std::size_t size_ = 0;
};

/// One run over one graph. ir::OrderingState decides what may start; the engine decides when,
/// keeps the pending ends in an EndQueue, and feeds every start and end to the per-rank
/// trackers. Per task it reads the graph's flat arrays (ir::FlatIndex) and writes the task's
/// timing: never the (large) ir::Task.
class Engine {
 public:
  /// `durations` must already be checked (one non-negative entry per task).
  Engine(const ir::Graph& graph, std::span<const Time> durations, const SimOptions& options);

  /// Runs until every task completed (true) or nothing can progress (false).
  bool run();
  /// What the state machine reports as blocked; meaningful after run() returned false.
  [[nodiscard]] std::vector<std::string> describe_blocked() const {
    return state_.describe_blocked();
  }
  /// The result so far (everything, after a successful run). Call once.
  [[nodiscard]] SimResult take_result();

 private:
  /// A compute task running while its rank's compute may be slowed down.
  struct RunningCompute {
    ir::TaskId task;
    double remaining;  ///< work left, in nanoseconds at full speed
    Time since;        ///< when `remaining` was last brought up to date
  };

  /// A communication instance running while it may be slowed down (comm slow-down only).
  struct RunningComm {
    double remaining = 0;  ///< work left, in nanoseconds at full speed
    Time since = 0;        ///< when `remaining` was last brought up to date
    bool slowed = false;   ///< whether a member's rank runs compute
  };

  /// Starts every startable unit at now_, including those made startable meanwhile.
  void start_ready();
  void start_task(ir::TaskId t, Time duration);
  /// Completes the ends due at now_ (batch_), in (rank, task) order.
  void finish_batch();
  void finish_task(ir::TaskId t);
  void push_end(ir::TaskId t, Time end) {
    // Ranks and task ids are non-negative, so (rank, task) order is the order of this packing.
    queue_.push(end, (static_cast<std::uint64_t>(facts_[t.index()].rank.value()) << 32U) |
                         static_cast<std::uint64_t>(t.value()));
  }
  /// Re-times the running compute tasks of `rank` after its slow-down factor changed.
  void retime(std::size_t rank, double old_factor, double new_factor);
  /// Whether a compute task runs on the rank of any member of `instance`.
  [[nodiscard]] bool overlaps_compute(std::int32_t instance) const;
  /// Re-times the running instances with a member on `rank` whose slow-down changed because
  /// the rank's compute started or stopped.
  void retime_comms(std::size_t rank);
  [[nodiscard]] std::pair<BubbleCause, ir::TaskId> gap_cause(ir::TaskId t) const;
  [[nodiscard]] std::vector<ir::TaskId> critical_path() const;

  const ir::Graph& graph_;
  // graph_.flat_index()
  const ir::TaskFacts* facts_;
  const ir::BufferId* effects_;
  const ir::CommFacts* instances_;
  std::vector<std::int64_t> wire_bytes_;  ///< by instance: what one member sends (comm_bytes.h)
  ir::OrderingState state_;
  double slowdown_factor_;  ///< 1 + compute_slowdown_during_comm
  bool slowdown_;           ///< whether the factor differs from 1 at all
  double comm_factor_;      ///< 1 + comm_slowdown_during_compute
  bool comm_slowdown_;      ///< whether that factor differs from 1
  bool retiming_;           ///< either slow-down: ends may move, stale ones stay queued

  // Per task. A task was reported to its rank's tracker (it has a positive duration and is not
  // a HostWait) exactly when its end is later than its start: see finish_task. What set its
  // start (whose start or completion made it startable) is state_.cause().
  std::vector<TaskTiming> timing_;

  // Per buffer.
  std::vector<std::int64_t> buffer_bytes_;
  std::vector<std::int32_t> buffer_users_left_;  ///< allocator and users still to complete

  // Per rank.
  std::vector<RankTracker> trackers_;
  /// Every rank's memory timeline, in consecutive slices (RankTracker::set_memory_points).
  std::vector<std::pair<Time, std::int64_t>> memory_points_;
  std::vector<std::int32_t> slowing_comms_;  ///< running communication tasks (slow-down only)
  std::vector<std::vector<RunningCompute>> running_compute_;  ///< slow-down only
  std::vector<std::int32_t> computing_;  ///< running compute tasks (comm slow-down only)
  /// Running instances with a member on the rank (comm slow-down only).
  std::vector<std::vector<std::int32_t>> comms_of_rank_;
  std::vector<RunningComm> running_comm_;  ///< by instance (comm slow-down only)

  Time now_ = 0;
  EndQueue queue_;
  std::vector<std::uint64_t> batch_;  ///< the ends due at now_, as EndQueue::Event::order
  ir::TaskId last_completed_;
};

}  // namespace metron::sim::detail
