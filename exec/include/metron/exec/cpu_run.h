#pragma once
// One rank of a graph run on the CPU backend, from rendezvous to the measurements gathered at
// rank 0: what `metron run` executes in each worker process, whether the local launcher forked
// it or torchrun, srun or mpirun started it.

#include <optional>

#include "metron/exec/gloo_world.h"
#include "metron/exec/measured_step.h"
#include "metron/exec/rank_run.h"
#include "metron/ir/graph.h"

namespace metron::exec {

/// Runs rank `rendezvous.rank` of `graph` (world size = the graph's ranks): connects to the
/// others, runs warm-up and measured iterations with a barrier before each, and gathers every
/// rank's measurements at rank 0, which returns the measured step; the other ranks return
/// nullopt. Throws BackendError naming the rank and the task on a failure, InvalidConfig when
/// the world size does not match the graph.
std::optional<MeasuredStep> run_cpu_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                         const RunOptions& options, const StatusSink& status);

}  // namespace metron::exec
