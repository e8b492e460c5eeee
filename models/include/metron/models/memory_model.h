#pragma once
// The memory model: model state (weights, gradients, optimizer) per rank under each way of
// sharding it over data-parallel ranks, and activation bytes per microbatch per layer.
//
// Note [model state bytes]: per parameter, with p the weight bytes, g the gradient bytes, d the
// ranks the state is sharded over, Adam's two fp32 moments (8 B) and an fp32 main copy of
// low-precision weights (4 B):
//
//   weights    p          (p/d when parameters are sharded: ZeRO-3, FSDP)
//   gradients  g          (g/d when gradients are sharded: ZeRO-2/3, FSDP)
//   optimizer  [4 if p < 4] + 8 + [4 if fp32_grad_copy]   (/d from the distributed optimizer or
//                                                          ZeRO-1 on)
//
//   policy             weights  grads        fp32 grad copy  sharded      bf16 total
//   ddp                model    model dtype  no              nothing      16
//   megatron-ddp       model    fp32         fp16 grads only nothing      18
//   megatron-distopt   model    fp32         fp16 grads only optimizer    6 + 12/d
//   fairscale-sdp      model    model dtype  no              optimizer    4 + 12/d
//   zero1              model    model dtype  no              optimizer    4 + 12/d
//   zero2              model    model dtype  no              + gradients  2 + 14/d
//   zero3 / fsdp1/2    model    model dtype  no              + weights    16/d
//
// The Megatron rows reproduce the table of Megatron's distributed-optimizer documentation
// (docs/SYNC_POLICIES.md §3.10: fp16/fp16 20 B and 4 + 16/d; bf16/fp32 18 B and 6 + 12/d; fp32/fp32
// 16 B and 8 + 8/d); the ZeRO rows are the ZeRO paper's K = 12 accounting (2 + 2 + 12 = 16 B).
// megatron-ddp and megatron-distopt accumulate gradients in fp32 (Megatron does so for bf16 by
// default); with fp16 weights they keep fp16 gradients plus an fp32 copy in the optimizer.
// fairscale-sdp is OSS + ShardedDataParallel (docs/SYNC_POLICIES.md §4): OSS shards the optimizer
// state, while ShardedDDP's owners keep full-size gradients until the backward's reduces finish
// and every rank keeps its bucketed ones, so its peak is zero1's. FSDP1 (FlatParameter) and FSDP2
// (per-parameter DTensor) with FULL_SHARD / reshard_after_forward shard all three like ZeRO-3;
// the unsharded units they gather transiently are the sync pass's buffers, not state.
// Under FP8 training (parallel.fp8, Note [fp8 training] in compute_cost.h) a rank also keeps
// Transformer Engine's FP8 copies of its linear GEMM weights, row- and column-wise: 2 B more per
// such weight, counted with the weights (not under the policies that shard weights, whose
// gathered layers are cast and dropped one by one).
//
// Note [activation bytes]: per layer and microbatch, Korthikanti et al. 2022 (§4), generalised
// from their inventory to GQA, any ffn width, SwiGLU and MoE; activations in the model's dtype
// and dropout masks at 1 byte. For a "gelu" model with ffn = 4h and bf16 it is exactly
//   no parallelism                 sbh·(34 + 5as/h)
//   tensor parallel t              sbh·(10 + 24/t + 5as/(ht))
//   + sequence parallel            sbh/t·(34 + 5as/h)
//   + selective recompute          sbh·(10 + 24/t),  with sequence parallel 34·sbh/t
//   full recompute                 2sbh (the layer's input), with sequence parallel 2sbh/t
// "swiglu" (Llama) and "squared-relu" (Nemotron) models train without dropout, so they store no
// masks. Under FP8 training the
// linear GEMMs' inputs are kept as Transformer Engine saves them, in FP8 (1 B): for bf16 the QKV,
// projection, up and down inputs (2 + 2 + 2 + 8 of the 34·sbh) halve. Context parallelism
// divides s by cp for every term but the score matrix's key dimension.

#include <cstdint>
#include <optional>
#include <string_view>

#include "metron/models/layer_shape.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// How the data-parallel ranks hold model state (Note [model state bytes]): one per system of
/// docs/SYNC_POLICIES.md, in the order of sync::SyncPolicy, whose memory it describes.
enum class StatePolicy {
  kDdp,
  kMegatronDdp,
  kMegatronDistopt,
  kFairscaleSdp,
  kZero1,
  kZero2,
  kZero3,
  kFsdp1,
  kFsdp2,
};

/// "ddp", "megatron-ddp", "megatron-distopt", "fairscale-sdp", "zero1", "zero2", "zero3",
/// "fsdp1", "fsdp2".
std::string_view to_string(StatePolicy policy) noexcept;
/// The inverse of to_string, plus "fsdp" for kFsdp1: the one FSDP scenarios named before FSDP2
/// had its own policy, still accepted so that they keep loading. nullopt for any other text.
std::optional<StatePolicy> parse_state_policy(std::string_view name) noexcept;

/// What is sharded d ways, each level including the ones before.
enum class Sharding { kNone, kOptimizer, kGradients, kWeights };

/// The precisions and sharding behind a policy.
struct StateLayout {
  Precision weight_dtype = Precision::kBf16;
  Precision grad_dtype = Precision::kBf16;
  bool fp32_grad_copy = false;  ///< the optimizer keeps fp32 copies of low-precision grads
  Sharding sharding = Sharding::kNone;

  friend bool operator==(const StateLayout&, const StateLayout&) = default;
};

/// The layout of `policy` for a model held in `model_dtype` (the table of Note [model state
/// bytes]).
StateLayout state_layout(StatePolicy policy, Precision model_dtype);

/// Bytes of state per parameter, or per rank (the same three parts).
struct StateBytes {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  [[nodiscard]] double total() const { return weights + gradients + optimizer; }
};

/// Per parameter, sharded over `shards` ranks.
StateBytes bytes_per_parameter(const StateLayout& layout, std::int64_t shards);

/// The parameters one pipeline rank holds (all its chunks), per tensor-parallel rank.
struct RankParameters {
  std::int64_t dense = 0;   ///< sharded over dp·cp by the policies that shard
  std::int64_t expert = 0;  ///< MoE expert weights: sharded over dp·cp / ep
  [[nodiscard]] std::int64_t total() const { return dense + expert; }
};

/// Parameters of pipeline rank `pipeline_rank` (0 ≤ it < pp): its layers/pp layers with their
/// attention and MLP matrices and column-parallel biases split over tp (the row-parallel output
/// biases, the norms and the router replicated, as Megatron's Column/RowParallelLinear hold them)
/// and experts over ep; the first rank adds the embeddings, the last the final norm and LM head
/// (and, with tied embeddings and pp > 1, its own copy of the word embeddings, as Megatron keeps
/// one). The embeddings sit on rank 0 and the head on rank pp − 1 whatever the schedule (V
/// schedules, which end on rank 0, are not special-cased yet). Throws InvalidConfig when layers
/// are not divisible by pp, pipeline_rank is out of range, or tp / ep do not divide the sizes.
RankParameters rank_parameters(const ModelSpec& model, const ParallelSpec& spec,
                               std::int64_t pipeline_rank);

/// Weight, gradient and optimizer bytes on one GPU of pipeline rank `pipeline_rank`.
StateBytes state_memory(const ModelSpec& model, const ParallelSpec& spec, StatePolicy policy,
                        std::int64_t pipeline_rank);

/// Activation bytes one layer stores for one microbatch until its backward (Note [activation
/// bytes]).
double layer_activation_bytes(const ModelSpec& model, const LayerShape& shape, Recompute recompute);

/// The first stage's extra stored bytes per microbatch: the embedding dropout mask (Korthikanti
/// §4.3: sbh, /t with sequence parallelism; none for "swiglu" models).
double embedding_activation_bytes(const ModelSpec& model, const LayerShape& shape);

/// The last stage's extra stored bytes per microbatch (Korthikanti §4.3): the final norm's and
/// LM head's inputs, 2sbh each (/t with sequence parallelism), and fp32 logits for the loss,
/// 4sbv/t.
double head_activation_bytes(const ModelSpec& model, const LayerShape& shape);

}  // namespace metron::models
