// Note [configuration estimate] (estimate.h).

#include "metron/plan/estimate.h"

#include <algorithm>
#include <numeric>

#include "metron/base/error.h"
#include "metron/models/group_placement.h"
#include "metron/models/intra_layer_comm.h"
#include "metron/models/layer_shape.h"
#include "metron/models/memory_model.h"
#include "metron/models/stage_cost_model.h"
#include "metron/pipeline/placement.h"
#include "metron/pipeline/registry.h"
#include "metron/scenario/scenario.h"
#include "stash_peak.h"

namespace metron::plan {

/// What every configuration with the same layer shape and stage count shares, whatever its data-
/// parallel size: the compute of each model stage (the collectives, which dp places, are added
/// per configuration: LayerCommSeconds) and each rank's stash.
struct Estimator::StageProfile {
  // Per model stage, seconds of compute.
  std::vector<double> forward;
  std::vector<double> backward;           ///< B
  std::vector<double> backward_input;     ///< I (B where the costs do not split it)
  std::vector<double> backward_weight;    ///< W (0 where the costs do not split it)
  std::vector<double> layers;             ///< per model stage
  std::vector<detail::StashBytes> stash;  ///< per pipeline rank: one chunk's
};

/// What every configuration with the same sizes and policy shares, whatever its microbatches,
/// recompute and schedule: per pipeline rank, model state bytes and the optimizer step.
struct Estimator::RankState {
  std::vector<double> state_bytes;
  std::vector<double> optimizer_s;
  /// DualPipe's all-reduce of the rank's stage copies' gradients (sync/stage_copies.h), which
  /// follows its last compute and precedes its step; 0 for the other schedules.
  std::vector<double> copy_sum_s;
  /// Megatron's distributed optimizer over a dense model: one all-gather of the rank's
  /// parameters and one reduce-scatter of its gradients over the data-parallel group, each as
  /// one unpadded buffer (Note [whole-buffer sync in the bound]); empty otherwise.
  std::vector<double> param_gather_s;
  std::vector<double> grad_reduce_s;
};

namespace {

/// Seconds of a phase's blocking collectives for one layer (plan/step_builder.h charges each
/// collective task count × the time of one over its group's placement).
double blocking_seconds(const std::vector<models::LayerComm>& list,
                        const models::ParallelGroups& groups, const models::CommModel& comm) {
  double total = 0;
  for (const models::LayerComm& c : list) {
    if (c.overlapped) continue;
    const models::GroupPlacement& where = c.dim == models::LayerComm::Dim::kTensor    ? groups.tp
                                          : c.dim == models::LayerComm::Dim::kContext ? groups.cp
                                                                                      : groups.ep;
    total += c.per_layer * comm.collective_time(c.op, c.bytes, where);
  }
  return total;
}

/// 1 for the embedding, 2 for the loss: the accounted split (Note [uneven stages]) in a cache key.
int accounted_split(const models::ParallelSpec& p) {
  return (p.account_for_embedding_in_pipeline_split ? 1 : 0) +
         (p.account_for_loss_in_pipeline_split ? 2 : 0);
}

/// The schedule's chunks as the models see them (DualPipe's directions are copies of pp stages).
models::ParallelSpec model_parallel(const Candidate& c, const pipeline::ScheduleInfo& info) {
  models::ParallelSpec mp = c.parallel;
  if (info.placement == pipeline::Placement::kBidirectional) mp.vp = 1;
  return mp;
}

/// Whether `schedule` splits the backward into I and W: asked of the schedule itself, from a
/// small order, so that a new schedule cannot be mis-bounded.
bool splits_backward(std::string_view schedule) {
  static const std::vector<std::string_view> kSplitting = [] {
    std::vector<std::string_view> out;
    for (const pipeline::ScheduleInfo& info : pipeline::all_schedules()) {
      const bool many =
          info.name.find("interleaved") != std::string_view::npos || info.name == "looped-bfs";
      const std::int32_t vp = info.fixed_vp != 0 ? info.fixed_vp : (many ? 2 : 1);
      try {
        const pipeline::Order order = pipeline::generate_order(
            {.name = std::string(info.name), .pp = 4, .vp = vp, .microbatches = 8});
        for (const auto& row : order.rows) {
          for (const auto& a : row) {
            if (!a) continue;
            bool input = a->type == ir::ActionType::kBackwardInput;
            for (const ir::Action& half : a->sub) {
              input = input || half.type == ir::ActionType::kBackwardInput;
            }
            if (input && std::find(out.begin(), out.end(), info.name) == out.end()) {
              out.push_back(info.name);
            }
          }
        }
      } catch (const InvalidConfig&) {
        // Sizes this schedule rejects: count it as splitting, whose bound (I chains, W apart)
        // also holds for a schedule that runs whole B = I + W.
        out.push_back(info.name);
      }
    }
    return out;
  }();
  return std::find(kSplitting.begin(), kSplitting.end(), schedule) != kSplitting.end();
}

/// One layer's blocking intra-layer collectives per phase and the p2p, in seconds: what the
/// placement of the groups, and so the data-parallel size, changes. Computed per configuration
/// (a few collective times: cheaper than a cache's lookup under its lock).
struct LayerCommSeconds {
  double forward = 0;
  double backward = 0;
  double backward_input = 0;
  double backward_weight = 0;
  double p2p = 0;
};

LayerCommSeconds layer_comm_seconds(const models::ModelSpec& model, const models::ParallelSpec& mp,
                                    const models::HardwareSpec& hardware,
                                    const models::CommModel& comm) {
  const models::LayerCommPlan plan = models::layer_comm(model, mp);
  const models::ParallelGroups groups = models::parallel_groups(mp, hardware);
  return {.forward = blocking_seconds(plan.forward, groups, comm),
          .backward = blocking_seconds(plan.backward, groups, comm),
          .backward_input = blocking_seconds(plan.backward_input, groups, comm),
          .backward_weight = blocking_seconds(plan.backward_weight, groups, comm),
          .p2p = models::pipeline_p2p_time(model, mp, comm)};
}

/// What Note [whole-buffer sync in the bound] charges of each exchange: a little less than its
/// time, for the padding's rounding and any non-monotonic stretch of a bandwidth curve.
constexpr double kSyncBoundShare = 0.999;

/// Note [whole-buffer sync in the bound]: per pipeline rank, the all-gather time its first
/// forward waits for (0 on rank 0), or empty where the note does not apply.
std::vector<double> whole_buffer_gathers(const Candidate& c, const pipeline::ScheduleSpec& spec,
                                         const std::vector<double>& param_gather_s) {
  if (param_gather_s.empty() || spec.name != "1f1b" || spec.pp < 2 ||
      scenario::p2p_mode(scenario::ScheduleChoice{.name = spec.name}) !=
          lowering::P2PMode::kBatched) {
    return {};
  }
  const sync::SyncOptions o = planner_sync_options(c.policy);
  if (!o.overlap_param_gather || o.overlap_param_gather_with_optimizer_step ||
      o.distributed_optimizer_instances != 1 || o.iteration != sync::Iteration::kSteady ||
      o.grad_reduce_in_fp32.has_value() || c.parallel.fp8 != models::Fp8Recipe::kOff) {
    return {};
  }
  std::vector<double> out(param_gather_s.size(), 0.0);
  for (std::size_t r = 1; r < out.size(); ++r) out[r] = kSyncBoundShare * param_gather_s[r];
  return out;
}

}  // namespace

Estimator::Estimator(const PlanRequest& request)
    : request_(request), compute_(request.hardware, request.model.dtype), comm_(request.hardware) {}

Estimator::~Estimator() = default;

std::shared_ptr<const Estimator::StageProfile> Estimator::profile(const Candidate& c) const {
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(c.schedule);
  const models::ParallelSpec mp = model_parallel(c, info);
  const auto key =
      std::make_tuple(mp.tp, mp.cp, mp.ep, mp.sp(), mp.microbatch_size,
                      static_cast<int>(mp.recompute), mp.pp, mp.vp, splits_backward(c.schedule),
                      mp.first_stage_layers.value_or(0), mp.last_stage_layers.value_or(0),
                      static_cast<int>(info.placement), static_cast<int>(mp.attention),
                      static_cast<int>(mp.fp8), mp.tp_comm_overlap, accounted_split(mp));
  {
    const std::lock_guard lock(mutex_);
    if (auto it = profiles_.find(key); it != profiles_.end()) return it->second;
  }
  auto p = std::make_shared<StageProfile>();
  // Each stage's layers on its rank (Note [uneven stages]; even splits give every stage the same).
  const std::vector<std::int32_t> stage_ranks = pipeline::stage_ranks(
      info.placement, static_cast<std::int32_t>(mp.pp), static_cast<std::int32_t>(mp.pp * mp.vp));
  const std::vector<std::int64_t> stage_layers =
      models::model_stage_layers(request_.model, mp, stage_ranks);
  const models::StageCosts costs =
      models::model_stage_costs(request_.model, mp, compute_, comm_, stage_ranks);
  for (std::size_t s = 0; s < costs.stages(); ++s) {
    p->forward.push_back(costs.forward[s]);
    p->backward.push_back(costs.backward[s]);
    p->backward_input.push_back(costs.splits_backward() ? costs.backward_input[s]
                                                        : costs.backward[s]);
    p->backward_weight.push_back(costs.splits_backward() ? costs.backward_weight[s] : 0.0);
    p->layers.push_back(static_cast<double>(stage_layers[s]));
  }
  // The buffers scenario::build_step gives the lowering (its Note [building a step]), per rank
  // from the layers of its chunks.
  const models::LayerShape shape = models::layer_shape(request_.model, mp);
  const double activation = models::layer_activation_bytes(request_.model, shape, mp.recompute);
  const double weight_grad =
      models::layer_activation_bytes(request_.model, shape, models::Recompute::kSelective);
  // A rank's chunks hold the same layers, except under an accounted split, whose first and last
  // virtual stages hold one less: the rank's largest chunk stands for all of them, so the stash
  // estimate stays an upper bound there (and is exact elsewhere).
  p->stash.resize(static_cast<std::size_t>(mp.pp));
  for (std::size_t s = 0; s < stage_ranks.size(); ++s) {
    const auto layers = static_cast<double>(stage_layers[s]);
    detail::StashBytes& stash = p->stash[static_cast<std::size_t>(stage_ranks[s])];
    stash.activation = std::max(
        stash.activation, static_cast<double>(static_cast<std::int64_t>(layers * activation)));
    stash.weight_grad = std::max(
        stash.weight_grad, static_cast<double>(static_cast<std::int64_t>(layers * weight_grad)));
    stash.output = static_cast<double>(models::boundary_bytes(request_.model, mp));
  }
  const std::lock_guard lock(mutex_);
  return profiles_.emplace(key, std::move(p)).first->second;
}

std::shared_ptr<const Estimator::RankState> Estimator::rank_state(const Candidate& c) const {
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(c.schedule);
  const models::ParallelSpec mp = model_parallel(c, info);
  const auto key = std::make_tuple(
      mp.tp, mp.pp, mp.vp, mp.dp, mp.cp, mp.ep, static_cast<int>(c.policy),
      mp.first_stage_layers.value_or(0), mp.last_stage_layers.value_or(0), static_cast<int>(mp.fp8),
      accounted_split(mp), info.placement == pipeline::Placement::kBidirectional);
  {
    const std::lock_guard lock(mutex_);
    if (auto it = rank_states_.find(key); it != rank_states_.end()) return it->second;
  }
  const models::StatePolicy policy = *models::parse_state_policy(sync::to_string(c.policy));
  auto out = std::make_shared<RankState>();
  // Every model stage the rank holds (DualPipe: two), as scenario::build_step prices them.
  const auto gradient_bytes = static_cast<std::int64_t>(
      models::element_bytes(models::state_layout(policy, request_.model.dtype).grad_dtype));
  const models::GroupPlacement copies = models::parallel_groups(mp, request_.hardware).pp_ends;
  for (std::int64_t r = 0; r < mp.pp; ++r) {
    double state = 0;
    double optimizer = 0;
    std::int64_t parameters = 0;
    const std::vector<std::int64_t> held = scenario::held_model_stages(c.schedule, mp.pp, r);
    for (const std::int64_t k : held) {
      state += models::state_memory(request_.model, mp, policy, k).total();
      optimizer += models::optimizer_step_cost(request_.model, mp, policy, k, compute_).seconds;
      parameters += models::rank_parameters(request_.model, mp, k).total();
    }
    out->state_bytes.push_back(state);
    out->optimizer_s.push_back(optimizer);
    out->copy_sum_s.push_back(
        held.size() > 1
            ? comm_.collective_time(models::CommOp::kAllReduce, parameters * gradient_bytes, copies)
            : 0.0);
    if (c.policy == sync::SyncPolicy::kMegatronDistopt && held.size() == 1) {
      const models::RankParameters own = models::rank_parameters(request_.model, mp, held.front());
      if (own.expert == 0) {
        // The sync pass's SyncInput: parameters in the weight dtype, gradients in the grad
        // dtype (scenario/step_builder.cc), over the "dp" group (dp·cp ranks).
        const models::StateLayout layout = models::state_layout(policy, request_.model.dtype);
        const models::GroupPlacement dp = models::parallel_groups(mp, request_.hardware).dp;
        const auto weight_bytes =
            static_cast<std::int64_t>(models::element_bytes(layout.weight_dtype));
        out->param_gather_s.push_back(
            comm_.collective_time(models::CommOp::kAllGather, own.dense * weight_bytes, dp));
        out->grad_reduce_s.push_back(
            comm_.collective_time(models::CommOp::kReduceScatter, own.dense * gradient_bytes, dp));
      }
    }
  }
  if (std::ssize(out->param_gather_s) != mp.pp) {
    out->param_gather_s.clear();
    out->grad_reduce_s.clear();
  }
  const std::lock_guard lock(mutex_);
  return rank_states_.emplace(key, std::move(out)).first->second;
}

std::shared_ptr<const pipeline::Order> Estimator::order(const pipeline::ScheduleSpec& spec) const {
  const auto key =
      std::make_tuple(spec.name, spec.pp, spec.vp, spec.microbatches, spec.group_size.value_or(0));
  {
    const std::lock_guard lock(mutex_);
    if (auto it = orders_.find(key); it != orders_.end()) return it->second;
  }
  auto generated = std::make_shared<const pipeline::Order>(pipeline::generate_order(spec));
  const std::lock_guard lock(mutex_);
  return orders_.emplace(key, std::move(generated)).first->second;
}

Estimate Estimator::estimate(const Candidate& c) const {
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(c.schedule);
  const std::shared_ptr<const StageProfile> prof = profile(c);
  const auto p = static_cast<std::int32_t>(c.parallel.pp);
  const auto v = static_cast<std::int32_t>(c.parallel.vp);
  const auto m = static_cast<std::int32_t>(*c.parallel.microbatches());
  const bool bidirectional = info.placement == pipeline::Placement::kBidirectional;
  const std::int32_t stages = p * v;
  const std::int32_t model_stages = static_cast<std::int32_t>(prof->forward.size());
  const std::vector<std::int32_t> rank_of = pipeline::stage_ranks(info.placement, p, stages);
  const pipeline::ScheduleSpec spec{.name = std::string(c.schedule),
                                    .pp = p,
                                    .vp = v,
                                    .microbatches = m,
                                    .group_size = c.group_size};

  // Memory.
  Estimate e;
  std::optional<std::vector<double>> stash = detail::closed_form_stash_peak(spec, prof->stash);
  if (!stash) {
    stash = detail::walked_stash_peak(*order(spec), info.placement, p, prof->stash);
  }
  const std::shared_ptr<const RankState> ranks = rank_state(c);
  const std::vector<double>& optimizer = ranks->optimizer_s;
  for (std::size_t r = 0; r < ranks->state_bytes.size(); ++r) {
    e.memory_bytes.push_back(ranks->state_bytes[r] + (*stash)[r]);
  }
  const auto peak = std::max_element(e.memory_bytes.begin(), e.memory_bytes.end());
  e.peak_memory_bytes = *peak;
  e.peak_rank = static_cast<std::int32_t>(peak - e.memory_bytes.begin());

  // The bound.
  const bool split = splits_backward(c.schedule);
  const auto model_stage = [&](std::int32_t s) {
    return static_cast<std::size_t>(s % model_stages);
  };
  // Each model stage's F, X (B, or I where the schedule splits the backward) and W with the
  // blocking collectives of its layers.
  const LayerCommSeconds comm =
      layer_comm_seconds(request_.model, model_parallel(c, info), request_.hardware, comm_);
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> weight_grad;
  for (std::size_t s = 0; s < prof->forward.size(); ++s) {
    const double layers = prof->layers[s];
    forward.push_back(prof->forward[s] + layers * comm.forward);
    backward.push_back(split ? prof->backward_input[s] + layers * comm.backward_input
                             : prof->backward[s] + layers * comm.backward);
    weight_grad.push_back(split ? prof->backward_weight[s] + layers * comm.backward_weight : 0.0);
  }
  const double per_stage = bidirectional ? m / 2.0 : static_cast<double>(m);
  std::vector<double> fx(static_cast<std::size_t>(p), 0.0);
  std::vector<double> weight(static_cast<std::size_t>(p), 0.0);
  std::vector<std::int32_t> lowest(static_cast<std::size_t>(p), stages);
  std::vector<double> sends(static_cast<std::size_t>(p), 0.0);
  for (std::int32_t s = 0; s < stages; ++s) {
    const auto r = static_cast<std::size_t>(rank_of[static_cast<std::size_t>(s)]);
    const std::size_t ms = model_stage(s);
    fx[r] += per_stage * (forward[ms] + backward[ms]);
    weight[r] += per_stage * weight_grad[ms];
    lowest[r] = std::min(lowest[r], s);
    sends[r] += per_stage * ((s < stages - 1 ? 1 : 0) + (s > 0 ? 1 : 0));
  }
  // Megatron's batched exchanges block the host until they complete, and a send cannot start
  // before its compute ends, so a compute whose output an exchange sends before the rank's next
  // compute is followed by one p2p time. 1F1B (Note [batched p2p steps]): every sending compute
  // (all but possibly the rank's last). Interleaved 1F1B (Note [batched interleaved
  // exchanges]): the w warm-up forwards and every backward but those of stage 0; a steady
  // forward's output waits for the call after the next backward, so it adds nothing.
  if (scenario::p2p_mode(scenario::ScheduleChoice{.name = spec.name}) ==
          lowering::P2PMode::kBatched &&
      p > 1) {
    for (std::int32_t r = 0; r < p; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      double blocking = 0;
      if (spec.name == "1f1b") {
        blocking = sends[ri];
      } else if (spec.name == "interleaved-1f1b") {
        const std::int32_t total = m * v;
        const std::int32_t warmup =
            std::min(2 * (p - r - 1) + (v - 1) * c.group_size.value_or(p), total);
        blocking = warmup + total - (r == 0 ? m : 0);
      }
      fx[ri] += std::max(0.0, blocking - 1) * comm.p2p;
    }
  }
  // Note [whole-buffer sync in the bound]: the data-parallel exchanges that sit on the rank's
  // path, where the step has them (1F1B, batched p2p, Megatron's distributed optimizer).
  const std::vector<double> gather = whole_buffer_gathers(c, spec, ranks->param_gather_s);
  const std::vector<double> reduce = gather.empty() ? gather : ranks->grad_reduce_s;
  const auto gather_on = [&](std::int32_t r) {
    return gather.empty() ? 0.0 : gather[static_cast<std::size_t>(r)];
  };
  const auto reduce_on = [&](std::int32_t r) {
    return reduce.empty() || r == 0 ? 0.0 : kSyncBoundShare * reduce[static_cast<std::size_t>(r)];
  };
  double bound = 0;
  for (std::int32_t r = 0; r < p; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    double head = 0;
    double tail = optimizer[0];
    if (!bidirectional) {
      for (std::int32_t s = 0; s < lowest[ri]; ++s) {
        head +=
            gather_on(rank_of[static_cast<std::size_t>(s)]) + forward[model_stage(s)] + comm.p2p;
        tail += backward[model_stage(s)] + comm.p2p;
      }
    } else {
      tail = 0;
    }
    bound = std::max(
        bound,
        head + gather_on(r) + fx[ri] +
            std::max(weight[ri] + ranks->copy_sum_s[ri] + reduce_on(r) + optimizer[ri], tail));
  }
  e.bound_s = bound * (1 - 1e-4);
  return e;
}

}  // namespace metron::plan
