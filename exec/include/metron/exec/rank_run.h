#pragma once
// What every backend's rank does once its backend exists: the iterations, each after a barrier of
// all ranks, with its status published for the launcher's watchdog and what it recorded flushed
// when the run ends badly, and every rank's measurements gathered at rank 0 through the store.
// The CPU backend's run (cpu_run.h) and the CUDA backend's (exec/cuda/cuda_rank.h) differ only
// in how they build their backend and payload; the rendezvous (Gloo's store and barrier) is the
// same for both.

#include <optional>

#include "metron/exec/cpu_run.h"
#include "metron/exec/gloo_world.h"
#include "metron/exec/measured_step.h"
#include "metron/exec/rank_backend.h"
#include "metron/exec/rank_executor.h"
#include "metron/ir/graph.h"

namespace metron::exec {

/// Runs `options.warmup` + `options.iterations` iterations of `executor` on `backend`, then
/// gathers at rank 0, which returns the measured step (the other ranks return nullopt). On a
/// failure it flushes what was recorded (options.on_failure) and rethrows; the caller must then
/// leave `world` and `backend` alive, never destroyed: a stream may be blocked in a call that
/// only a peer can end, and destroying them would wait for it, so the error would never reach
/// the launcher (the process ends right after the error anyway).
std::optional<MeasuredStep> run_rank_iterations(const ir::Graph& graph, std::int32_t rank,
                                                std::int32_t world_size, GlooWorld& world,
                                                RankExecutor& executor, RankBackend& backend,
                                                const RunOptions& options,
                                                const StatusSink& status);

}  // namespace metron::exec
