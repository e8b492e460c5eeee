// The unit-cost dry run behind the static deadlock check.

#include "metron/ir/deadlock.h"

#include <fmt/format.h>

#include <string>

#include "metron/base/error.h"
#include "metron/ir/ordering.h"

namespace metron::ir {

DeadlockReport find_deadlock(const Graph& graph) {
  OrderingState state(graph);
  DeadlockReport report;
  std::vector<TaskId> unit;
  std::vector<TaskId> running;
  for (;;) {
    // Start everything that may start. Host waits cost nothing: they complete at once, which can
    // let their host issue more tasks in the same round.
    while (state.pop_startable(unit)) {
      for (TaskId t : unit) {
        state.start(t);
        if (graph.task(t).kind() == TaskKind::kHostWait) {
          state.complete(t);
        } else {
          running.push_back(t);
        }
      }
    }
    if (running.empty()) break;
    for (TaskId t : running) state.complete(t);
    running.clear();
    ++report.steps;
  }
  report.completed = state.num_completed();
  report.deadlocked = !state.done();
  if (report.deadlocked) report.blocked = state.describe_blocked();
  return report;
}

void check_deadlock(const Graph& graph) {
  DeadlockReport report = find_deadlock(graph);
  if (report.deadlocked) throw Deadlock(std::move(report.blocked));
}

}  // namespace metron::ir
