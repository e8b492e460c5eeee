// The memory model: model state per rank (Note [model state bytes]) and stored activations
// (Note [activation bytes]), both in memory_model.h.

#include "metron/models/memory_model.h"

#include <string>
#include <string_view>
#include <vector>

#include "metron/models/parameter_count.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

constexpr detail::EnumNames<StatePolicy, 9> kStatePolicyNames{
    {{StatePolicy::kDdp, "ddp"},
     {StatePolicy::kMegatronDdp, "megatron-ddp"},
     {StatePolicy::kMegatronDistopt, "megatron-distopt"},
     {StatePolicy::kFairscaleSdp, "fairscale-sdp"},
     {StatePolicy::kZero1, "zero1"},
     {StatePolicy::kZero2, "zero2"},
     {StatePolicy::kZero3, "zero3"},
     {StatePolicy::kFsdp1, "fsdp1"},
     {StatePolicy::kFsdp2, "fsdp2"}}};

// The name FSDP1 had while it was metron's only FSDP policy (parse_state_policy).
constexpr std::string_view kFsdp1Alias = "fsdp";

// Adam keeps two fp32 moments per parameter (ZeRO paper §3.1: K = 12 = fp32 master copy 4 + 8).
constexpr double kAdamMomentBytes = 8;
// fp32 master weights and fp32 gradient copies (Note [model state bytes]).
constexpr double kFp32Bytes = 4;
// Korthikanti et al. 2022 §4.1: a dropout mask takes one byte per element.
constexpr double kMaskBytes = 1;
// Korthikanti et al. 2022 §4.3: the cross-entropy loss keeps the logits in fp32.
constexpr double kLogitBytes = 4;

// Transformer Engine keeps each FP8-cast weight row- and column-wise, one byte each.
constexpr double kFp8CopyBytes = 2;

// A linear GEMM's input as its backward keeps it: in FP8 (one byte) under FP8 training, as
// Transformer Engine saves the cast it made, else in the model's dtype.
double gemm_input_bytes(const ModelSpec& model, const LayerShape& shape) {
  return shape.fp8 == Fp8Recipe::kOff ? element_bytes(model.dtype) : 1.0;
}

// Which biases stay whole on every tensor-parallel rank. Megatron's ColumnParallelLinear
// (QKV, mlp-up) splits its output features and so its bias; RowParallelLinear (attention-out,
// mlp-down) splits its input features and adds one full bias after the all-reduce. "gelu"
// models have one such bias (h wide) per attention block and per MLP; the others none.
std::int64_t row_parallel_bias(const ModelSpec& model) {
  return has_linear_biases(model) ? model.hidden : 0;
}

// The weights of one layer's linear GEMMs on one tensor- and expert-parallel rank, which FP8
// training casts (Note [fp8 training] in compute_cost.h): no biases, norms or router.
std::int64_t linear_weights(const ModelSpec& model, std::int64_t tp, std::int64_t ep) {
  const std::int64_t attention = attention_weight_count(model) / tp;
  if (!model.moe) return attention + mlp_weight_count(model, model.ffn_size()) / tp;
  return attention +
         model.moe->experts / ep * (mlp_weight_count(model, model.moe->ffn_hidden) / tp);
}

// One layer's parameters on one tensor-parallel and expert-parallel rank.
RankParameters layer_parameters(const ModelSpec& model, std::int64_t tp, std::int64_t ep) {
  const std::int64_t bias = row_parallel_bias(model);
  const std::int64_t attention = attention_parameter_count(model);
  const std::int64_t mlp = mlp_parameter_count(model);
  // What is left of a layer is its two norms, replicated (with SP each rank still holds them).
  const std::int64_t norms = layer_parameter_count(model) - attention - mlp;
  RankParameters out{.dense = (attention - bias) / tp + bias + norms};
  if (!model.moe) {
    out.dense += (mlp - bias) / tp + bias;
    return out;
  }
  // The router is an ordinary replicated linear layer; each rank holds experts/ep experts, each
  // split over tp like a dense MLP.
  const std::int64_t router = model.hidden * model.moe->experts;
  const std::int64_t expert = (mlp - router) / model.moe->experts;
  out.dense += router;
  out.expert = model.moe->experts / ep * ((expert - bias) / tp + bias);
  return out;
}

void check_rank_split(const ModelSpec& model, const ParallelSpec& spec,
                      std::int64_t pipeline_rank) {
  std::vector<std::string> problems;
  detail::check_positive(problems, "tp", spec.tp);
  detail::check_positive(problems, "pp", spec.pp);
  detail::check_positive(problems, "ep", spec.ep);
  // An uneven split is checked by pipeline_rank_layers (layers_on_rank).
  if (!spec.uneven_split()) {
    detail::check_divisible(problems, "layers", model.layers, "pp", spec.pp);
  }
  detail::check_divisible(problems, "heads", model.heads, "tp", spec.tp);
  detail::check_divisible(problems, "kv_heads", model.num_kv_heads(), "tp", spec.tp);
  if (model.moe) {
    detail::check_divisible(problems, "moe.ffn_hidden", model.moe->ffn_hidden, "tp", spec.tp);
    detail::check_divisible(problems, "moe.experts", model.moe->experts, "ep", spec.ep);
  } else {
    detail::check_divisible(problems, "ffn_hidden", model.ffn_size(), "tp", spec.tp);
  }
  if (spec.pp > 0 && (pipeline_rank < 0 || pipeline_rank >= spec.pp)) {
    problems.push_back("pipeline_rank: expected 0 <= pipeline_rank < pp (" +
                       std::to_string(spec.pp) + "), got " + std::to_string(pipeline_rank));
  }
  detail::throw_if_problems("parameters of model \"" + model.name + "\"", problems);
}

// The transformer layers `pipeline_rank` holds (Note [uneven stages] in parallel_spec.h).
std::int64_t layers_on_rank(const ModelSpec& model, const ParallelSpec& spec,
                            std::int64_t pipeline_rank) {
  if (!spec.uneven_split()) return model.layers / spec.pp;
  return pipeline_rank_layers(model, spec)[static_cast<std::size_t>(pipeline_rank)];
}

void check_shape(const LayerShape& shape) {
  std::vector<std::string> problems;
  detail::check_positive(problems, "batch", shape.batch);
  detail::check_positive(problems, "seq", shape.seq);
  detail::check_positive(problems, "tp", shape.tp);
  detail::check_positive(problems, "cp", shape.cp);
  detail::throw_if_problems("layer shape", problems);
}

// b·s/cp as a real number, so a sequence that cp does not divide is not rounded away.
double local_tokens(const LayerShape& shape) {
  return static_cast<double>(shape.batch) * static_cast<double>(shape.seq) /
         static_cast<double>(shape.cp);
}

// What tensor parallelism does to a stored tensor (Korthikanti §4.2): without sequence
// parallelism the norms, dropouts and the inputs of the column-parallel GEMMs are replicated.
double sp_divisor(const LayerShape& shape) {
  return shape.sequence_parallel ? static_cast<double>(shape.tp) : 1.0;
}

// One layer's stored tensors (Korthikanti §4.1), grouped by how tensor parallelism splits them.
struct ActivationTerms {
  double replicated = 0;  ///< split by t only under sequence parallelism
  double split = 0;       ///< always split by t (heads, ffn columns)
  double scores = 0;      ///< score-sized, split by t; recomputed under selective recompute
};

void add_attention(const ModelSpec& model, const LayerShape& shape, ActivationTerms& terms) {
  const double e = element_bytes(model.dtype);
  const double n = local_tokens(shape);
  const auto h = static_cast<double>(model.hidden);
  const auto kv_width = static_cast<double>(model.num_kv_heads() * model.head_dim());
  terms.replicated += e * n * h;                               // LayerNorm input
  terms.replicated += gemm_input_bytes(model, shape) * n * h;  // QKV GEMM input
  terms.split += e * n * (h + 2 * kv_width);  // Q (h wide), K and V (kv·dh wide each)
  if (shape.fused_attention) {
    // A flash-style kernel keeps no score-sized tensor: its backward recomputes the scores from
    // Q, K, V, its output and the softmax statistics (one fp32 log-sum-exp per query and head;
    // the attention dropout is regenerated from the RNG state, not stored as a mask).
    terms.split += kFp32Bytes * n * static_cast<double>(model.heads);
  } else {
    // b·a·(s/cp)·s: each rank's queries against the whole sequence's keys.
    const double score = n * static_cast<double>(model.heads) * static_cast<double>(shape.seq);
    terms.scores += e * score;  // softmax output
    if (has_dropout(model)) {
      // Without attention dropout the softmax output is itself the input of ·V, stored once.
      terms.scores += kMaskBytes * score + e * score;  // dropout mask and dropout output
    }
  }
  if (has_dropout(model)) terms.replicated += kMaskBytes * n * h;  // mask after the projection
  terms.split += gemm_input_bytes(model, shape) * n * h;           // output projection input
}

// The MLP's stored tensors for `copies` passes of every token through an MLP `ffn` wide.
void add_mlp_body(const ModelSpec& model, const LayerShape& shape, double copies, double ffn,
                  ActivationTerms& terms) {
  const double e = element_bytes(model.dtype);
  const double n = local_tokens(shape);
  const double input = gemm_input_bytes(model, shape);
  terms.replicated += copies * input * n * static_cast<double>(model.hidden);  // up GEMM input
  // gelu, squared-relu: the activation's input and the down GEMM's input; swiglu: gate and up
  // outputs and their product (the down GEMM's input).
  const double elementwise_inputs = model.mlp == MlpKind::kSwiglu ? 2 : 1;
  terms.split += copies * (elementwise_inputs * e + input) * n * ffn;
}

void add_mlp(const ModelSpec& model, const LayerShape& shape, ActivationTerms& terms) {
  const double e = element_bytes(model.dtype);
  const double n = local_tokens(shape);
  const auto h = static_cast<double>(model.hidden);
  terms.replicated += e * n * h;  // LayerNorm input
  if (model.moe) {
    // Each token visits top_k experts, and balanced over ep ranks each rank sees top_k copies
    // of its tokens; the router reads the norm's output once. The dropout follows the combine of
    // the experts' outputs, so its mask is h wide per token, not per copy.
    terms.replicated += e * n * h;  // router input
    add_mlp_body(model, shape, static_cast<double>(model.moe->top_k),
                 static_cast<double>(model.moe->ffn_hidden), terms);
  } else {
    add_mlp_body(model, shape, 1, static_cast<double>(model.ffn_size()), terms);
  }
  if (has_dropout(model)) terms.replicated += kMaskBytes * n * h;  // dropout mask
}

}  // namespace

std::string_view to_string(StatePolicy policy) noexcept {
  return detail::name_of(kStatePolicyNames, policy);
}

std::optional<StatePolicy> parse_state_policy(std::string_view name) noexcept {
  if (name == kFsdp1Alias) return StatePolicy::kFsdp1;
  return detail::parse_name(kStatePolicyNames, name);
}

StateLayout state_layout(StatePolicy policy, Precision model_dtype) {
  StateLayout layout{.weight_dtype = model_dtype, .grad_dtype = model_dtype};
  switch (policy) {
    case StatePolicy::kDdp:
      break;
    case StatePolicy::kMegatronDdp:
    case StatePolicy::kMegatronDistopt:
      // Megatron accumulates gradients in fp32 (--accumulate-allreduce-grads-in-fp32, the bf16
      // default); fp16 keeps fp16 gradients and the optimizer an fp32 copy of them.
      if (model_dtype == Precision::kFp16) {
        layout.fp32_grad_copy = true;
      } else {
        layout.grad_dtype = Precision::kFp32;
      }
      if (policy == StatePolicy::kMegatronDistopt) layout.sharding = Sharding::kOptimizer;
      break;
    case StatePolicy::kFairscaleSdp:  // OSS shards the optimizer; gradients stay full size
    case StatePolicy::kZero1:
      layout.sharding = Sharding::kOptimizer;
      break;
    case StatePolicy::kZero2:
      layout.sharding = Sharding::kGradients;
      break;
    case StatePolicy::kZero3:
    case StatePolicy::kFsdp1:
    case StatePolicy::kFsdp2:
      layout.sharding = Sharding::kWeights;
      break;
  }
  return layout;
}

StateBytes bytes_per_parameter(const StateLayout& layout, std::int64_t shards) {
  std::vector<std::string> problems;
  detail::check_positive(problems, "shards", shards);
  detail::throw_if_problems("bytes_per_parameter", problems);
  const auto d = static_cast<double>(shards);
  const auto over = [&](Sharding level) { return layout.sharding >= level ? d : 1.0; };
  const double p = element_bytes(layout.weight_dtype);
  const double master = p < kFp32Bytes ? kFp32Bytes : 0;
  const double grad_copy = layout.fp32_grad_copy ? kFp32Bytes : 0;
  return {.weights = p / over(Sharding::kWeights),
          .gradients = element_bytes(layout.grad_dtype) / over(Sharding::kGradients),
          .optimizer = (master + kAdamMomentBytes + grad_copy) / over(Sharding::kOptimizer)};
}

RankParameters rank_parameters(const ModelSpec& model, const ParallelSpec& spec,
                               std::int64_t pipeline_rank) {
  validate(model);
  check_rank_split(model, spec, pipeline_rank);
  const RankParameters layer = layer_parameters(model, spec.tp, spec.ep);
  const std::int64_t layers = layers_on_rank(model, spec, pipeline_rank);
  RankParameters out{.dense = layers * layer.dense, .expert = layers * layer.expert};
  // Word embeddings and the LM head are vocab-parallel over the padded vocabulary.
  const std::int64_t word = model.vocab * model.hidden;
  const std::int64_t word_per_rank = model.vocab_per_rank(spec.tp) * model.hidden;
  if (pipeline_rank == 0) {
    // Learned positions (gelu models) are replicated.
    out.dense += word_per_rank + (embedding_parameter_count(model) - word);
  }
  if (pipeline_rank == spec.pp - 1) {
    const std::int64_t lm_head = model.tied_embeddings ? 0 : word;
    out.dense += head_parameter_count(model) - lm_head;  // the final norm, replicated
    // Tied embeddings on one rank share the word embeddings; across ranks Megatron keeps a copy
    // on the last one and all-reduces their gradients.
    if (!model.tied_embeddings || spec.pp > 1) out.dense += word_per_rank;
  }
  return out;
}

StateBytes state_memory(const ModelSpec& model, const ParallelSpec& spec, StatePolicy policy,
                        std::int64_t pipeline_rank) {
  const RankParameters params = rank_parameters(model, spec, pipeline_rank);
  std::vector<std::string> problems;
  detail::check_positive(problems, "dp", spec.dp);
  detail::check_positive(problems, "cp", spec.cp);
  detail::check_divisible(problems, "dp·cp", spec.dp * spec.cp, "ep", spec.ep);
  detail::throw_if_problems("state memory of model \"" + model.name + "\"", problems);
  const StateLayout layout = state_layout(policy, model.dtype);
  const std::int64_t replicas = spec.dp * spec.cp;
  const StateBytes dense = bytes_per_parameter(layout, replicas);
  const StateBytes expert = bytes_per_parameter(layout, replicas / spec.ep);
  const auto n_dense = static_cast<double>(params.dense);
  const auto n_expert = static_cast<double>(params.expert);
  StateBytes out{.weights = n_dense * dense.weights + n_expert * expert.weights,
                 .gradients = n_dense * dense.gradients + n_expert * expert.gradients,
                 .optimizer = n_dense * dense.optimizer + n_expert * expert.optimizer};
  if (spec.fp8 != Fp8Recipe::kOff && layout.sharding < Sharding::kWeights) {
    const auto layers = static_cast<double>(layers_on_rank(model, spec, pipeline_rank));
    out.weights +=
        kFp8CopyBytes * layers * static_cast<double>(linear_weights(model, spec.tp, spec.ep));
  }
  return out;
}

double layer_activation_bytes(const ModelSpec& model, const LayerShape& shape,
                              Recompute recompute) {
  check_shape(shape);
  if (recompute == Recompute::kFull) {
    // Only the layer's input survives; the forward is replayed from it.
    return element_bytes(model.dtype) * local_tokens(shape) * static_cast<double>(model.hidden) /
           sp_divisor(shape);
  }
  ActivationTerms terms;
  add_attention(model, shape, terms);
  add_mlp(model, shape, terms);
  const auto t = static_cast<double>(shape.tp);
  const double scores = recompute == Recompute::kSelective ? 0 : terms.scores / t;
  return terms.replicated / sp_divisor(shape) + terms.split / t + scores;
}

double embedding_activation_bytes(const ModelSpec& model, const LayerShape& shape) {
  check_shape(shape);
  if (!has_dropout(model)) return 0;
  return kMaskBytes * local_tokens(shape) * static_cast<double>(model.hidden) / sp_divisor(shape);
}

double head_activation_bytes(const ModelSpec& model, const LayerShape& shape) {
  check_shape(shape);
  const double n = local_tokens(shape);
  const double inputs =
      2 * element_bytes(model.dtype) * n * static_cast<double>(model.hidden) / sp_divisor(shape);
  const double logits = kLogitBytes * n * static_cast<double>(model.vocab_per_rank(shape.tp));
  return inputs + logits;
}

}  // namespace metron::models
