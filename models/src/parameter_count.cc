// Parameter counts by part (Note [parameter count] in parameter_count.h).

#include "metron/models/parameter_count.h"

namespace metron::models {
namespace {

// One MLP of width `ffn`: the dense MLP or a single expert, with the biases of "gelu" models.
std::int64_t one_mlp(const ModelSpec& spec, std::int64_t ffn) {
  const std::int64_t weights = mlp_weight_count(spec, ffn);
  return has_linear_biases(spec) ? weights + ffn + spec.hidden : weights;
}

// LayerNorm has a scale and a bias per channel; RMSNorm only a scale.
std::int64_t one_norm(const ModelSpec& spec) {
  return has_norm_biases(spec) ? 2 * spec.hidden : spec.hidden;
}

}  // namespace

std::int64_t qkv_width(const ModelSpec& spec) {
  return spec.hidden + 2 * spec.num_kv_heads() * spec.head_dim();
}

std::int64_t attention_weight_count(const ModelSpec& spec) {
  return spec.hidden * qkv_width(spec) + spec.hidden * spec.hidden;
}

std::int64_t mlp_weight_count(const ModelSpec& spec, std::int64_t ffn) {
  return (spec.mlp == MlpKind::kSwiglu ? 3 : 2) * spec.hidden * ffn;
}

std::int64_t attention_parameter_count(const ModelSpec& spec) {
  const std::int64_t weights = attention_weight_count(spec);
  return has_linear_biases(spec) ? weights + qkv_width(spec) + spec.hidden : weights;
}

std::int64_t mlp_parameter_count(const ModelSpec& spec) {
  if (!spec.moe) return one_mlp(spec, spec.ffn_size());
  const std::int64_t router = spec.hidden * spec.moe->experts;
  return spec.moe->experts * one_mlp(spec, spec.moe->ffn_hidden) + router;
}

std::int64_t layer_parameter_count(const ModelSpec& spec) {
  return attention_parameter_count(spec) + mlp_parameter_count(spec) + 2 * one_norm(spec);
}

std::int64_t embedding_parameter_count(const ModelSpec& spec) {
  const std::int64_t positions = has_learned_positions(spec) ? spec.seq_len : 0;
  return (spec.vocab + positions) * spec.hidden;
}

std::int64_t head_parameter_count(const ModelSpec& spec) {
  const std::int64_t lm_head = spec.tied_embeddings ? 0 : spec.vocab * spec.hidden;
  return one_norm(spec) + lm_head;
}

std::int64_t parameter_count(const ModelSpec& spec) {
  validate(spec);
  return spec.layers * layer_parameter_count(spec) + embedding_parameter_count(spec) +
         head_parameter_count(spec);
}

}  // namespace metron::models
