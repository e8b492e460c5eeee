#pragma once
// One rank of a graph run on the CPU backend, from rendezvous to the measurements gathered at
// rank 0: what `metron run` executes in each worker process, whether the local launcher forked
// it or torchrun, srun or mpirun started it.

#include <optional>

#include "metron/exec/gloo_world.h"
#include "metron/exec/measured_step.h"
#include "metron/exec/model_rank.h"
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

/// The model payload of a run (Note [model rank]): what trains, and each model stage's slice.
struct ModelPayload {
  TrainingSetup setup;
  std::vector<StageSlice> slices;   ///< by model stage (ir::Task::stage)
  std::int32_t pipeline_ranks = 1;  ///< ranks of one data-parallel replica
  ModelSync sync;                   ///< the data-parallel buckets (empty without dp)
};

/// What rank 0 of a model-payload run returns: the measured step, and every rank's record of
/// what it trained (by rank).
struct ModelRun {
  MeasuredStep measured;
  std::vector<RankRecord> records;
};

/// As run_cpu_rank, with the model payload instead of the timing payload: each iteration is a
/// training step (warm-up ones too, so steps = warmup + iterations, as `model.setup.steps` must
/// say), and after the last one every rank's record is gathered at rank 0. Throws InvalidConfig
/// as ModelRank does for a graph the payload cannot run.
std::optional<ModelRun> run_cpu_model_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                           const RunOptions& options, const ModelPayload& model,
                                           const StatusSink& status);

}  // namespace metron::exec
