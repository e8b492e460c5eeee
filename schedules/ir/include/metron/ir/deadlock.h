#pragma once
// The static deadlock check: a unit-cost dry run of Note [ordering rules] (ordering.h) that finds
// cross-rank ordering deadlocks before anything runs, e.g. two ranks that both block on a send
// first, or collectives issued in different orders on different members.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::ir {

/// Outcome of the dry run.
struct DeadlockReport {
  bool deadlocked = false;
  std::int32_t steps = 0;            ///< unit-time rounds until done or stuck
  std::int32_t completed = 0;        ///< tasks that completed
  std::vector<std::string> blocked;  ///< every blocked task and what it waits for
};

/// Runs the graph with unit costs (host waits cost nothing) and reports whether it gets stuck.
DeadlockReport find_deadlock(const Graph& graph);

/// As find_deadlock, but throws metron::Deadlock listing every blocked task when stuck.
/// @code
///   ir::check_deadlock(std::move(builder).build());  // throws Deadlock
/// @endcode
void check_deadlock(const Graph& graph);

}  // namespace metron::ir
