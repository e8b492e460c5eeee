#pragma once
// `metron profile`'s communication (issue 17): the step's distinct collectives and transfers,
// keyed exactly as the cost model looks them up, timed for real with Gloo in one process per rank
// (exec/comm_benchmark.h), plus the compute slow-down while communication runs.
//
// Note [profiling communication]
//   - A collective task is priced count × CommModel::collective_time(op, bytes / count, the
//     placement of its group) (step_builder.h, step 4), so its key is (op,
//     Step::group_placements[group], bytes / count). What is timed is the first task of the
//     graph with the key as the executor issues it, its count calls of bytes / count back to
//     back in the task's dtype on its group, and the entry is that time / count: a task of count
//     calls then costs what its calls cost in a row. (Timed one call at a time, a tensor-parallel
//     task's 24 small all-reduces measured ~0.8 ms each on the 2-core VM, but ~1.4 ms each in a
//     row as the run issues them.)
//   - A send or receive is priced CommModel::p2p_time(bytes, Step::p2p_same_node), so its key is
//     (bytes, Step::p2p_same_node), timed as one transfer between the ranks of the first send
//     that has those bytes.
//   - The key is where the simulator would put the group, even where the local run cannot (a
//     group on "two nodes" of the scenario's hardware still runs on this one): the profile
//     describes this machine running the scenario's graph.
//   - Nothing moves for 0 bytes and the model charges 0: such entries are not measured.
//   - The slow-down: the graph's largest GEMM (by FLOPs; a 1024³ fp32 GEMM when it has none),
//     timed alone and while the graph's largest message (its collective or its transfer) runs
//     back to back; only when the graph communicates.

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "metron/exec/comm_benchmark.h"
#include "metron/models/cost_kinds.h"
#include "metron/models/cost_profile.h"
#include "metron/models/group_placement.h"
#include "metron/scenario/step_builder.h"

namespace metron::cli {

/// A profile's collective key (Note [profile JSON]).
struct CollectiveKey {
  models::CommOp op = models::CommOp::kAllReduce;
  models::GroupPlacement group;
  std::int64_t bytes = 0;
  std::int32_t calls = 1;  ///< the calls the timed task issues back to back (its count)
};

/// What the profile of a step measures of its communication, entry by entry.
struct CommunicationPlan {
  exec::CommBenchmark benchmark;
  std::vector<CollectiveKey> collectives;          ///< by benchmark.collectives
  std::vector<std::pair<std::int64_t, bool>> p2p;  ///< (bytes, same_node) by benchmark.transfers

  /// True when the step moves no bytes between ranks: nothing to launch.
  [[nodiscard]] bool empty() const {
    return benchmark.collectives.empty() && benchmark.transfers.empty();
  }
};

/// How every entry is timed.
struct TimingSettings {
  std::int32_t warmup = 1;
  std::int32_t repetitions = 5;
  std::int32_t threads = 1;       ///< libtorch threads of the slow-down's compute
  double slowdown_seconds = 1.0;  ///< exec::SlowdownProbe::min_seconds
};

/// The distinct communication of `step` (Note [profiling communication]), in the graph's order.
/// Throws InvalidConfig for a collective whose graph group has fewer members than the group it
/// is priced for (a graph the executor does not run in full).
CommunicationPlan plan_communication(const scenario::Step& step, const TimingSettings& timing);

/// Sets the measured times (and the slow-down) in `profile`, one progress line each on stderr.
void add_communication(const CommunicationPlan& plan, const exec::CommMeasurement& measured,
                       models::CostProfile& profile);

/// What rank 0 does with the measurement, in its own process: `status` keeps the launcher's
/// watchdog informed.
using AtRankZero =
    std::function<void(const exec::CommMeasurement& measured, const exec::BenchmarkStatus& status)>;

/// Forks `ranks` processes (exec::launch_local; the caller's process must have one thread), runs
/// `benchmark` in them over a store on 127.0.0.1 and a free port, and calls `at_rank_zero` in rank
/// 0's process. `timeout` is the watchdog's: the run fails when no rank reports progress for that
/// long. A failing rank ends the run: InvalidConfig for an input error (exit 2), BackendError
/// otherwise (exit 1), each with the rank's message.
void launch_benchmark(const exec::CommBenchmark& benchmark, std::int32_t ranks,
                      std::chrono::milliseconds timeout, const AtRankZero& at_rank_zero);

}  // namespace metron::cli
