#include "metron/exec/cuda/cuda_run.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/cuda/cuda_backend.h"
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/nccl_world.h"
#include "metron/exec/operation_profile.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/ir/graph_builder.h"

namespace metron::exec::cuda {

void prepare_rank(const ir::Graph& graph, const RankProgram& program, CudaCompute& compute,
                  NcclWorld* world) {
  for (const ProgramStep& step : program.steps) {
    const ir::Task& task = graph.task(step.task);
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      compute.prepare(*c, step.stream);
      continue;
    }
    if (!task.is_communication()) continue;
    METRON_ASSERT(world != nullptr, "cuda run: " + graph.describe(step.task) +
                                        " communicates but the rank has no NCCL world");
    if (const auto* g = std::get_if<ir::Collective>(&task.op)) {
      world->prepare_collective(g->group.value(), *g);
    } else if (const auto* s = std::get_if<ir::Send>(&task.op)) {
      world->prepare_transfer(s->bytes);
    } else if (const auto* r = std::get_if<ir::Recv>(&task.op)) {
      world->prepare_transfer(r->bytes);
    }
  }
}

MeasuredStep run_cuda_single_rank(const ir::Graph& graph, const CudaRunOptions& options) {
  if (graph.num_ranks() != 1) {
    throw InvalidConfig("cuda run: the graph has " + std::to_string(graph.num_ranks()) +
                        " ranks; expected 1 (a run of several ranks needs the launcher's store)");
  }
  if (options.iterations < 1 || options.warmup < 0) {
    throw InvalidConfig("cuda run: expected at least 1 measured iteration and no negative warm-up");
  }
  RankExecutor executor(graph, rank_program(graph, ir::RankId{0}));
  set_hardware_queues(executor.program().hardware_queues);
  CudaCompute compute({.device = options.device});
  std::unique_ptr<NcclWorld> world;
  bool communicates = false;
  for (const ProgramStep& step : executor.program().steps) {
    communicates = communicates || graph.task(step.task).is_communication();
  }
  if (communicates) {
    world = std::make_unique<NcclWorld>(0, 1, NcclWorld::plan_of(graph, 0), NcclWorld::IdExchange{},
                                        options.device);
  }
  prepare_rank(graph, executor.program(), compute, world.get());
  CudaBackend backend(executor.program(), compute, world.get(), options.timeout, options.device);
  std::vector<std::vector<RankIteration>> measured(1);
  const std::int64_t total = std::int64_t{options.warmup} + options.iterations;
  for (std::int64_t i = 0; i < total; ++i) {
    RankIteration it = executor.run(backend, i);
    if (i >= options.warmup) measured[0].push_back(std::move(it));
  }
  return measured_step(graph, measured, /*shared_clock=*/true);
}

double measure_operation_seconds(const ir::Operation& operation, const CudaRunOptions& options) {
  ir::GraphBuilder builder;
  const ir::RankId rank = builder.add_rank();
  const ir::TaskId task = builder.add({.rank = rank,
                                       .stream = builder.add_stream(rank, "compute"),
                                       .op = ir::Compute{.operations = {operation}}});
  const ir::Graph graph = std::move(builder).build();
  const MeasuredStep step = run_cuda_single_rank(graph, options);
  const timelines::TaskSpan span = step.timeline.tasks[task.index()];
  return static_cast<double>(span.end_ns - span.start_ns) * 1e-9 /
         static_cast<double>(std::max(1, operation.count));
}

std::size_t profile_operations(
    const std::vector<std::vector<std::vector<ProfiledOperation>>>& operations,
    const CudaRunOptions& options, models::CostProfile& profile, const ProfileProgress& progress) {
  // Each distinct (key, precision, count) once, in the order the steps list them.
  std::map<std::tuple<std::string, models::Precision, std::int32_t>, const ir::Operation*> todo;
  std::vector<std::tuple<std::string, models::Precision, std::int32_t>> order;
  for (const auto& rank : operations) {
    for (const auto& task : rank) {
      for (const ProfiledOperation& p : task) {
        const auto id = std::tuple{p.key.first, p.key.second, p.op.count};
        if (todo.emplace(id, &p.op).second) order.push_back(id);
      }
    }
  }
  std::map<std::pair<std::string, models::Precision>, std::vector<double>> seconds;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& [key, precision, count] = order[i];
    const double s = measure_operation_seconds(*todo.at(order[i]), options);
    seconds[{key, precision}].push_back(s);
    if (progress) {
      progress(i + 1, order.size(), key + " " + std::string(models::to_string(precision)), s);
    }
  }
  for (auto& [key, values] : seconds) {
    profile.set_compute(key.first, key.second, median_seconds(std::move(values)));
  }
  return order.size();
}

}  // namespace metron::exec::cuda
