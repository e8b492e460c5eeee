// Note [building a step] (step_builder.h).

#include "metron/scenario/step_builder.h"

#include <fmt/format.h>

#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/comm_groups.h"
#include "metron/lowering/data_parallel.h"
#include "metron/lowering/intra_layer.h"
#include "metron/lowering/tensor_parallel.h"
#include "metron/models/comm_cost.h"
#include "metron/models/compute_cost.h"
#include "metron/models/group_placement.h"
#include "metron/models/intra_layer_comm.h"
#include "metron/models/limits.h"
#include "metron/models/memory_model.h"
#include "metron/models/parameter_tensors.h"
#include "metron/models/stage_cost_model.h"
#include "metron/pipeline/placement.h"
#include "metron/pipeline/registry.h"
#include "metron/sync/embedding_grads.h"
#include "metron/sync/stage_copies.h"
#include "metron/sync/sync_policy.h"
#include "task_operations.h"

namespace metron::scenario {
namespace {

/// The schedule's chunks per rank, and the parallel spec the cost and memory models see (whose
/// vp counts model stages: DualPipe's two directions are copies of the same pp stages).
struct Layout {
  pipeline::ScheduleSpec spec;
  models::ParallelSpec model_parallel;
  std::int64_t model_stages = 1;
  /// The pipeline rank of each of the schedule's pp·vp stages (DualPipe's copies included).
  std::vector<std::int32_t> stage_ranks;
};

Layout layout_of(const Scenario& s) {
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(s.schedule.name);
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
  out.model_parallel = model_split(s);
  out.model_stages = out.model_parallel.pp * out.model_parallel.vp;
  out.stage_ranks = pipeline::stage_ranks(info.placement, out.spec.pp, out.spec.pp * out.spec.vp);
  return out;
}

ir::CollectiveOp ir_op(models::CommOp op) {
  switch (op) {
    case models::CommOp::kReduceScatter:
      return ir::CollectiveOp::kReduceScatter;
    case models::CommOp::kAllGather:
      return ir::CollectiveOp::kAllGather;
    case models::CommOp::kReduce:
      return ir::CollectiveOp::kReduce;
    case models::CommOp::kBroadcast:
      return ir::CollectiveOp::kBroadcast;
    case models::CommOp::kAllToAll:
      return ir::CollectiveOp::kAllToAll;
    default:
      return ir::CollectiveOp::kAllReduce;
  }
}

/// The element type of the activations the model's collectives move.
ir::DType collective_dtype(const models::ModelSpec& model) {
  return models::element_bytes(model.dtype) >= 4 ? ir::DType::kFp32 : ir::DType::kBf16;
}

/// The model's per-layer collectives (models/intra_layer_comm.h) as the lowering pass takes them,
/// and the all-gather after each receive under the pipeline scatter/gather (Note [pipeline
/// scatter/gather] in lowering/intra_layer.h) of `output_bytes`, the whole boundary tensor.
lowering::IntraLayerComm intra_layer_comm(const models::ModelSpec& model,
                                          const models::ParallelSpec& spec,
                                          std::int64_t output_bytes) {
  const models::LayerCommPlan plan = models::layer_comm(model, spec);
  const ir::DType dtype = collective_dtype(model);
  const auto convert = [&](const std::vector<models::LayerComm>& list) {
    std::vector<lowering::LayerCollective> out;
    for (const models::LayerComm& c : list) {
      const lowering::GroupKind kind =
          c.dim == models::LayerComm::Dim::kTensor    ? lowering::GroupKind::kTensor
          : c.dim == models::LayerComm::Dim::kContext ? lowering::GroupKind::kContext
                                                      : lowering::GroupKind::kExpert;
      out.push_back({.group = kind,
                     .op = ir_op(c.op),
                     .bytes = c.bytes,
                     .per_layer = c.per_layer,
                     .overlapped = c.overlapped,
                     .dtype = dtype});
    }
    return out;
  };
  lowering::IntraLayerComm comm{.forward = convert(plan.forward),
                                .backward = convert(plan.backward),
                                .backward_input = convert(plan.backward_input),
                                .backward_weight = convert(plan.backward_weight),
                                .recompute = convert(plan.recompute)};
  // nccl-tests' all-gather size is its output.
  if (spec.p2p_scatter_gather()) {
    comm.received.push_back({.group = lowering::GroupKind::kTensor,
                             .op = ir::CollectiveOp::kAllGather,
                             .bytes = output_bytes,
                             .dtype = dtype});
  }
  return comm;
}

/// What the sync-policy pass needs: every pipeline rank's chunks with their parameter tensors
/// (models/parameter_tensors.h), from the stages the schedule places on it (`ranks`). Model
/// stage m holds `stage_layers[m]` layers; the first stage adds the embeddings, the last the
/// head. DualPipe's second direction repeats the model stages, embeddings and head included
/// (its microbatches enter at the last rank and take their loss on the first): each copy holds
/// and reduces every parameter of its model stage (Note [stage copies] in sync/stage_copies.h).
sync::SyncInput sync_input(const Scenario& s, const models::ParallelSpec& mp,
                           const pipeline::ScheduleSpec& spec,
                           const std::vector<std::int32_t>& ranks,
                           const std::vector<std::int64_t>& stage_layers,
                           std::int64_t layers_total) {
  const std::int32_t stages = spec.pp * spec.vp;
  const auto model_stages = std::ssize(stage_layers);
  const models::StateLayout layout = models::state_layout(state_policy(s), s.model->dtype);
  sync::SyncInput in{
      .pipeline_ranks = spec.pp,
      .data_parallel = static_cast<std::int32_t>(mp.dp * mp.cp),
      .expert_data_parallel = static_cast<std::int32_t>(mp.dp * mp.cp / mp.ep),
      .param_bytes = static_cast<std::int64_t>(models::element_bytes(layout.weight_dtype)),
      .grad_bytes = static_cast<std::int64_t>(models::element_bytes(layout.grad_dtype)),
      .interleaved = spec.name == "interleaved-1f1b" || spec.name == "interleaved-1f1b-legacy",
      .stage_copies =
          pipeline::find_schedule(spec.name).placement == pipeline::Placement::kBidirectional};
  in.params.resize(static_cast<std::size_t>(spec.pp));
  std::int64_t first = 0;  // the stage's first layer, numbered on past the model's end
  for (std::int32_t stage = 0; stage < stages; ++stage) {
    const std::int64_t layers = stage_layers[static_cast<std::size_t>(stage % model_stages)];
    // DualPipe's second direction: the same model stages again, numbered past the model's end.
    const std::int64_t model_first = first % layers_total;
    sync::ChunkParams chunk{.stage = stage};
    for (const models::ParameterTensor& t :
         models::parameter_tensors(*s.model, mp, model_first, model_first + layers,
                                   model_first == 0, model_first + layers == layers_total)) {
      chunk.tensors.push_back(
          {.name = t.name,
           .layer = static_cast<std::int32_t>(t.layer + (first - first % layers_total)),
           .numel = t.numel,
           .expert = t.expert,
           .shared_embedding = t.shared_embedding,
           .outside_layers = t.outside_layers});
    }
    in.params[static_cast<std::size_t>(ranks[static_cast<std::size_t>(stage)])].push_back(
        std::move(chunk));
    first += layers;
  }
  return in;
}

/// The placement a group kind's collectives are charged for (comm_groups.h).
models::GroupPlacement placement_of(lowering::GroupKind kind, const models::ParallelGroups& g,
                                    const models::ParallelSpec& mp, const models::HardwareSpec& hw,
                                    const sync::SyncOptions& sync) {
  const std::int64_t dp = mp.dp * mp.cp;
  const std::int64_t intra =
      sync.hsdp_shard_size ? *sync.hsdp_shard_size : dp / sync.distributed_optimizer_instances;
  const std::int64_t expert_dp = dp / mp.ep;
  const std::int64_t expert_intra = std::max<std::int64_t>(1, expert_dp * intra / dp);
  const std::int64_t gpn = hw.gpus_per_node;
  switch (kind) {
    case lowering::GroupKind::kTensor:
      return g.tp;
    case lowering::GroupKind::kContext:
      return g.cp;
    case lowering::GroupKind::kExpert:
      return g.ep;
    case lowering::GroupKind::kData:
      return g.dp;
    case lowering::GroupKind::kExpertData:
      return g.expert_dp;
    case lowering::GroupKind::kDataIntra:
      return models::group_placement(intra, mp.tp, gpn);
    case lowering::GroupKind::kDataInter:
      return models::group_placement(dp / intra, mp.tp * intra, gpn);
    case lowering::GroupKind::kExpertIntra:
      return models::group_placement(expert_intra, mp.tp * mp.ep, gpn);
    case lowering::GroupKind::kExpertInter:
      return models::group_placement(expert_dp / expert_intra, mp.tp * mp.ep * expert_intra, gpn);

    case lowering::GroupKind::kStageCopies:
    case lowering::GroupKind::kEmbedding:
      return g.pp_ends;
  }
  return g.dp;
}

// Note [per-tensor host work]: DeepSpeed's per-tensor ZeRO-3 collectives (Note [zero per-tensor
// collectives] in schedules/sync/src/sync_zero.h) spend, per call and per rank of the group, a
// Python narrow() for the rank's view and one c10d copy_ between the flat buffer and that view.
// Published host overheads: a dispatcher call takes ~2 us from Python and ~1 us from C++
// (pytorch/pytorch issue 41383, a maintainer's measurement), a raw cuLaunchKernel 3.0 us
// (meta-pytorch/tritonbench PR 1017): 2 + 1 + 3 = 6 us per view. Each copy moves one
// partition, which the GPU finishes faster than the host submits the next, so the host's time
// is the cost. It is charged on the collective's task: with zero_synchronous_fetch the host keeps
// in step with the device, so what delays the host before and after the call delays the stream.
constexpr double kViewHostSeconds = 6e-6;

/// The host time of a data-parallel collective `c` over `group` (Note [per-tensor host work]).
double per_tensor_host_seconds(const sync::SyncOptions& sync, const ir::Collective& c,
                               const models::GroupPlacement& group) {
  if (!sync.zero_per_tensor_collectives) return 0;
  if (c.op != ir::CollectiveOp::kAllGather && c.op != ir::CollectiveOp::kReduceScatter) return 0;
  return static_cast<double>(c.count) * static_cast<double>(group.ranks) * kViewHostSeconds;
}

std::vector<double> in_ms(const std::vector<double>& seconds) {
  std::vector<double> out;
  for (double s : seconds) out.push_back(s * 1e3);
  return out;
}

// Note [piece costs]: a sync policy cuts a stage's task into pieces at bucket boundaries
// (compute_split.h), and when each piece ends decides when its bucket's collective starts. The
// stage's embedding and head do not spread over its layers: the piece holding the model's last
// layer runs the head (the LM head's GEMMs, 30 % of gpt3-125m's backward at sequence 128), the
// one holding its first layer the embedding, as the executor's operations do (Note [task
// operations]). So when the stage times come from the model, a piece is priced by the ops it
// runs; the pieces of a task still add up to its time. Explicit stage times (a scenario's
// `costs`) say nothing about their parts: a piece gets its share of the stage's layers.
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

Step build_step(const Scenario& s, Replication replication, Payload payload) {
  validate(s);
  Layout layout = layout_of(s);
  const models::ParallelSpec& mp = layout.model_parallel;

  // Stage times: explicit, or from the models.
  // The model stages' ranks (DualPipe's copies repeat them): what their layer counts follow.
  const std::span<const std::int32_t> model_stage_ranks =
      std::span(layout.stage_ranks).first(static_cast<std::size_t>(layout.model_stages));
  std::optional<models::ComputeModel> compute;
  const models::CostProfile* profile = s.profile ? &*s.profile : nullptr;
  const models::CommModel comm(s.hardware, profile);
  if (s.model) compute.emplace(s.hardware, s.model->dtype, profile);
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
    step.costs = models::model_stage_costs(*s.model, mp, *compute, comm, model_stage_ranks);
  }
  layout.spec.times = {.forward = in_ms(step.costs.forward),
                       .backward_input = in_ms(step.costs.backward_input),
                       .backward_weight = in_ms(step.costs.backward_weight),
                       .p2p = step.costs.p2p * 1e3};

  // The graph.
  lowering::LoweringOptions lowering{
      .p2p = p2p_mode(s.schedule),
      .hardware_queues = static_cast<std::int32_t>(s.hardware.hardware_queues)};
  const std::int32_t stages = layout.spec.pp * layout.spec.vp;
  // Layers per model stage and per pipeline rank as the graph holds them (a rank's chunks,
  // DualPipe's copies included): uneven under Note [uneven stages].
  std::vector<std::int64_t> stage_layers;
  std::vector<std::int64_t> rank_layers(static_cast<std::size_t>(layout.spec.pp), 0);
  std::optional<models::LayerShape> shape;
  if (s.model) {
    shape = models::layer_shape(*s.model, mp);
    stage_layers = models::model_stage_layers(*s.model, mp, model_stage_ranks);
    const double activation = models::layer_activation_bytes(*s.model, *shape, mp.recompute);
    // ZB's M_W: what W keeps after I — the linear layers' inputs and output gradients, which
    // the selective-recompute inventory (everything but the score-sized tensors) approximates.
    const double weight_grad =
        models::layer_activation_bytes(*s.model, *shape, models::Recompute::kSelective);
    for (std::int32_t g = 0; g < stages; ++g) {
      const std::int64_t layers = stage_layers[static_cast<std::size_t>(g % layout.model_stages)];
      const auto l = static_cast<double>(layers);
      lowering.stage_activation_bytes.push_back(static_cast<std::int64_t>(l * activation));
      lowering.stage_weight_grad_bytes.push_back(static_cast<std::int64_t>(l * weight_grad));
      // Layer ranges on the compute tasks, so passes can cut them and costs can share them out.
      lowering.layers.per_stage.push_back(static_cast<std::int32_t>(layers));
      rank_layers[static_cast<std::size_t>(layout.stage_ranks[static_cast<std::size_t>(g)])] +=
          layers;
    }
    lowering.p2p_bytes = models::boundary_bytes(*s.model, mp);
    // The pipeline scatter/gather sends a 1/tp piece of a whole tensor (Note [pipeline
    // scatter/gather] in lowering/intra_layer.h).
    if (mp.p2p_scatter_gather()) lowering.output_bytes = lowering.p2p_bytes * mp.tp;
  }
  // Note [input limits]: every replica repeats the pipeline's actions; refuse before building.
  if (replication == Replication::kFull) {
    const double actions = static_cast<double>(mp.tp) * static_cast<double>(mp.dp) *
                           layout.spec.microbatches * layout.spec.pp * layout.spec.vp;
    if (actions > static_cast<double>(models::kMaxStepActions)) {
      throw InvalidConfig(fmt::format(
          "scenario: --full simulates tp·dp·microbatches·pp·vp = {}·{}·{}·{}·{} = {:.0f} "
          "forwards; expected at most {} (the limit of forwards per step); simulate one replica "
          "instead",
          mp.tp, mp.dp, layout.spec.microbatches, layout.spec.pp, layout.spec.vp, actions,
          models::kMaxStepActions));
    }
  }
  // One validation for the whole step: lower, replicate and add communication on a builder.
  ir::GraphBuilder builder =
      lowering::lower_unvalidated(pipeline::generate_order(layout.spec), lowering);
  const std::int64_t dp_group = mp.dp * mp.cp;
  step.pipeline_ranks = layout.spec.pp;
  step.replicas = replication == Replication::kFull ? static_cast<std::int32_t>(mp.dp) : 1;
  if (step.replicas > 1) {
    builder = ir::GraphBuilder(
        lowering::replicate_data_parallel(std::move(builder).build(), step.replicas));
  }
  const models::ParallelGroups groups = models::parallel_groups(mp, s.hardware);
  // A rank's state and optimizer step are those of every model stage it holds (DualPipe: two).
  const auto per_rank = [&](std::int64_t r, const auto& of_stage) {
    double sum = 0;
    for (const std::int64_t k : held_model_stages(s.schedule.name, mp.pp, r)) sum += of_stage(k);
    return sum;
  };
  const pipeline::Placement schedule_placement = pipeline::find_schedule(s.schedule.name).placement;
  const bool stage_copies = schedule_placement == pipeline::Placement::kBidirectional;
  // Tied embeddings on two pipeline ranks (Note [embedding gradients]); the V schedules and
  // DualPipe hold both ends on one rank.
  const bool embedding_sum = s.model && s.model->tied_embeddings && mp.pp > 1 &&
                             schedule_placement == pipeline::Placement::kLoop;
  if (s.model) {
    const models::StatePolicy policy = state_policy(s);
    for (std::int64_t r = 0; r < mp.pp; ++r) {
      step.state_bytes.push_back(per_rank(r, [&](std::int64_t k) {
        return models::state_memory(*s.model, mp, policy, k).total();
      }));
    }
    const lowering::IntraLayerComm intra =
        intra_layer_comm(*s.model, mp, lowering.output_bytes.value_or(lowering.p2p_bytes));
    if (!intra.empty()) lowering::add_intra_layer_collectives(builder, intra);
    if (dp_group > 1 || stage_copies || embedding_sum) {
      step.sync_input =
          sync_input(s, mp, layout.spec, layout.stage_ranks, stage_layers, s.model->layers);
    }
    if (dp_group > 1) step.sync_plan = sync::add_sync_policy(builder, step.sync_input, s.sync);
    if (stage_copies) sync::add_stage_copy_sum(builder, step.sync_input);
    if (embedding_sum) sync::add_embedding_grad_sum(builder, step.sync_input);
  }
  if (s.model && payload == Payload::kOperations) {
    // What each compute task computes, for an executor (Note [task operations]).
    detail::add_task_operations(
        builder,
        {.model = *s.model, .parallel = mp, .policy = state_policy(s), .rank_layers = rank_layers});
  }
  ir::Graph graph = std::move(builder).build();
  // Full mode gives every tensor-parallel peer its rank too (Note [tensor-parallel peers]); a
  // second validation, paid only here.
  if (replication == Replication::kFull && mp.tp > 1) {
    graph = lowering::replicate_tensor_parallel(graph, static_cast<std::int32_t>(mp.tp));
  }

  // Durations.
  step.durations.resize(static_cast<std::size_t>(graph.num_tasks()));
  std::vector<double> optimizer(static_cast<std::size_t>(mp.pp), 0.0);
  if (s.model) {
    for (std::int64_t r = 0; r < mp.pp; ++r) {
      optimizer[static_cast<std::size_t>(r)] = per_rank(r, [&](std::int64_t k) {
        return models::optimizer_step_cost(*s.model, mp, state_policy(s), k, *compute).seconds;
      });
    }
  }
  // A collective is charged for the real group of its kind (comm_groups.h), whatever the graph
  // holds of it: symmetric mode keeps one member, and tensor/context/expert peers are never in
  // the graph. Worked out once per group: parsing the group's name for every collective task
  // cost more than the rest of the loop.
  std::vector<bool> data_parallel_group;
  for (const ir::Group& group : graph.data().groups) {
    const std::optional<lowering::GroupKind> kind = lowering::group_kind(group.name);
    step.group_placements.push_back(kind ? placement_of(*kind, groups, mp, s.hardware, s.sync)
                                         : groups.dp);
    data_parallel_group.push_back(kind == lowering::GroupKind::kData);
  }
  step.p2p_same_node = groups.pp_neighbours_share_node;
  step.compute_slowdown_during_comm = profile && profile->compute_slowdown_during_comm
                                          ? *profile->compute_slowdown_during_comm
                                          : s.hardware.compute_slowdown_during_comm;
  step.comm_slowdown_during_compute = profile && profile->comm_slowdown_during_compute
                                          ? *profile->comm_slowdown_during_compute
                                          : s.hardware.comm_slowdown_during_compute;
  const auto model_stage = [&](ir::StageId stage) {
    return static_cast<std::size_t>(stage.value() % layout.model_stages);
  };
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const ir::Task& task = graph.task(ir::TaskId{t});
    double seconds = 0;
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      if (c->phase == ir::Phase::kOptimizer) {
        seconds = optimizer[static_cast<std::size_t>(task.rank.value() % step.pipeline_ranks)];
        // One chunk's optimizer (Megatron's chained optimizer): its share of the rank's layers.
        // 0 without a model: the scenario's explicit costs give whole-rank times.
        const std::int64_t on_rank =
            rank_layers[static_cast<std::size_t>(task.rank.value() % step.pipeline_ranks)];
        if (!task.layers.empty() && on_rank > 0) {
          seconds *= static_cast<double>(task.layers.last - task.layers.first) /
                     static_cast<double>(on_rank);
        }
      } else if (task.stage.valid()) {
        seconds = phase_seconds(step.costs, c->phase, model_stage(task.stage));
        // A piece of a stage's task (compute_split.h). Note [piece costs]: priced by the ops it
        // runs when the stage times come from the model, else its share of the stage's layers.
        const std::int64_t piece_layers = task.layers.last - task.layers.first;
        const std::int64_t layers_per_stage =
            stage_layers.empty() ? 0 : stage_layers[model_stage(task.stage)];
        if (!task.layers.empty() && piece_layers < layers_per_stage && !s.costs && shape) {
          seconds = 0;
          for (const detail::CountedOps& part :
               detail::phase_ops(*s.model, *shape, mp.recompute, c->phase, task.layers)) {
            seconds += static_cast<double>(part.count) * compute->cost(part.ops).seconds;
          }
        } else if (!task.layers.empty() && layers_per_stage > 0) {
          seconds *= static_cast<double>(piece_layers) / static_cast<double>(layers_per_stage);
        }
        if (c->overlapped && c->overlapped->stage.valid()) {
          seconds +=
              phase_seconds(step.costs, c->overlapped->phase, model_stage(c->overlapped->stage));
        }
      }
    } else if (const auto* coll = std::get_if<ir::Collective>(&task.op)) {
      // A task standing for `count` collectives pays each one's latency.
      const models::GroupPlacement& placement = step.group_placements[coll->group.index()];
      seconds = coll->count *
                comm.collective_time(comm_op(coll->op), coll->bytes / coll->count, placement);
      if (data_parallel_group[coll->group.index()]) {
        seconds += per_tensor_host_seconds(s.sync, *coll, placement);
      }
    } else if (task.kind() == ir::TaskKind::kSend || task.kind() == ir::TaskKind::kRecv) {
      seconds = step.costs.p2p;
    }
    // Note [input limits]: one task's time in range before it becomes integer nanoseconds.
    if (!(seconds >= 0 && seconds <= models::kMaxTaskSeconds)) {
      throw InvalidConfig(fmt::format(
          "{}: duration {} s; expected between 0 and {} s (a day, the limit of one task's time)",
          graph.describe(ir::TaskId{t}), seconds, models::kMaxTaskSeconds));
    }
    step.durations[static_cast<std::size_t>(t)] = sim::from_seconds(seconds);
  }
  step.graph = std::move(graph);
  return step;
}

}  // namespace metron::scenario
