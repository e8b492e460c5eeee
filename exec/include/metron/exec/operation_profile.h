#pragma once
// Which operations a step's compute tasks run, as a profile measures them: every backend's
// `metron profile` (the CPU backend's libtorch payload, the CUDA backend's cuBLASLt one) times
// the same list and stores each time under the key the cost model looks it up by, so the list
// and the keys have one owner. Note [profiling compute] in cli/profile_command.cc says how the
// CPU backend times them.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/models/hardware_spec.h"

namespace metron::exec {

/// The key the cost model stores an operation's measured time under: the operation as the
/// models::OpCost it was made from ("gemm:MxNxK", "batched-gemm:BxMxNxK",
/// "elementwise:NAME:N"), so that the key's format has one owner (OpCost::profile_key).
std::string profile_key(const ir::Operation& op);

/// One operation as a profile times it: its key, its precision, and the operation as its task
/// runs it (with the task's count, so a measurement repeats it as the executor does).
struct ProfiledOperation {
  std::pair<std::string, models::Precision> key;
  ir::Operation op;
};

/// By rank, the distinct operation lists of its compute tasks in issue order (a task whose list
/// of (key, precision, count) an earlier task of the rank had is left out); operations on
/// integer data, which the cost model never prices, are left out of each list.
std::vector<std::vector<std::vector<ProfiledOperation>>> distinct_task_operations(
    const ir::Graph& graph);

/// The median of `seconds` (the upper one of an even count); 0 for an empty list. Every
/// backend's profile keeps the median of its repetitions through this one function.
double median_seconds(std::vector<double> seconds);

}  // namespace metron::exec
