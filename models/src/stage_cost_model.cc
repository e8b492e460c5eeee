// Note [stage costs from the model] (stage_cost_model.h).

#include "metron/models/stage_cost_model.h"

#include <algorithm>
#include <string>

#include "metron/base/error.h"
#include "metron/models/group_placement.h"
#include "metron/models/layer_shape.h"

namespace metron::models {

std::vector<std::int64_t> model_stage_layers(const ModelSpec& model, const ParallelSpec& spec,
                                             std::span<const std::int32_t> stage_ranks) {
  const std::int64_t stages = spec.pp * spec.vp;
  const bool even = !spec.uneven_split();
  if (even && (stages <= 0 || model.layers % stages != 0)) {
    throw InvalidConfig("stage costs: layers (" + std::to_string(model.layers) +
                        ") must be divisible by pp·vp (" + std::to_string(stages) + ")");
  }
  const std::vector<std::int64_t> ranks = pipeline_rank_layers(model, spec);
  if (!stage_ranks.empty() && std::ssize(stage_ranks) != stages) {
    throw InvalidConfig("stage costs: " + std::to_string(stage_ranks.size()) +
                        " stage ranks; expected pp·vp = " + std::to_string(stages));
  }
  const bool accounted =
      spec.account_for_embedding_in_pipeline_split || spec.account_for_loss_in_pipeline_split;
  // Accounted splits differ between a rank's chunks (its first or last virtual stage holds one
  // layer less); the others give every chunk of a rank the same share.
  const std::vector<std::int64_t> virtual_stages =
      accounted ? virtual_stage_layers(model, spec) : std::vector<std::int64_t>{};
  std::vector<std::int64_t> out;
  for (std::int64_t s = 0; s < stages; ++s) {
    const std::int64_t rank =
        stage_ranks.empty() ? s % spec.pp : stage_ranks[static_cast<std::size_t>(s)];
    if (rank < 0 || rank >= spec.pp) {
      throw InvalidConfig("stage costs: stage " + std::to_string(s) + " on rank " +
                          std::to_string(rank) +
                          "; expected a rank below pp = " + std::to_string(spec.pp));
    }
    if (accounted && rank != s % spec.pp) {
      // Megatron defines the accounted split for its looped placement only.
      throw InvalidConfig(
          "account_for_embedding/loss_in_pipeline_split follow Megatron's looped placement "
          "(stage s on rank s mod pp); this schedule places stage " +
          std::to_string(s) + " on rank " + std::to_string(rank));
    }
    out.push_back(accounted ? virtual_stages[static_cast<std::size_t>(s)]
                            : ranks[static_cast<std::size_t>(rank)] / spec.vp);  // vp divides
  }
  return out;
}

StageCosts model_stage_costs(const ModelSpec& model, const ParallelSpec& spec,
                             const ComputeModel& compute, const CommModel& comm,
                             std::span<const std::int32_t> stage_ranks) {
  const std::vector<std::int64_t> stage_layers = model_stage_layers(model, spec, stage_ranks);
  const auto stages = std::ssize(stage_layers);
  const LayerShape shape = layer_shape(model, spec);
  const LayerPhaseCosts layer = layer_phase_costs(model, shape, spec.recompute, compute);
  const auto part = [&](const std::vector<OpCost>& ops) { return compute.cost(ops).seconds; };
  const double embedding_f = part(embedding_ops(model, shape, ComputePhase::kForward));
  const double embedding_w = part(embedding_ops(model, shape, ComputePhase::kBackwardWeight));
  const double head_f = part(head_ops(model, shape, ComputePhase::kForward));
  const double head_i = part(head_ops(model, shape, ComputePhase::kBackwardInput));
  const double head_w = part(head_ops(model, shape, ComputePhase::kBackwardWeight));

  StageCosts costs;
  for (std::int64_t s = 0; s < stages; ++s) {
    const bool first = s == 0;
    const bool last = s == stages - 1;
    const auto layers = static_cast<double>(stage_layers[static_cast<std::size_t>(s)]);
    const double f =
        layers * layer.forward.seconds + (first ? embedding_f : 0) + (last ? head_f : 0);
    const double i =
        layers * (layer.backward_input.seconds + layer.recompute.seconds) + (last ? head_i : 0);
    const double w =
        layers * layer.backward_weight.seconds + (first ? embedding_w : 0) + (last ? head_w : 0);
    costs.forward.push_back(f);
    costs.backward_input.push_back(i);
    costs.backward_weight.push_back(w);
    costs.backward.push_back(i + w);
  }
  costs.p2p = pipeline_p2p_time(model, spec, comm);
  return costs;
}

double pipeline_p2p_time(const ModelSpec& model, const ParallelSpec& spec, const CommModel& comm) {
  if (spec.pp <= 1) return 0.0;
  const bool same_node = parallel_groups(spec, comm.hardware()).pp_neighbours_share_node;
  return comm.p2p_time(boundary_bytes(model, spec), same_node);
}

std::int64_t boundary_bytes(const ModelSpec& model, const ParallelSpec& spec) {
  const std::int64_t tokens = spec.microbatch_size * spec.sequence_length(model) / spec.cp;
  const std::int64_t split = spec.sp() || spec.p2p_scatter_gather() ? spec.tp : 1;
  const std::int64_t elements = tokens * model.hidden / split;
  return static_cast<std::int64_t>(static_cast<double>(elements) * element_bytes(model.dtype));
}

std::vector<OpCost> optimizer_step_ops(const ModelSpec& model, const ParallelSpec& spec,
                                       StatePolicy policy, std::int64_t pipeline_rank) {
  const RankParameters parameters = rank_parameters(model, spec, pipeline_rank);
  const bool sharded = state_layout(policy, model.dtype).sharding != Sharding::kNone;
  const std::int64_t dense_shards = sharded ? spec.dp * spec.cp : 1;
  const std::int64_t expert_shards =
      sharded ? std::max<std::int64_t>(1, spec.dp * spec.cp / spec.ep) : 1;
  const std::int64_t stepped = parameters.dense / dense_shards + parameters.expert / expert_shards;
  return optimizer_ops(stepped, model.dtype);
}

PhaseCost optimizer_step_cost(const ModelSpec& model, const ParallelSpec& spec, StatePolicy policy,
                              std::int64_t pipeline_rank, const ComputeModel& compute) {
  return compute.cost(optimizer_step_ops(model, spec, policy, pipeline_rank));
}

}  // namespace metron::models
