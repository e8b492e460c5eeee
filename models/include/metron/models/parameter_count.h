#pragma once
// Parameter counts of a ModelSpec, by part. Note [parameter count]:
//
//   attention   QKV h·(h + 2·kv_heads·head_dim) and output h·h; "gelu" models add their biases
//   mlp         "gelu": 2·h·ffn + ffn + h (with biases); "swiglu": 3·h·ffn (no biases);
//               "squared-relu": 2·h·ffn (no biases);
//               MoE: experts × that MLP at moe.ffn_hidden, plus a router h·experts, in every layer
//   layer norms "gelu", "squared-relu": 2 LayerNorms with bias = 4h; "swiglu": 2 RMSNorms = 2h
//   embedding   vocab·h, plus learned positions seq_len·h for "gelu" (GPT-style) models only,
//               as rotary positions (Llama, Nemotron) have no weights
//   head        final norm (2h or h) plus an LM head vocab·h unless the embeddings are tied
//
// These are the counts the GPT-3, Megatron (Narayanan et al. SC'21, eq. 2) and Llama papers use.

#include <cstdint>

#include "metron/models/model_spec.h"

namespace metron::models {

/// The output width of the fused QKV projection: h queries plus the keys and values of the
/// (grouped) key-value heads.
std::int64_t qkv_width(const ModelSpec& spec);

/// The weight matrices of one layer's attention block (QKV and output projection), no biases.
std::int64_t attention_weight_count(const ModelSpec& spec);

/// The weight matrices of one MLP of width `ffn` (the dense MLP or one expert): up and down,
/// plus the gate of "swiglu" models; no biases.
std::int64_t mlp_weight_count(const ModelSpec& spec, std::int64_t ffn);

/// Weights and biases of one layer's attention block.
std::int64_t attention_parameter_count(const ModelSpec& spec);

/// Weights and biases of one layer's MLP block (all experts and the router for MoE).
std::int64_t mlp_parameter_count(const ModelSpec& spec);

/// One transformer layer: attention, MLP and its two norms.
std::int64_t layer_parameter_count(const ModelSpec& spec);

/// Token embeddings plus learned position embeddings ("gelu" models).
std::int64_t embedding_parameter_count(const ModelSpec& spec);

/// Final norm plus the LM head (zero weights of its own when the embeddings are tied).
std::int64_t head_parameter_count(const ModelSpec& spec);

/// All parameters: layers · layer + embedding + head. Validates `spec` first (InvalidConfig).
/// @code
///   std::int64_t n = parameter_count(model_preset("llama2-7b"));  // 6'738'415'616
/// @endcode
std::int64_t parameter_count(const ModelSpec& spec);

}  // namespace metron::models
