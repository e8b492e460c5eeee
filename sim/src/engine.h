#pragma once
// Private: the event loop behind sim::simulate (Note [simulation semantics] in simulator.h).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metron/ir/ordering.h"
#include "metron/sim/simulator.h"
#include "rank_tracker.h"

namespace metron::sim::detail {

/// One run over one graph. ir::OrderingState decides what may start; the engine decides when,
/// keeps the pending ends in a heap, and feeds every start and end to the per-rank trackers.
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
  /// A pending task end. Ordered by (time, rank, task): Note [simulation semantics].
  struct Event {
    Time time;
    std::uint64_t order;  ///< rank in the high half, task id in the low half
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const noexcept {
      return a.time > b.time || (a.time == b.time && a.order > b.order);
    }
  };
  /// A launch unit made startable by `setter`'s start or completion: ready_tasks_[begin, end).
  struct ReadyUnit {
    std::uint32_t begin;
    std::uint32_t end;
    ir::TaskId setter;
  };
  /// A compute task running while its rank's compute may be slowed down.
  struct RunningCompute {
    ir::TaskId task;
    double remaining;  ///< work left, in nanoseconds at full speed
    Time since;        ///< when `remaining` was last brought up to date
  };
  /// What the hot path needs of a task that has memory effects or sends bytes, copied out of the
  /// (large) ir::Task once so that the run never reads a Task again.
  struct Extra {
    std::uint32_t allocates_begin;  ///< effects_[allocates_begin, uses_begin): buffers allocated
    std::uint32_t uses_begin;       ///< effects_[uses_begin, uses_end): buffers used
    std::uint32_t uses_end;
    ir::GroupId group;       ///< collective's group; none for a Send
    std::int64_t bytes = 0;  ///< bytes sent (Send, Collective), else 0
  };
  enum Flag : std::uint8_t {
    kCompute = 1,
    kComm = 2,
    kHostWait = 4,
    kExtra = 8,     ///< has an Extra
    kTracked = 16,  ///< its start was reported to its rank's tracker (positive duration)
  };

  /// Moves every unit the state machine now reports startable to the ready list.
  void collect(ir::TaskId setter);
  /// Starts every ready unit at now_, including those made startable meanwhile.
  void start_ready();
  void start_unit(ReadyUnit unit);
  void start_task(ir::TaskId t, Time duration, ir::TaskId setter);
  void finish_task(ir::TaskId t);
  void push_end(ir::TaskId t, Time end);
  void add_extra(const ir::Task& task, std::size_t i);
  /// Re-times the running compute tasks of `rank` after its slow-down factor changed.
  void retime(std::size_t rank, double old_factor, double new_factor);
  [[nodiscard]] std::pair<BubbleCause, ir::TaskId> gap_cause(ir::TaskId t) const;
  [[nodiscard]] std::vector<ir::TaskId> critical_path() const;

  const ir::Graph& graph_;
  std::span<const Time> durations_;
  ir::OrderingState state_;
  double slowdown_factor_;  ///< 1 + compute_slowdown_during_comm
  bool slowdown_;           ///< whether the factor differs from 1 at all

  // Per task.
  std::vector<std::int32_t> rank_of_;
  std::vector<std::uint8_t> flags_;
  std::vector<ir::TaskId> setter_;  ///< whose start or completion made the task startable
  std::vector<TaskTiming> timing_;
  std::vector<std::int32_t> extra_of_;  ///< index into extras_, or -1

  std::vector<Extra> extras_;
  std::vector<std::int32_t> effects_;  ///< buffer indices, ranges of extras_

  // Per buffer.
  std::vector<std::int64_t> buffer_bytes_;
  std::vector<std::int32_t> buffer_users_left_;  ///< allocator and users still to complete

  // Per rank.
  std::vector<RankTracker> trackers_;
  std::vector<std::int32_t> slowing_comms_;  ///< running communication tasks (slow-down only)
  std::vector<std::vector<RunningCompute>> running_compute_;  ///< slow-down only

  Time now_ = 0;
  std::vector<Event> heap_;
  std::vector<ir::TaskId> ready_tasks_;
  std::vector<ReadyUnit> ready_units_;
  std::vector<ir::TaskId> unit_;  ///< scratch for pop_startable
  ir::TaskId last_completed_;
};

}  // namespace metron::sim::detail
