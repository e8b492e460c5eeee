// Note [building a step] (step_builder.h).

#include "metron/plan/step_builder.h"

#include <string>
#include <variant>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/models/comm_cost.h"
#include "metron/models/compute_cost.h"
#include "metron/models/group_placement.h"
#include "metron/models/memory_model.h"
#include "metron/models/stage_cost_model.h"
#include "metron/schedules/data_parallel.h"
#include "metron/schedules/registry.h"

namespace metron::plan {
namespace {

/// The schedule's chunks per rank, and the parallel spec the cost and memory models see (whose
/// vp counts model stages: DualPipe's two directions are copies of the same pp stages).
struct Layout {
  schedules::ScheduleSpec spec;
  models::ParallelSpec model_parallel;
  std::int64_t model_stages = 1;
};

Layout layout_of(const Scenario& s) {
  const schedules::ScheduleInfo& info = schedules::find_schedule(s.schedule.name);
  const models::ParallelSpec& p = s.parallel;
  std::int64_t vp = p.vp;
  if (info.fixed_vp != 0) {
    if (p.vp != 1 && p.vp != info.fixed_vp) {
      throw InvalidConfig("schedule \"" + s.schedule.name + "\" runs " +
                          std::to_string(info.fixed_vp) + " chunks per rank; parallel.vp is " +
                          std::to_string(p.vp));
    }
    vp = info.fixed_vp;
  }
  const std::optional<std::int64_t> microbatches = p.microbatches();
  if (!microbatches) {
    throw InvalidConfig(
        "scenario: parallel needs num_microbatches or a global_batch divisible "
        "by microbatch_size·dp");
  }
  Layout out;
  out.spec.name = s.schedule.name;
  out.spec.pp = static_cast<std::int32_t>(p.pp);
  out.spec.vp = static_cast<std::int32_t>(vp);
  out.spec.microbatches = static_cast<std::int32_t>(*microbatches);
  out.spec.group_size = s.schedule.group_size;
  out.spec.memory_limit = s.schedule.memory_limit;
  out.model_parallel = p;
  out.model_parallel.vp = info.placement == schedules::Placement::kBidirectional ? 1 : vp;
  out.model_stages = out.model_parallel.pp * out.model_parallel.vp;
  return out;
}

models::CommOp comm_op(ir::CollectiveOp op) {
  switch (op) {
    case ir::CollectiveOp::kAllReduce:
      return models::CommOp::kAllReduce;
    case ir::CollectiveOp::kReduceScatter:
      return models::CommOp::kReduceScatter;
    case ir::CollectiveOp::kAllGather:
      return models::CommOp::kAllGather;
    case ir::CollectiveOp::kReduce:
      return models::CommOp::kReduce;
    case ir::CollectiveOp::kBroadcast:
      return models::CommOp::kBroadcast;
    case ir::CollectiveOp::kAllToAll:
      return models::CommOp::kAllToAll;
  }
  return models::CommOp::kAllReduce;
}

std::vector<double> in_ms(const std::vector<double>& seconds) {
  std::vector<double> out;
  for (double s : seconds) out.push_back(s * 1e3);
  return out;
}

/// The time of a compute task of `phase` on model stage `stage`.
double phase_seconds(const models::StageCosts& c, ir::Phase phase, std::size_t stage) {
  switch (phase) {
    case ir::Phase::kForward:
      return c.forward[stage];
    case ir::Phase::kBackwardInput:
      return c.splits_backward() ? c.backward_input[stage] : c.backward[stage];
    case ir::Phase::kBackwardWeight:
      return c.splits_backward() ? c.backward_weight[stage] : 0.0;
    case ir::Phase::kBackward:
      return c.backward[stage];
    case ir::Phase::kRecompute:
    case ir::Phase::kOptimizer:
    case ir::Phase::kOther:
      break;
  }
  return 0.0;
}

}  // namespace

Step build_step(const Scenario& s, Replication replication) {
  validate(s);
  Layout layout = layout_of(s);
  const models::ParallelSpec& mp = layout.model_parallel;

  // Stage times: explicit, or from the models.
  std::optional<models::ComputeModel> compute;
  const models::CommModel comm(s.hardware);
  if (s.model) compute.emplace(s.hardware, s.model->dtype);
  Step step;
  if (s.costs) {
    step.costs = *s.costs;
    // One number for all stages: read without knowing the stages, it arrives as one stage.
    if (step.costs.stages() == 1 && layout.model_stages > 1) {
      for (std::vector<double>* list : {&step.costs.forward, &step.costs.backward_input,
                                        &step.costs.backward_weight, &step.costs.backward}) {
        if (!list->empty())
          list->assign(static_cast<std::size_t>(layout.model_stages), list->front());
      }
    }
    if (step.costs.stages() != static_cast<std::size_t>(layout.model_stages)) {
      throw InvalidConfig("scenario: costs give " + std::to_string(step.costs.stages()) +
                          " stages; schedule \"" + s.schedule.name + "\" with pp " +
                          std::to_string(mp.pp) + " runs " + std::to_string(layout.model_stages));
    }
  } else {
    step.costs = models::model_stage_costs(*s.model, mp, *compute, comm);
  }
  layout.spec.times = {.forward = in_ms(step.costs.forward),
                       .backward_input = in_ms(step.costs.backward_input),
                       .backward_weight = in_ms(step.costs.backward_weight),
                       .p2p = step.costs.p2p * 1e3};

  // The graph.
  schedules::LoweringOptions lowering{
      .p2p = p2p_mode(s.schedule),
      .hardware_queues = static_cast<std::int32_t>(s.hardware.hardware_queues)};
  if (s.model) {
    const models::LayerShape shape = models::layer_shape(*s.model, mp);
    const double layers =
        static_cast<double>(s.model->layers) / static_cast<double>(layout.model_stages);
    lowering.activation_bytes = static_cast<std::int64_t>(
        layers * models::layer_activation_bytes(*s.model, shape, mp.recompute));
    // ZB's M_W: what W keeps after I — the linear layers' inputs and output gradients, which
    // the selective-recompute inventory (everything but the score-sized tensors) approximates.
    lowering.weight_grad_bytes = static_cast<std::int64_t>(
        layers * models::layer_activation_bytes(*s.model, shape, models::Recompute::kSelective));
    lowering.p2p_bytes = models::boundary_bytes(*s.model, mp);
  }
  // One validation for the whole step: lower, replicate and reduce on a builder.
  ir::GraphBuilder builder =
      schedules::lower_unvalidated(schedules::generate_order(layout.spec), lowering);
  const std::int64_t dp_group = mp.dp * mp.cp;
  step.pipeline_ranks = layout.spec.pp;
  step.replicas = replication == Replication::kFull ? static_cast<std::int32_t>(mp.dp) : 1;
  if (step.replicas > 1) {
    builder = ir::GraphBuilder(
        schedules::replicate_data_parallel(std::move(builder).build(), step.replicas));
  }
  const models::ParallelGroups groups = models::parallel_groups(mp, s.hardware);
  if (s.model) {
    const models::StateLayout state = models::state_layout(s.policy, s.model->dtype);
    std::vector<std::int64_t> grad_bytes;
    for (std::int64_t r = 0; r < mp.pp; ++r) {
      const models::RankParameters params = models::rank_parameters(*s.model, mp, r);
      grad_bytes.push_back(static_cast<std::int64_t>(static_cast<double>(params.total()) *
                                                     models::element_bytes(state.grad_dtype)));
      step.state_bytes.push_back(models::state_memory(*s.model, mp, s.policy, r).total());
    }
    if (dp_group > 1) {
      schedules::add_gradient_all_reduce(
          builder, step.pipeline_ranks, grad_bytes,
          state.grad_dtype == models::Precision::kFp32 ? ir::DType::kFp32 : ir::DType::kBf16);
    }
  }
  ir::Graph graph = std::move(builder).build();

  // Durations.
  step.durations.resize(static_cast<std::size_t>(graph.num_tasks()));
  std::vector<double> optimizer(static_cast<std::size_t>(mp.pp), 0.0);
  if (s.model) {
    for (std::int64_t r = 0; r < mp.pp; ++r) {
      optimizer[static_cast<std::size_t>(r)] =
          models::optimizer_step_cost(*s.model, mp, s.policy, r, *compute).seconds;
    }
  }
  const auto model_stage = [&](ir::StageId stage) {
    return static_cast<std::size_t>(stage.value() % layout.model_stages);
  };
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const ir::Task& task = graph.task(ir::TaskId{t});
    double seconds = 0;
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      if (c->phase == ir::Phase::kOptimizer) {
        seconds = optimizer[static_cast<std::size_t>(task.rank.value() % step.pipeline_ranks)];
      } else if (task.stage.valid()) {
        seconds = phase_seconds(step.costs, c->phase, model_stage(task.stage));
        if (c->overlapped && c->overlapped->stage.valid()) {
          seconds +=
              phase_seconds(step.costs, c->overlapped->phase, model_stage(c->overlapped->stage));
        }
      }
    } else if (const auto* coll = std::get_if<ir::Collective>(&task.op)) {
      // The only collectives so far are the data-parallel ones: charged for the real dp·cp
      // group, whatever the graph holds of it (symmetric mode keeps one member).
      seconds = comm.collective_time(comm_op(coll->op), coll->bytes, groups.dp);
    } else if (task.kind() == ir::TaskKind::kSend || task.kind() == ir::TaskKind::kRecv) {
      seconds = step.costs.p2p;
    }
    step.durations[static_cast<std::size_t>(t)] = sim::from_seconds(seconds);
  }
  step.graph = std::move(graph);
  return step;
}

}  // namespace metron::plan
