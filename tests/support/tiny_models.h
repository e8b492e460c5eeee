#pragma once
// Small models whose parameter counts and activations the model tests work out by hand. Their
// vocabularies are not padded (make_vocab_size_divisible_by 1), so the sums below count V as it
// is; tests/models/model_spec_test.cc checks Megatron's padding.

#include <cstdint>

#include "metron/models/model_spec.h"

namespace metron::models::testing {

/// GPT-style: h = 8, 2 heads of 4, ffn 4h = 32, vocab 10, seq 4, biases and learned positions.
/// One layer holds 872 parameters (attention 288, MLP 552, norms 32), the embedding 112 (words 80
/// + positions 32), the head 96 (final LayerNorm 16 + LM head 80).
inline ModelSpec tiny_gelu(std::int64_t layers = 2) {
  return {.name = "tiny-gelu",
          .layers = layers,
          .hidden = 8,
          .heads = 2,
          .vocab = 10,
          .seq_len = 4,
          .make_vocab_size_divisible_by = 1};
}

/// Llama-style: h = 8, 4 heads of 2, 2 KV heads, ffn 12, vocab 10, seq 4, no biases. A layer
/// holds 496 parameters (attention 192, MLP 288, norms 16), the embedding 80, the head 88.
inline ModelSpec tiny_swiglu() {
  return {.name = "tiny-swiglu",
          .layers = 2,
          .hidden = 8,
          .heads = 4,
          .kv_heads = 2,
          .ffn_hidden = 12,
          .vocab = 10,
          .seq_len = 4,
          .mlp = MlpKind::kSwiglu,
          .make_vocab_size_divisible_by = 1};
}

}  // namespace metron::models::testing
