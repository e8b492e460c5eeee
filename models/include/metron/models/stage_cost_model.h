#pragma once
// Per-stage times of a whole configuration, from the compute and communication models: what the
// simulator needs when a scenario names a model instead of giving explicit times.
// Note [stage costs from the model]:
//
//   The pp·vp stages hold layers / (pp·vp) layers each, or their rank's share under uneven
//   stages (model_stage_layers, Note [uneven stages]). Per microbatch, on one GPU:
//     F  = layers · layer F            + embedding F (first stage) + head F (last stage)
//     I  = layers · (layer I + recompute)                          + head I (last stage)
//     W  = layers · layer W            + embedding W (first stage) + head W (last stage)
//     B  = I + W
//   (recompute runs just before the backward of the same layer, so it is charged to I).
//   p2p = the communication model's time for one boundary tensor, b · s/cp · h elements of the
//   model's dtype (/tp under sequence parallelism or the pipeline scatter/gather, whose
//   all-gather is a task of its own: lowering/intra_layer.h), inside a node when the pipeline
//   neighbours share one (group_placement.h), else across. Not yet included: the tensor-, context-
//   and expert-parallel collectives inside a layer (they come with the intra-layer lowering), so tp
//   > 1 times are compute only.

#include <cstdint>
#include <span>
#include <vector>

#include "metron/models/comm_cost.h"
#include "metron/models/compute_cost.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"
#include "metron/models/stage_costs.h"

namespace metron::models {

/// The transformer layers of each of the pp·vp model stages: its pipeline rank's layers
/// (pipeline_rank_layers, Note [uneven stages]) over vp. `stage_ranks` gives each stage's rank
/// (pipeline::stage_ranks; V schedules place stage pp on rank pp−1); empty: Megatron's
/// interleaved placement, stage s on rank s mod pp. Under account_for_* each stage's own count
/// (virtual_stage_layers), for the looped placement only. Throws InvalidConfig when the layers
/// do not split, stage_ranks is neither empty nor pp·vp ranks below pp, or an accounted split
/// meets another placement.
std::vector<std::int64_t> model_stage_layers(const ModelSpec& model, const ParallelSpec& spec,
                                             std::span<const std::int32_t> stage_ranks = {});

/// The p2p of Note [stage costs from the model]: one boundary tensor between pipeline
/// neighbours, placed by the whole configuration (dp included); 0 without a pipeline.
double pipeline_p2p_time(const ModelSpec& model, const ParallelSpec& spec, const CommModel& comm);

/// The stage costs of Note [stage costs from the model], stage s holding model_stage_layers(s)
/// layers. Throws InvalidConfig as model_stage_layers does.
StageCosts model_stage_costs(const ModelSpec& model, const ParallelSpec& spec,
                             const ComputeModel& compute, const CommModel& comm,
                             std::span<const std::int32_t> stage_ranks = {});

/// Bytes of the tensor one pipeline stage sends the next per microbatch, per GPU: its share of
/// the boundary tensor under sequence parallelism or the pipeline scatter/gather.
std::int64_t boundary_bytes(const ModelSpec& model, const ParallelSpec& spec);

/// The ops of one Adam step on a GPU of pipeline rank `pipeline_rank`: over its parameters, or
/// over its shard of them when `policy` shards the optimizer state (dense over dp·cp, experts over
/// dp·cp / ep).
std::vector<OpCost> optimizer_step_ops(const ModelSpec& model, const ParallelSpec& spec,
                                       StatePolicy policy, std::int64_t pipeline_rank);

/// The cost of optimizer_step_ops.
PhaseCost optimizer_step_cost(const ModelSpec& model, const ParallelSpec& spec, StatePolicy policy,
                              std::int64_t pipeline_rank, const ComputeModel& compute);

}  // namespace metron::models
