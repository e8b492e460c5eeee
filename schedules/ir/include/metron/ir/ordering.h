#pragma once
// The ordering rules of the task-graph contract as one state machine, shared by every interpreter
// of a graph: the static deadlock check drives it with unit costs, the simulator with modelled
// durations. Drivers decide *when* tasks start and complete; this class decides *what may start*.
//
// Note [ordering rules] (ARCHITECTURE.md): a task may start when all of these hold
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

/// Tracks which tasks may start. Not thread-safe; one per run.
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
  /// Whether pop_startable would return true; cheap enough to ask after every event.
  [[nodiscard]] bool any_startable() const noexcept { return startable_head_ != startable_.size(); }
  /// Marks a task of a popped unit as started.
  void start(TaskId task);
  /// Marks a started task as completed, which may make others startable.
  void complete(TaskId task);

  [[nodiscard]] bool done() const noexcept { return completed_ == graph_.num_tasks(); }
  [[nodiscard]] std::int32_t num_completed() const noexcept { return completed_; }
  [[nodiscard]] TaskState state(TaskId task) const { return state_[task.index()]; }

  /// One line per blocked task: every stream head that cannot start and every host stopped at a
  /// HostWait, with what each waits for. Meaningful when nothing runs and nothing is startable.
  [[nodiscard]] std::vector<std::string> describe_blocked() const;

 private:
  struct Unit {
    std::int32_t instance;  ///< communication instance, or -1 for a single task
    TaskId task;
  };

  void advance_host(std::size_t rank);
  void satisfy(TaskId task);
  void on_ready(TaskId task);
  [[nodiscard]] std::string why_waiting(TaskId task) const;
  [[nodiscard]] std::string partner_status(TaskId partner) const;

  const Graph& graph_;
  std::vector<std::int32_t> pending_;  ///< unmet conditions per task
  std::vector<TaskState> state_;
  /// Per task: whether it is a HostWait, so that completing and issuing tasks need not read the
  /// (large, cache-unfriendly) Task itself; the simulator's hot path.
  std::vector<std::uint8_t> is_host_wait_;
  std::vector<std::int32_t> ready_members_;  ///< per communication instance
  std::vector<std::size_t> host_next_;       ///< per rank: next position to issue
  std::vector<TaskId> host_blocked_on_;      ///< per rank: the HostWait stopping the host
  /// A FIFO: units before startable_head_ were popped. Reset whenever it empties, so it never
  /// holds more than the units startable at once, and popping allocates nothing.
  std::vector<Unit> startable_;
  std::size_t startable_head_ = 0;
  std::int32_t completed_ = 0;
};

}  // namespace metron::ir
