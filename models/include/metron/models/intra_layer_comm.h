#pragma once
// The collectives inside one transformer layer for one microbatch: tensor (and sequence),
// context and expert parallelism, per compute phase, as Megatron issues them. The planner turns
// them into lowering::IntraLayerComm. Note [layer collectives]:
//
//   A = b·(s/cp)·h·e: one rank's activation tensor (e the dtype's bytes). Bytes are per collective
//   in the nccl-tests convention of comm_cost.h (all-reduce S in and out, all-gather S output,
//   reduce-scatter S input, all-to-all S sent).
//
//   tp > 1, no sequence parallelism (Shoeybi et al. 2019, the f and g operators):
//     forward          2 all-reduce A     g after the attention projection and after fc2
//     backward (B)     2 all-reduce A     f's backward, before QKV and fc1
//     backward-input   2 all-reduce A     (ZB's I: the same, they reduce activation gradients)
//     backward-weight  none
//   tp > 1 with sequence parallelism (Korthikanti et al. 2022, §4.2.2):
//     forward          2 all-gather A (before QKV and fc1) + 2 reduce-scatter A (after the
//                      projection and fc2)
//     backward (B)     2 all-gather A of the output gradients (the reduce-scatters' backward)
//                      + 2 all-gather A re-gathering the layer inputs for the weight gradients
//                        (Megatron saves the sharded input, not the gathered one)
//                      + 2 reduce-scatter A (the all-gathers' backward)
//     backward-input   the 2 gradient all-gathers + the 2 reduce-scatters
//     backward-weight  the 2 input re-gathers
//   All tensor-parallel entries are blocking (overlapped = false): the next kernel needs their
//   result. Megatron's backward hides part of them (the re-gather under the input-gradient GEMM,
//   the gradient all-reduce / reduce-scatter under the weight-gradient GEMM), which this plan
//   leaves out: an upper bound on exposed time.
//   tp_comm_overlap (Megatron's --tp-comm-overlap, sequence parallelism only): Transformer
//   Engine splits each all-gather and reduce-scatter into tp ring steps and runs the GEMM on
//   each chunk as it arrives (all-gather) or before sending it on (reduce-scatter), and overlaps
//   the weight gradients' re-gather with the input-gradient GEMM in bulk. Every step but one
//   then runs under a GEMM chunk: the first chunk of an all-gather+GEMM is the rank's own, and
//   the last step of a GEMM+reduce-scatter has no GEMM left to hide under (Wang et al.,
//   ASPLOS'23, "Overlap Communication with Dependent Computation via Decomposition"). So each
//   tensor-parallel entry becomes an overlapped collective of (tp−1)/tp of its bytes and a
//   blocking one of 1/tp (bytes rounded down, the remainder to the blocking part). ByteDance's
//   Flux measures 86-88 % of the NCCL time of a tp 8 MLP hidden this way (1/8 = 12.5 % exposed).
//
//   cp > 1: the ring attention of Megatron-core / Transformer Engine (AttnFuncWithCPAndKVP2P)
//   passes each rank's K and V block round the ring in cp − 1 steps, each under the previous
//   block's attention; the backward passes K and V round again and dK, dV back. Modelled as the
//   equivalent collective volume, KV = 2·b·s·(kv_heads/tp)·head_dim·e (the full sequence's keys
//   and values, the all-gather's output):
//     forward          1 all-gather KV                              overlapped
//     backward (B)     1 all-gather KV + 1 reduce-scatter KV (dKV)  overlapped
//     backward-input   the same (attention has no weights: its whole backward is I)
//     backward-weight  none
//
//   MoE with ep > 1 (Megatron's all-to-all token dispatcher): each token goes to top_k experts,
//   T = b·(s/cp)·h·top_k·e (/tp under sequence parallelism: each tensor-parallel rank dispatches
//   its own sequence slice); blocking:
//     forward          2 all-to-all T (dispatch and combine)
//     backward (B)     2 all-to-all T; backward-input the same; backward-weight none
//
//   recompute (the work ParallelSpec::recompute re-runs before a backward):
//     none             nothing
//     selective        the attention core only: no tensor or expert collectives, but with
//                      cp > 1 the ring runs again (1 all-gather KV, overlapped)
//     full             the forward's list again
//
//   No entries at all when tp = cp = 1 and ep = 1.

#include <cstdint>
#include <string_view>
#include <vector>

#include "metron/models/cost_kinds.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// One kind of collective a layer issues in one phase.
struct LayerComm {
  /// The parallel group it runs over.
  enum class Dim { kTensor, kContext, kExpert };

  CommOp op = CommOp::kAllReduce;
  Dim dim = Dim::kTensor;
  std::int64_t bytes = 0;      ///< one collective (Note [layer collectives])
  std::int32_t per_layer = 1;  ///< collectives of this kind per layer and microbatch
  bool overlapped = false;     ///< runs under the layer's compute (CP's ring) instead of after it

  friend bool operator==(const LayerComm&, const LayerComm&) = default;
};

/// "tensor", "context", "expert".
std::string_view to_string(LayerComm::Dim dim) noexcept;

/// A layer's collectives per phase (ComputePhase's five).
struct LayerCommPlan {
  std::vector<LayerComm> forward;
  std::vector<LayerComm> backward;         ///< B = I + W
  std::vector<LayerComm> backward_input;   ///< I
  std::vector<LayerComm> backward_weight;  ///< W
  std::vector<LayerComm> recompute;        ///< what spec.recompute re-runs

  /// The list of `phase`.
  [[nodiscard]] const std::vector<LayerComm>& of(ComputePhase phase) const;

  friend bool operator==(const LayerCommPlan&, const LayerCommPlan&) = default;
};

/// One layer's collectives for one microbatch under `spec` (Note [layer collectives]). Throws
/// InvalidConfig for non-positive sizes, kv_heads not divisible by tp, a sequence not divisible
/// by cp (by cp·tp under sequence parallelism), or ep > 1 on a dense model.
/// @code
///   // GPT-3 175B at tp 8 with SP: 2 all-gathers and 2 reduce-scatters of 1·2048·12288·2 B.
///   LayerCommPlan plan = layer_comm(model_preset("gpt3-175b"),
///                                   ParallelSpec{.tp = 8, .sequence_parallel = true});
/// @endcode
LayerCommPlan layer_comm(const ModelSpec& model, const ParallelSpec& spec);

}  // namespace metron::models
