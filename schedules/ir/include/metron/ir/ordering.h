#pragma once
// The ordering rules of the task-graph contract as one state machine, shared by every interpreter
// of a graph: the static deadlock check drives it with unit costs, the simulator with modelled
// durations. Drivers decide *when* tasks start and complete; this class decides *what may start*.
//
// Note [ordering rules] (docs/ARCHITECTURE.md): a task may start when all of these hold
//   1. its rank's host has issued it; the host issues in issue order and stops at a HostWait
//      until the awaited task completes;
//   2. the task before it on its stream has completed (streams are FIFOs);
//   3. its dependencies (event waits; HostWait's target) have completed;
//   4. the task issued before it on the same hardware queue has started, when that task is on
//      another stream (with hardware_queues = 1 every stream is dispatched in global issue
//      order, as with CUDA_DEVICE_MAX_CONNECTIONS=1);
//   5. communication only: every other member of its instance (collective members, or the
//      send–recv pair) satisfies 1–4 as well; they then start together (rendezvous).
// Launch units become startable in a deterministic order: the order in which their last
// condition was met, and members of an instance in the instance's member order.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::ir {

/// Where a task is in its life.
enum class TaskState : std::uint8_t {
  kNotIssued,  ///< the host has not reached it
  kWaiting,    ///< issued; a condition of Note [ordering rules] is unmet
  kReady,      ///< rules 1–4 hold; a communication task waiting for its partners (rule 5)
  kStartable,  ///< may start now (returned by pop_startable, or about to be)
  kRunning,
  kCompleted,
};

/// A launch unit that may start, as the allocation-free pop_startable overload returns it.
struct StartableUnit {
  std::int32_t instance = -1;       ///< communication instance, or -1
  TaskId task;                      ///< the single task, or the instance's first member
  std::span<const TaskId> members;  ///< Graph::comm_members(instance); empty for a single task
  /// The task whose start() or complete() made the unit startable (its last condition); none
  /// for units startable from the outset.
  TaskId cause;
};

/// Tracks which tasks may start. Not thread-safe; one per run. The hot operations (start,
/// complete, pop_startable) are inline and read only Graph::flat_index() and one small per-task
/// word, so a simulator can drive it at a few nanoseconds per task.
/// @code
///   ir::OrderingState state(graph);
///   std::vector<TaskId> unit;
///   while (state.pop_startable(unit)) for (TaskId t : unit) state.start(t);  // ... later:
///   state.complete(t);
/// @endcode
class OrderingState {
 public:
  explicit OrderingState(const Graph& graph);

  /// Moves the next startable launch unit into `unit` (one compute or host-wait task, or all
  /// members of a communication instance). Returns false when nothing can start now.
  bool pop_startable(std::vector<TaskId>& unit);
  /// The same without copying the members; also says what made the unit startable.
  bool pop_startable(StartableUnit& unit) noexcept {
    if (startable_head_ == startable_.size()) return false;
    unit = startable_[startable_head_++];
    if (startable_head_ == startable_.size()) {
      startable_.clear();
      startable_head_ = 0;
    }
    return true;
  }
  /// Whether pop_startable would return true; cheap enough to ask after every event.
  [[nodiscard]] bool any_startable() const noexcept { return startable_head_ != startable_.size(); }
  /// Marks a task of a popped unit as started.
  void start(TaskId task) {
    Progress& p = progress_[task.index()];
    if (p.state != TaskState::kStartable) fail_start(task);
    p.state = TaskState::kRunning;
    cause_ = task;
    const TaskFacts& f = facts_[task.index()];
    // What the task's completion will touch, fetched while it runs: with hundreds of ranks
    // advancing side by side, the hardware prefetchers cannot follow every rank's tasks.
    if (f.stream_successor.valid()) {
      __builtin_prefetch(&progress_[f.stream_successor.index()]);
      __builtin_prefetch(&facts_[f.stream_successor.index()]);
    }
    if (f.dependents_begin != f.dependents_end) {
      __builtin_prefetch(&dependents_[static_cast<std::size_t>(f.dependents_begin)]);
    }
    if (f.queue_successor.valid()) satisfy(f.queue_successor);
  }
  /// Hints that `task` is about to be started or completed: fetches what that reads.
  void prefetch(TaskId task) const noexcept {
    __builtin_prefetch(&progress_[task.index()]);
    __builtin_prefetch(&facts_[task.index()]);
  }
  /// Marks a started task as completed, which may make others startable.
  void complete(TaskId task) {
    Progress& p = progress_[task.index()];
    if (p.state != TaskState::kRunning) fail_complete(task);
    p.state = TaskState::kCompleted;
    ++completed_;
    cause_ = task;
    const TaskFacts& f = facts_[task.index()];
    if (f.stream_successor.valid()) satisfy(f.stream_successor);
    for (std::int32_t d = f.dependents_begin; d < f.dependents_end; ++d) {
      satisfy(dependents_[static_cast<std::size_t>(d)]);
    }
    if (f.kind == TaskKind::kHostWait) {
      host_blocked_on_[f.rank.index()] = TaskId{};
      advance_host(f.rank.index());
    }
  }

  [[nodiscard]] bool done() const noexcept { return completed_ == num_tasks_; }
  [[nodiscard]] std::int32_t num_completed() const noexcept { return completed_; }
  [[nodiscard]] TaskState state(TaskId task) const { return progress_[task.index()].state; }
  /// The task whose start() or complete() made `task` startable (StartableUnit::cause); none
  /// while it is not, or when it was startable from the outset.
  [[nodiscard]] TaskId cause(TaskId task) const { return progress_[task.index()].cause; }

  /// One line per blocked task: every stream head that cannot start and every host stopped at a
  /// HostWait, with what each waits for. Meaningful when nothing runs and nothing is startable.
  [[nodiscard]] std::vector<std::string> describe_blocked() const;

 private:
  /// The mutable part of a task, 12 bytes.
  struct Progress {
    /// Conditions still unmet once issued. Conditions met before the task is issued count down
    /// from 0; issuing adds TaskFacts::conditions, so it reaches 0 exactly when the last one is
    /// met, whichever that is.
    std::int32_t pending = 0;
    TaskId cause;
    TaskState state = TaskState::kNotIssued;
  };

  void advance_host(std::size_t rank);
  void satisfy(TaskId task) {
    Progress& p = progress_[task.index()];
    if (--p.pending == 0) {
      // Only an issued task can get here: before issue, pending is negative.
      on_ready(task);
    } else if (p.pending < 0 && p.state != TaskState::kNotIssued) {
      fail_satisfy(task);
    }
  }
  void on_ready(TaskId task) {
    const std::int32_t instance = facts_[task.index()].comm_instance;
    if (instance < 0) {
      progress_[task.index()].state = TaskState::kStartable;
      progress_[task.index()].cause = cause_;
      startable_.push_back({-1, task, {}, cause_});
      return;
    }
    progress_[task.index()].state = TaskState::kReady;
    if (--members_not_ready_[static_cast<std::size_t>(instance)] == 0) {
      const CommFacts& c = instances_[static_cast<std::size_t>(instance)];
      const std::span<const TaskId> members(comm_members_ + c.members_begin,
                                            comm_members_ + c.members_end);
      for (TaskId m : members) {
        progress_[m.index()].state = TaskState::kStartable;
        progress_[m.index()].cause = cause_;
      }
      startable_.push_back({instance, members.front(), members, cause_});
    }
  }
  [[noreturn]] void fail_start(TaskId task) const;
  [[noreturn]] void fail_complete(TaskId task) const;
  [[noreturn]] void fail_satisfy(TaskId task) const;
  [[nodiscard]] std::string why_waiting(TaskId task) const;
  [[nodiscard]] std::string partner_status(TaskId partner) const;

  const Graph& graph_;
  const TaskFacts* facts_;      ///< graph_.flat_index().tasks
  const TaskId* dependents_;    ///< graph_.flat_index().dependents
  const CommFacts* instances_;  ///< graph_.flat_index().instances
  const TaskId* comm_members_;  ///< graph_.flat_index().comm_members
  std::int32_t num_tasks_;
  std::vector<Progress> progress_;                    ///< per task
  std::vector<std::int32_t> members_not_ready_;       ///< per communication instance
  std::vector<std::span<const TaskId>> issue_order_;  ///< per rank
  std::vector<std::size_t> host_next_;                ///< per rank: next position to issue
  std::vector<TaskId> host_blocked_on_;               ///< per rank: the HostWait stopping the host
  /// A FIFO: units before startable_head_ were popped. Reset whenever it empties, so it never
  /// holds more than the units startable at once, and popping allocates nothing.
  std::vector<StartableUnit> startable_;
  std::size_t startable_head_ = 0;
  std::int32_t completed_ = 0;
  TaskId cause_;  ///< the task of the start() / complete() in progress
};

}  // namespace metron::ir
