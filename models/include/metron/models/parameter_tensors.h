#pragma once
// The parameter tensors one tensor-parallel rank holds for a model chunk, one by one, in module
// registration order: what a data-parallel wrapper sees and buckets (docs/SYNC_POLICIES.md §3.2,
// §5, §6). The planner converts them field for field into sync::ParamTensor. Note [parameter
// tensors]:
//
//   embedding (embedding = true)
//     embedding.word               ⌈V/t⌉·h                vocab-parallel
//     embedding.position           s·h                    "gelu" only (learned), replicated
//   per layer i ("layers.i." prefix)
//     input_norm.weight / .bias    h / h                  bias for LayerNorms (not "swiglu")
//     attention.qkv.weight / .bias h·(h + 2·kv·dh)/t / (h + 2·kv·dh)/t   column-parallel
//     attention.proj.weight / .bias h·h/t / h             row-parallel: bias whole
//     post_attention_norm.weight / .bias   h / h
//     dense MLP:
//       mlp.fc1.weight / .bias     h·f/t / f/t ("gelu"); 2·h·f/t ("swiglu": gate and up fused as
//                                  Megatron's linear_fc1 of 2·f)
//       mlp.fc2.weight / .bias     f·h/t / h              row-parallel
//     MoE: mlp.router.weight h·E (replicated), then for each of the E/ep local experts j
//       mlp.experts.j.fc1.weight …, mlp.experts.j.fc2.weight … at the expert width, split as the
//       dense MLP and flagged `expert`
//   head (head = true)
//     final_norm.weight / .bias    h / h
//     output.weight                ⌈V/t⌉·h; with tied embeddings only as the copy below
//
//   Linear layers have biases in "gelu" models only (parameter_count.h). The numbers follow
//   rank_parameters (memory_model.h), so a pipeline rank's tensors add up to its RankParameters.
//   The order is Megatron's legacy ParallelTransformerLayer's (norm, QKV, projection, norm, MLP up,
//   MLP down). Megatron-core registers linear_proj before linear_qkv and, with Transformer Engine,
//   fuses each norm into the linear layer after it; that reorders tensors within a layer only, so
//   bucket boundaries move by at most a layer's tensors.
//
//   Tied embeddings: a chunk holding the head but not the embedding keeps its own copy of the
//   word embeddings as output.weight, and Megatron all-reduces the two copies' gradients between
//   the first and last pipeline stages. Both copies carry `shared_embedding` (Megatron's
//   attribute, which gives each a bucket of its own). A chunk holding both ends has a single
//   tensor, which Megatron (pp = 1) does not mark shared, and no output.weight.
//
//   `layer`: the embedding counts as the chunk's first layer, the final norm and head as its last
//   (the first layer again for a chunk without layers); both are `outside_layers`.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// One parameter tensor, as one tensor-parallel rank holds it (sync::ParamTensor's fields).
struct ParameterTensor {
  std::string name;               ///< "layers.3.attention.qkv.weight"
  std::int32_t layer = 0;         ///< the global layer whose forward reads it
  std::int64_t numel = 0;         ///< elements on this rank
  bool expert = false;            ///< an MoE expert weight (reduced over expert data parallelism)
  bool shared_embedding = false;  ///< a tied word-embedding copy (Note [parameter tensors])
  bool outside_layers = false;    ///< embeddings, final norm, LM head

  friend bool operator==(const ParameterTensor&, const ParameterTensor&) = default;
};

/// The tensors of a chunk holding layers [first_layer, last_layer), plus the embeddings when
/// `embedding` and the final norm and LM head when `head`, in registration order (Note
/// [parameter tensors]). Throws InvalidConfig when the range is not within [0, layers], or tp or
/// ep do not divide the heads, KV heads, MLP width or experts.
/// @code
///   // Pipeline rank 0 of GPT-3 175B at tp 8, pp 16: the embeddings and layers 0-5.
///   std::vector<ParameterTensor> tensors = parameter_tensors(
///       model_preset("gpt3-175b"), ParallelSpec{.tp = 8, .pp = 16}, 0, 6, true, false);
/// @endcode
std::vector<ParameterTensor> parameter_tensors(const ModelSpec& model, const ParallelSpec& spec,
                                               std::int64_t first_layer, std::int64_t last_layer,
                                               bool embedding, bool head);

}  // namespace metron::models
