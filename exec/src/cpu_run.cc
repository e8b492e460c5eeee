#include "metron/exec/cpu_run.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/cpu_backend.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/exec/rank_run.h"
#include "metron/exec/torch_compute.h"

namespace metron::exec {

namespace {

void check_run(const ir::Graph& graph, const Rendezvous& rendezvous, const RunOptions& options) {
  if (rendezvous.world_size != graph.num_ranks()) {
    throw InvalidConfig("executor: the graph has " + std::to_string(graph.num_ranks()) +
                        " ranks; expected the world size to match, got " +
                        std::to_string(rendezvous.world_size));
  }
  if (options.iterations < 1 || options.warmup < 0) {
    throw InvalidConfig(
        "executor: expected at least 1 measured iteration and no negative "
        "warm-up");
  }
}

std::unique_ptr<GlooWorld> connect(const ir::Graph& graph, const Rendezvous& rendezvous,
                                   const StatusSink& status) {
  status("connecting to the store at " + rendezvous.host + ":" + std::to_string(rendezvous.port));
  std::vector<std::vector<std::int32_t>> groups;
  for (const ir::Group& group : graph.data().groups) {
    std::vector<std::int32_t>& members = groups.emplace_back();
    for (const ir::RankId r : group.ranks) members.push_back(r.value());
  }
  return std::make_unique<GlooWorld>(rendezvous, groups);
}

/// The iterations of `executor` with `work`, measurements gathered at rank 0. On a failure the
/// world and the backend are left alive (run_rank_iterations says why).
std::optional<MeasuredStep> run_iterations(const ir::Graph& graph, const Rendezvous& rendezvous,
                                           std::unique_ptr<GlooWorld>& world,
                                           RankExecutor& executor, CpuWork work,
                                           const RunOptions& options, const StatusSink& status) {
  auto backend = std::make_unique<CpuBackend>(executor.program(), std::move(work), options.timeout);
  try {
    return run_rank_iterations(graph, rendezvous.rank, rendezvous.world_size, *world, executor,
                               *backend, options, status);
  } catch (...) {
    // Left alive on purpose (run_rank_iterations says why).
    static_cast<void>(backend.release());
    static_cast<void>(world.release());
    throw;
  }
}

}  // namespace

std::optional<MeasuredStep> run_cpu_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                         const RunOptions& options, const StatusSink& status) {
  check_run(graph, rendezvous, options);
  const ir::RankId rank{rendezvous.rank};
  std::unique_ptr<GlooWorld> world_owner = connect(graph, rendezvous, status);
  GlooWorld& world = *world_owner;
  TorchCompute compute({.intra_op_threads = options.intra_op_threads});
  RankExecutor executor(graph, rank_program(graph, rank));
  status("preparing the compute tasks' tensors");
  for (const ProgramStep& step : executor.program().steps) {
    if (const auto* c = std::get_if<ir::Compute>(&graph.task(step.task).op)) compute.prepare(*c);
  }
  CpuWork work{
      .compute = [&compute](const Launch&, const ir::Compute& c) { compute.run(c); },
      .collective =
          [&world](const Launch& launch, const ir::Collective& c) {
            world.collective(c.group.value(), launch.ordinal, c);
          },
      .send = [&world](const Launch& launch,
                       const ir::Send& s) { world.send(s.peer.value(), s.bytes, launch.tag); },
      .recv = [&world](const Launch& launch,
                       const ir::Recv& r) { world.recv(r.peer.value(), r.bytes, launch.tag); },
  };
  return run_iterations(graph, rendezvous, world_owner, executor, std::move(work), options, status);
}

std::optional<ModelRun> run_cpu_model_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                           const RunOptions& options, const ModelPayload& model,
                                           const StatusSink& status) {
  check_run(graph, rendezvous, options);
  if (model.setup.steps != static_cast<std::int64_t>(options.warmup) + options.iterations) {
    throw InvalidConfig("model payload: the setup trains " + std::to_string(model.setup.steps) +
                        " steps; the run has " +
                        std::to_string(options.warmup + options.iterations) + " iterations");
  }
  const ir::RankId rank{rendezvous.rank};
  // Sets the process's libtorch and BLAS threads, which the model's stages compute with too.
  const TorchCompute threads({.intra_op_threads = options.intra_op_threads});
  status("building the rank's stages of the model");
  ModelRank trainer(graph, rank, model.pipeline_ranks, model.setup, model.slices, model.sync);
  std::unique_ptr<GlooWorld> world_owner = connect(graph, rendezvous, status);
  GlooWorld& world = *world_owner;
  RankExecutor executor(graph, rank_program(graph, rank));
  CpuWork work = trainer.work({
      .send = [&world](std::int32_t peer, std::span<const float> data,
                       std::int32_t tag) { world.send_floats(peer, data, tag); },
      .recv = [&world](std::int32_t peer, std::span<float> data,
                       std::int32_t tag) { world.recv_floats(peer, data, tag); },
      .collective =
          [&world](std::int32_t group, std::int64_t ordinal, const ir::Collective& c,
                   std::span<float> data) { world.collective_floats(group, ordinal, c, data); },
  });
  std::optional<MeasuredStep> measured =
      run_iterations(graph, rendezvous, world_owner, executor, std::move(work), options, status);
  status("gathering what each rank trained at rank 0");
  const std::string key = "model/record/";
  world.store_set(key + std::to_string(rendezvous.rank), encode_record(trainer.record()));
  std::optional<ModelRun> out;
  if (measured) {
    out.emplace(ModelRun{.measured = std::move(*measured), .records = {}});
    for (std::int32_t r = 0; r < rendezvous.world_size; ++r) {
      out->records.push_back(decode_record(world.store_get(key + std::to_string(r))));
    }
  }
  // Nobody leaves before rank 0 has read everything from the store it hosts.
  world.barrier();
  return out;
}

}  // namespace metron::exec
