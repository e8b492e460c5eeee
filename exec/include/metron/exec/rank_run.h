#pragma once
// What every backend's rank does once its backend exists: the iterations, each after a barrier of
// all ranks, with its status published for the launcher's watchdog and what it recorded flushed
// when the run ends badly, and every rank's measurements gathered at rank 0 through the store.
// The CPU backend's run (cpu_run.h) and the CUDA backend's (exec/cuda/cuda_rank.h) differ only
// in how they build their backend and payload, and in the store they meet through (Gloo's, or
// metron's own TcpStore where there is no libtorch: rank_store.h).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "metron/exec/measured_step.h"
#include "metron/exec/rank_backend.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_store.h"
#include "metron/ir/graph.h"

namespace metron::exec {

struct RunOptions {
  std::int32_t iterations = 5;  ///< measured iterations (the median is reported)
  std::int32_t warmup = 1;      ///< iterations run first and not measured
  /// Bounds every wait of the host and of a communicator (Gloo's timeout): past it the rank
  /// fails naming what each stream is doing.
  std::chrono::milliseconds timeout{60000};
  std::int32_t intra_op_threads = 1;  ///< libtorch threads per rank (the CPU backend)
  /// Called with what this rank recorded when its run ends badly: it fails, or the process gets
  /// SIGTERM (the launcher ending it; the process then exits 143 after the call). The last
  /// entry is the iteration in progress, with the tasks that completed. For flushing partial
  /// traces; what it throws is dropped. Unset: nothing is flushed and SIGTERM is left alone.
  std::function<void(const std::vector<RankIteration>&)> on_failure;
};

/// Receives the rank's status lines (what it runs or waits for), for the launcher's watchdog.
using StatusSink = std::function<void(std::string_view)>;

/// Runs `options.warmup` + `options.iterations` iterations of `executor` on `backend`, then
/// gathers at rank 0, which returns the measured step (the other ranks return nullopt). On a
/// failure it flushes what was recorded (options.on_failure) and rethrows; the caller must then
/// leave `world` and `backend` alive, never destroyed: a stream may be blocked in a call that
/// only a peer can end, and destroying them would wait for it, so the error would never reach
/// the launcher (the process ends right after the error anyway).
std::optional<MeasuredStep> run_rank_iterations(const ir::Graph& graph, std::int32_t rank,
                                                std::int32_t world_size, RankStore& world,
                                                RankExecutor& executor, RankBackend& backend,
                                                const RunOptions& options,
                                                const StatusSink& status);

}  // namespace metron::exec
