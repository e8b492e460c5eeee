#pragma once
// What the planner is asked: a model, a machine, a GPU budget, a global batch and a sequence
// length, and the space of parallel configurations to search. Note [plan space]:
//
//   Every configuration uses at most `gpus` GPUs (tp·pp·dp·cp ≤ gpus) and trains exactly
//   `global_batch` samples per iteration (dp·microbatch_size divides it), so tokens/s orders
//   configurations the same way iteration time does. A dimension's allowed values come from its
//   list when the list is not empty (one value fixes the field), else from its default range:
//
//     tp                 1 .. max_tp (default: GPUs per node; the heads decide which divide)
//     cp                 1, and for long sequences every power of two that leaves each rank at
//                        least 8,192 of the sequence's tokens (default_context_parallel_sizes)
//     pp                 1 .. max_pp (default: the layers)
//     vp                 the schedule's chunks per rank: 1 for one-chunk schedules, 2 for V
//                        schedules and DualPipe, 2 .. max_vp for the interleaved schedules
//     dp                 every divisor of global_batch with tp·pp·dp·cp ≤ gpus
//     ep                 1 (dense models); for MoE every divisor of the experts dividing dp·cp
//     microbatch_size    every divisor of global_batch / dp up to max_microbatch_size
//     sequence_parallel  on whenever tp > 1 and tp·cp divides the sequence (Megatron's
//                        recommendation); both when listed
//     recompute          none, selective, full
//     attention          unfused (the scenario's default); fused when listed
//     fp8                off; delayed and current when listed (a GPU with an fp8 peak)
//     tp_comm_overlap    off; on when listed (tp > 1 with sequence parallelism only, as in
//                        Megatron; at tp 1 there is nothing to overlap, so only off)
//     schedules          1f1b, interleaved-1f1b (Megatron's); any of the registry by name
//     group sizes        the interleaved group size as multiples of pp (default: 1·pp)
//     sync policies      megatron-distopt; any of sync::SyncPolicy
//     bucket sizes       the policy's default (in the policy's unit, see SyncOptions)
//     stage layers       even where the layers divide over pp·vp; where they do not, for the
//                        one-chunk and interleaved schedules, Megatron's uneven split with the
//                        first and last ranks lighter (Note [uneven stages]): the heaviest edge
//                        count no larger than the others' (Llama 3 405B's 126 layers on pp 16:
//                        7, 8 × 14, 7); where whole chunks allow no such split, Megatron's
//                        accounted split (the embedding and the loss a layer each:
//                        split_unevenly); V schedules and DualPipe split evenly only
//
//   The three kernel options default to what `simulate` assumes, not to what is fastest: fused
//   attention, FP8 and userbuffers overlap each need software (Transformer Engine, FlashAttention)
//   and, for FP8, a numerics decision that is the user's to make, so they are searched only
//   where the request lists them.
//
//   Each policy runs with the overlap its system recommends (planner_sync_options): Megatron's
//   overlap_grad_reduce (+ overlap_param_gather for the distributed optimizer), ZeRO's
//   overlap_comm, the rest at their defaults. A configuration fits when every rank's peak
//   memory stays within (1 − memory_headroom) of the GPU's capacity.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/models/hardware_spec.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"
#include "metron/sync/sync_policy.h"

namespace metron::plan {

/// The allowed values of each dimension (Note [plan space]); an empty list means the default.
struct PlanSpace {
  std::vector<std::int64_t> tp;
  std::vector<std::int64_t> pp;
  std::vector<std::int64_t> dp;
  std::vector<std::int64_t> vp;
  std::vector<std::int64_t> cp;
  std::vector<std::int64_t> ep;
  std::vector<std::int64_t> microbatch_size;
  std::vector<bool> sequence_parallel;
  std::vector<models::Recompute> recompute;
  std::vector<models::AttentionKernel> attention;
  std::vector<models::Fp8Recipe> fp8;
  std::vector<bool> tp_comm_overlap;
  std::vector<std::string> schedules;
  std::vector<std::int32_t> group_size_multiples;
  std::vector<sync::SyncPolicy> policies;
  std::vector<std::int64_t> bucket_sizes;
  std::int64_t max_tp = 0;                ///< 0: the hardware's GPUs per node
  std::int64_t max_pp = 0;                ///< 0: the model's layers
  std::int64_t max_vp = 8;                ///< interleaved chunks per rank
  std::int64_t max_microbatch_size = 16;  ///< for the default microbatch sizes
  friend bool operator==(const PlanSpace&, const PlanSpace&) = default;
};

struct PlanRequest {
  models::ModelSpec model;
  models::HardwareSpec hardware;
  std::int64_t gpus = 1;
  std::int64_t global_batch = 1;
  std::int64_t seq_len = 0;  ///< 0: the model's
  PlanSpace space;
  double memory_headroom = 0.1;  ///< fraction of HBM kept free (allocator, workspace)
  std::int32_t top_k = 10;
  friend bool operator==(const PlanRequest&, const PlanRequest&) = default;
};

/// The schedules "all" stands for: every family the planner ranks well (Megatron's two, the
/// zero-bubble H1/H2/V and DualPipeV); the others are reachable by name.
inline constexpr std::string_view kAllPlanSchedules =
    "1f1b,interleaved-1f1b,zb-h1,zb-h2,zb-v,dualpipe-v";

/// GPT-3 175B on 1,024 H100 GPUs in DGX H100 nodes, global batch 1,536, sequence 2,048: the
/// scenario of default_scenario() with its configuration left to the planner.
PlanRequest default_plan_request();

/// The knobs a policy runs with in the plan (Note [plan space]).
sync::SyncOptions planner_sync_options(sync::SyncPolicy policy);

/// Throws InvalidConfig for a request that cannot be planned: gpus, global batch, top_k or a
/// listed size below 1, a headroom outside [0, 1), an unknown schedule name, an FP8 recipe on a
/// GPU without an fp8 peak or for a model already in fp8.
void validate(const PlanRequest& request);

}  // namespace metron::plan
