#pragma once
// One rank of a graph run on the CPU backend, from rendezvous to the measurements gathered at
// rank 0: what `metron run` executes in each worker process, whether the local launcher forked
// it or torchrun, srun or mpirun started it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "metron/exec/gloo_world.h"
#include "metron/exec/measured_step.h"
#include "metron/ir/graph.h"

namespace metron::exec {

struct RunOptions {
  std::int32_t iterations = 5;  ///< measured iterations (the median is reported)
  std::int32_t warmup = 1;      ///< iterations run first and not measured
  /// Bounds every wait of the host and of a communicator (Gloo's timeout): past it the rank
  /// fails naming what each stream is doing.
  std::chrono::milliseconds timeout{60000};
  std::int32_t intra_op_threads = 1;  ///< libtorch threads per rank
  /// Called with what this rank recorded when its run ends badly: it fails, or the process gets
  /// SIGTERM (the launcher ending it; the process then exits 143 after the call). The last
  /// entry is the iteration in progress, with the tasks that completed. For flushing partial
  /// traces; what it throws is dropped. Unset: nothing is flushed and SIGTERM is left alone.
  std::function<void(const std::vector<RankIteration>&)> on_failure;
};

/// Receives the rank's status lines (what it runs or waits for), for the launcher's watchdog.
using StatusSink = std::function<void(std::string_view)>;

/// Runs rank `rendezvous.rank` of `graph` (world size = the graph's ranks): connects to the
/// others, runs warm-up and measured iterations with a barrier before each, and gathers every
/// rank's measurements at rank 0, which returns the measured step; the other ranks return
/// nullopt. Throws BackendError naming the rank and the task on a failure, InvalidConfig when
/// the world size does not match the graph.
std::optional<MeasuredStep> run_cpu_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                         const RunOptions& options, const StatusSink& status);

}  // namespace metron::exec
