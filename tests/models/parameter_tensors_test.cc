#include "metron/models/parameter_tensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_presets.h"
#include "support/tiny_models.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Dense and expert elements of a tensor list, as RankParameters counts them.
RankParameters sum(const std::vector<ParameterTensor>& tensors) {
  RankParameters out;
  for (const ParameterTensor& t : tensors) (t.expert ? out.expert : out.dense) += t.numel;
  return out;
}

// Every pipeline rank's tensors, with the embedding on rank 0 and the head on rank pp − 1, add up
// to what rank_parameters says the rank holds.
void expect_split_matches_rank_parameters(const ModelSpec& model, const ParallelSpec& spec) {
  const std::int64_t per_rank = model.layers / spec.pp;
  for (std::int64_t rank = 0; rank < spec.pp; ++rank) {
    SCOPED_TRACE(model.name + " pipeline rank " + std::to_string(rank));
    const RankParameters got = sum(parameter_tensors(
        model, spec, rank * per_rank, (rank + 1) * per_rank, rank == 0, rank == spec.pp - 1));
    const RankParameters want = rank_parameters(model, spec, rank);
    EXPECT_EQ(got.dense, want.dense);
    EXPECT_EQ(got.expert, want.expert);
    EXPECT_EQ(got.total(), want.total());
  }
}

ModelSpec tied(ModelSpec model) {
  model.name += "-tied";
  model.tied_embeddings = true;
  return model;
}

// A Mixtral-8x7B-like MoE: Llama 2 7B's attention with 8 KV heads and 8 SwiGLU experts of 14336,
// top 2.
ModelSpec mixtral_like() {
  return {.name = "mixtral-like",
          .layers = 32,
          .hidden = 4096,
          .heads = 32,
          .kv_heads = 8,
          .vocab = 32000,
          .seq_len = 4096,
          .moe = MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 14336},
          .mlp = MlpKind::kSwiglu};
}

// tiny_gelu with 4 experts of width 6, top 2 (biases in every expert).
ModelSpec tiny_gelu_moe() {
  ModelSpec model = testing::tiny_gelu(2);
  model.name = "tiny-gelu-moe";
  model.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 6};
  return model;
}

TEST(ParameterTensors, Gpt3SplitMatchesRankParameters) {
  expect_split_matches_rank_parameters(model_preset("gpt3-175b"), {.tp = 8, .pp = 16});
}

TEST(ParameterTensors, LlamaSplitMatchesRankParameters) {
  expect_split_matches_rank_parameters(model_preset("llama2-70b"), {.tp = 8, .pp = 4});
  expect_split_matches_rank_parameters(model_preset("llama3-8b"), {.tp = 4, .pp = 2});
}

TEST(ParameterTensors, TiedEmbeddingSplitMatchesRankParameters) {
  for (const std::int64_t pp : {1, 2, 4}) {
    expect_split_matches_rank_parameters(tied(model_preset("gpt3-1.3b")), {.tp = 2, .pp = pp});
    expect_split_matches_rank_parameters(tied(model_preset("llama2-7b")), {.tp = 4, .pp = pp});
  }
}

TEST(ParameterTensors, MoeSplitMatchesRankParametersIncludingExperts) {
  expect_split_matches_rank_parameters(mixtral_like(), {.tp = 2, .pp = 4, .ep = 4});
  expect_split_matches_rank_parameters(mixtral_like(), {.tp = 1, .pp = 1, .ep = 8});
  expect_split_matches_rank_parameters(tiny_gelu_moe(), {.tp = 2, .pp = 2, .ep = 2});
}

// One layer of tiny_gelu (h 8, 2 heads of 4, ffn 32) at tp 1, in Megatron's order: LayerNorm,
// QKV (8 × 3·8), projection (8 × 8), LayerNorm, fc1 (8 × 32), fc2 (32 × 8), each weight then bias;
// 872 elements in all (tests/support/tiny_models.h).
TEST(ParameterTensors, GeluLayerInRegistrationOrderByHand) {
  const std::vector<ParameterTensor> got =
      parameter_tensors(testing::tiny_gelu(2), ParallelSpec{}, 1, 2, false, false);
  const std::vector<std::pair<std::string, std::int64_t>> want = {
      {"layers.1.input_norm.weight", 8},          {"layers.1.input_norm.bias", 8},
      {"layers.1.attention.qkv.weight", 192},     {"layers.1.attention.qkv.bias", 24},
      {"layers.1.attention.proj.weight", 64},     {"layers.1.attention.proj.bias", 8},
      {"layers.1.post_attention_norm.weight", 8}, {"layers.1.post_attention_norm.bias", 8},
      {"layers.1.mlp.fc1.weight", 256},           {"layers.1.mlp.fc1.bias", 32},
      {"layers.1.mlp.fc2.weight", 256},           {"layers.1.mlp.fc2.bias", 8},
  };
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(got[i],
              (ParameterTensor{.name = want[i].first, .layer = 1, .numel = want[i].second}));
  }
  EXPECT_EQ(sum(got).dense, 872);
}

// A hand-made Llama-style model: h 16, 4 heads of 4, 2 KV heads, ffn 24, vocab 11 (not padded),
// tied embeddings, at tp 2. Per rank: word embeddings ⌈11/2⌉·16 = 96; QKV 16 × (16 + 2·2·4 = 32) /
// 2 = 256; projection 16·16/2 = 128; fc1 (gate and up) 16 × 48 / 2 = 384; fc2 24·16/2 = 192;
// RMSNorms 16 whole. Two chunks: [embedding, layer 0] and [layer 1, head]; the head's chunk keeps
// its own copy of the word embeddings as output.weight, and both copies are shared.
ModelSpec hand_llama() {
  return {.name = "hand-llama",
          .layers = 2,
          .hidden = 16,
          .heads = 4,
          .kv_heads = 2,
          .ffn_hidden = 24,
          .vocab = 11,
          .seq_len = 8,
          .tied_embeddings = true,
          .mlp = MlpKind::kSwiglu,
          .make_vocab_size_divisible_by = 1};
}

ParameterTensor layer_tensor(std::string name, std::int32_t layer, std::int64_t numel) {
  return {.name = std::move(name), .layer = layer, .numel = numel};
}

TEST(ParameterTensors, SmallTiedSwigluModelSizesByHand) {
  const ParallelSpec tp2{.tp = 2, .pp = 2};
  EXPECT_EQ(parameter_tensors(hand_llama(), tp2, 0, 1, true, false),
            (std::vector<ParameterTensor>{
                {.name = "embedding.word",
                 .layer = 0,
                 .numel = 96,
                 .shared_embedding = true,
                 .outside_layers = true},
                layer_tensor("layers.0.input_norm.weight", 0, 16),
                layer_tensor("layers.0.attention.qkv.weight", 0, 256),
                layer_tensor("layers.0.attention.proj.weight", 0, 128),
                layer_tensor("layers.0.post_attention_norm.weight", 0, 16),
                layer_tensor("layers.0.mlp.fc1.weight", 0, 384),
                layer_tensor("layers.0.mlp.fc2.weight", 0, 192),
            }));
  const std::vector<ParameterTensor> last = parameter_tensors(hand_llama(), tp2, 1, 2, false, true);
  ASSERT_EQ(last.size(), 8U);
  EXPECT_EQ(last[6],
            (ParameterTensor{
                .name = "final_norm.weight", .layer = 1, .numel = 16, .outside_layers = true}));
  EXPECT_EQ(last[7], (ParameterTensor{.name = "output.weight",
                                      .layer = 1,
                                      .numel = 96,
                                      .shared_embedding = true,
                                      .outside_layers = true}));
}

// hand_llama as a "squared-relu" (Nemotron) model: LayerNorms with their biases, linear layers
// without, no position embedding; fc1 is ffn wide (24·16/2 = 192), not gate and up.
TEST(ParameterTensors, SquaredReluModelHasNormBiasesButNoLinearBiases) {
  ModelSpec model = hand_llama();
  model.mlp = MlpKind::kSquaredRelu;
  EXPECT_EQ(parameter_tensors(model, ParallelSpec{.tp = 2, .pp = 2}, 0, 1, true, false),
            (std::vector<ParameterTensor>{
                {.name = "embedding.word",
                 .layer = 0,
                 .numel = 96,
                 .shared_embedding = true,
                 .outside_layers = true},
                layer_tensor("layers.0.input_norm.weight", 0, 16),
                layer_tensor("layers.0.input_norm.bias", 0, 16),
                layer_tensor("layers.0.attention.qkv.weight", 0, 256),
                layer_tensor("layers.0.attention.proj.weight", 0, 128),
                layer_tensor("layers.0.post_attention_norm.weight", 0, 16),
                layer_tensor("layers.0.post_attention_norm.bias", 0, 16),
                layer_tensor("layers.0.mlp.fc1.weight", 0, 192),
                layer_tensor("layers.0.mlp.fc2.weight", 0, 192),
            }));
}

// On one chunk the tied embeddings are a single tensor, which Megatron (pp = 1) does not mark
// shared; there is no output.weight.
TEST(ParameterTensors, TiedEmbeddingsOnOneChunkAreOneUnsharedTensor) {
  const std::vector<ParameterTensor> all =
      parameter_tensors(hand_llama(), ParallelSpec{.tp = 2}, 0, 2, true, true);
  EXPECT_EQ(
      all.front(),
      (ParameterTensor{.name = "embedding.word", .layer = 0, .numel = 96, .outside_layers = true}));
  EXPECT_EQ(all.back(),
            (ParameterTensor{
                .name = "final_norm.weight", .layer = 1, .numel = 16, .outside_layers = true}));
}

// tiny_gelu at tp 2: word embeddings ⌈10/2⌉·8 = 40, learned positions 4·8 = 32 replicated; the
// head: LayerNorm 8 + 8, LM head 40. A chunk without layers puts both at its first layer.
TEST(ParameterTensors, GeluEmbeddingAndHeadByHand) {
  const std::vector<ParameterTensor> got =
      parameter_tensors(testing::tiny_gelu(2), ParallelSpec{.tp = 2}, 2, 2, true, true);
  const auto outside = [](std::string name, std::int64_t numel) {
    return ParameterTensor{
        .name = std::move(name), .layer = 2, .numel = numel, .outside_layers = true};
  };
  EXPECT_EQ(got, (std::vector<ParameterTensor>{
                     outside("embedding.word", 40), outside("embedding.position", 32),
                     outside("final_norm.weight", 8), outside("final_norm.bias", 8),
                     outside("output.weight", 40)}));
}

// tiny_gelu_moe at tp 2, ep 2 (layer 0): after the attention block and the second LayerNorm, the
// router 8 × 4 = 32 (replicated, not an expert weight), then 4/2 = 2 local experts of width 6,
// each fc1 8·6/2 = 24 + bias 6/2 = 3, fc2 6·8/2 = 24 + bias 8 (row-parallel: whole).
TEST(ParameterTensors, MoeRouterThenLocalExpertsByHand) {
  const std::vector<ParameterTensor> got =
      parameter_tensors(tiny_gelu_moe(), ParallelSpec{.tp = 2, .ep = 2}, 0, 1, false, false);
  ASSERT_EQ(got.size(), 17U);  // 8 attention-block tensors, the router, 2 × 4 expert tensors
  EXPECT_EQ(got[8], layer_tensor("layers.0.mlp.router.weight", 0, 32));
  const auto expert = [](std::string name, std::int64_t numel) {
    return ParameterTensor{.name = std::move(name), .layer = 0, .numel = numel, .expert = true};
  };
  EXPECT_EQ(std::vector<ParameterTensor>(got.begin() + 9, got.end()),
            (std::vector<ParameterTensor>{expert("layers.0.mlp.experts.0.fc1.weight", 24),
                                          expert("layers.0.mlp.experts.0.fc1.bias", 3),
                                          expert("layers.0.mlp.experts.0.fc2.weight", 24),
                                          expert("layers.0.mlp.experts.0.fc2.bias", 8),
                                          expert("layers.0.mlp.experts.1.fc1.weight", 24),
                                          expert("layers.0.mlp.experts.1.fc1.bias", 3),
                                          expert("layers.0.mlp.experts.1.fc2.weight", 24),
                                          expert("layers.0.mlp.experts.1.fc2.bias", 8)}));
}

TEST(ParameterTensors, RejectsALayerRangeOutsideTheModel) {
  EXPECT_THAT(
      [] { (void)parameter_tensors(testing::tiny_gelu(2), ParallelSpec{}, 1, 3, false, false); },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("parameter tensors of model \"tiny-gelu\": layers: expected 0 <= first_layer "
                    "<= last_layer <= layers (2), got [1, 3)")));
}

TEST(ParameterTensors, RejectsTpNotDividingHeads) {
  EXPECT_THAT(
      [] {
        (void)parameter_tensors(testing::tiny_gelu(2), ParallelSpec{.tp = 4}, 0, 1, true, false);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("heads (2) must be divisible by tp (4)")));
}

}  // namespace
}  // namespace metron::models
