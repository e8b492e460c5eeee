// Preset models. Shapes are copied from the cited tables; parameter counts are never inputs, so
// tests/models/model_presets_test.cc can check our counts against the published ones.

#include "metron/models/model_presets.h"

#include <algorithm>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "preset_lookup.h"

namespace metron::models {
namespace {

// GPT-3: Brown et al., "Language Models are Few-Shot Learners" (2020), Table 2.1. Context 2048,
// the GPT-2 BPE vocabulary of 50257 tokens, input and output embeddings tied.
// Two rows of the table do not divide: gpt3-1.3b lists 24 heads of d_head 128 for d_model 2048,
// so we keep d_head 128 (16 heads, as GPT-Neo 1.3B does); gpt3-13b lists d_model 5140 for
// 40 heads of 128, a typo for 5120.
ModelSpec gpt3(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
  return {.name = std::move(name),
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .vocab = 50257,
          .seq_len = 2048,
          .tied_embeddings = true,
          .mlp = MlpKind::kGelu};
}

// Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM" (SC'21), Table 1 (heads, hidden, layers), with its vocabulary 51200 and sequence
// length 2048; eq. 2 counts the embedding once, i.e. tied.
ModelSpec megatron(std::string name, std::int64_t heads, std::int64_t hidden, std::int64_t layers) {
  return {.name = std::move(name),
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .vocab = 51200,
          .seq_len = 2048,
          .tied_embeddings = true,
          .mlp = MlpKind::kGelu};
}

// Llama 2: Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models" (2023), Table 1
// and the released configs: vocab 32000, context 4096, untied embeddings, SwiGLU, RMSNorm.
// Llama 3: Llama Team, "The Llama 3 Herd of Models" (2024), Table 3: vocab 128256, 8 KV heads,
// context 8192 (pre-training; 405B is later extended to 128K), untied embeddings.
ModelSpec llama(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab, std::int64_t seq) {
  return {.name = std::move(name),
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .kv_heads = kv_heads,
          .ffn_hidden = ffn,
          .vocab = vocab,
          .seq_len = seq,
          .tied_embeddings = false,
          .mlp = MlpKind::kSwiglu};
}

// Nemotron-4: Parmar et al., "Nemotron-4 15B Technical Report" (2024), Table 1, and NVIDIA,
// "Nemotron-4 340B Technical Report" (2024), Table 1: grouped-query attention with 8 KV heads,
// squared-ReLU MLP of 4·hidden, no biases, rotary positions, sequence 4096, a SentencePiece
// vocabulary of 256,000 tokens, untied input and output embeddings.
ModelSpec nemotron4(std::string name, std::int64_t layers, std::int64_t hidden,
                    std::int64_t heads) {
  return {.name = std::move(name),
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .kv_heads = 8,
          .ffn_hidden = 4 * hidden,
          .vocab = 256000,
          .seq_len = 4096,
          .dtype = Precision::kBf16,
          .tied_embeddings = false,
          .mlp = MlpKind::kSquaredRelu};
}

std::vector<ModelSpec> make_presets() {
  return {
      gpt3("gpt3-125m", 12, 768, 12),
      gpt3("gpt3-350m", 24, 1024, 16),
      gpt3("gpt3-760m", 24, 1536, 16),
      gpt3("gpt3-1.3b", 24, 2048, 16),
      gpt3("gpt3-2.7b", 32, 2560, 32),
      gpt3("gpt3-6.7b", 32, 4096, 32),
      gpt3("gpt3-13b", 40, 5120, 40),
      gpt3("gpt3-175b", 96, 12288, 96),
      megatron("megatron-1.7b", 24, 2304, 24),
      megatron("megatron-3.6b", 32, 3072, 30),
      megatron("megatron-7.5b", 32, 4096, 36),
      megatron("megatron-18.4b", 48, 6144, 40),
      megatron("megatron-39.1b", 64, 8192, 48),
      megatron("megatron-76.1b", 80, 10240, 60),
      megatron("megatron-145.6b", 96, 12288, 80),
      megatron("megatron-310.1b", 128, 16384, 96),
      megatron("megatron-529.6b", 128, 20480, 105),
      megatron("megatron-1t", 160, 25600, 128),
      // Megatron-Turing NLG 530B: Smith et al. (2022), Section 3: 105 layers, hidden 20480,
      // 128 heads, sequence 2048; trained with Megatron's padded vocabulary of 51200.
      megatron("turing-530b", 128, 20480, 105),
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
      llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
      nemotron4("nemotron4-15b", 32, 6144, 48),
      nemotron4("nemotron4-340b", 96, 18432, 96),
  };
}

}  // namespace

std::span<const ModelSpec> model_presets() {
  static const std::vector<ModelSpec> kPresets = make_presets();
  return kPresets;
}

const ModelSpec& model_preset(std::string_view name) {
  return detail::find_preset(model_presets(), name, "model");
}

}  // namespace metron::models
