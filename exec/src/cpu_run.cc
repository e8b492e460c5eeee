#include "metron/exec/cpu_run.h"

#include <memory>
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

std::optional<MeasuredStep> run_cpu_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                         const RunOptions& options, const StatusSink& status) {
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
  const ir::RankId rank{rendezvous.rank};
  status("connecting to the store at " + rendezvous.host + ":" + std::to_string(rendezvous.port));
  std::vector<std::vector<std::int32_t>> groups;
  for (const ir::Group& group : graph.data().groups) {
    std::vector<std::int32_t>& members = groups.emplace_back();
    for (const ir::RankId r : group.ranks) members.push_back(r.value());
  }
  // On a failure the world and the backend are left alive (run_rank_iterations says why).
  auto world_owner = std::make_unique<GlooWorld>(rendezvous, groups);
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
  auto backend = std::make_unique<CpuBackend>(executor.program(), std::move(work), options.timeout);
  try {
    return run_rank_iterations(graph, rendezvous.rank, rendezvous.world_size, world, executor,
                               *backend, options, status);
  } catch (...) {
    // Left alive on purpose (run_rank_iterations says why).
    static_cast<void>(backend.release());
    static_cast<void>(world_owner.release());
    throw;
  }
}

}  // namespace metron::exec
