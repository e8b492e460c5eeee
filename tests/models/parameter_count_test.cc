#include "metron/models/parameter_count.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "support/tiny_models.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using testing::tiny_gelu;
using testing::tiny_swiglu;

// h = 8, ffn = 4h = 32, vocab 10, seq 4, 2 layers, untied:
//   attention: QKV 8·24 + 24 bias = 216, output 8·8 + 8 = 72           -> 288
//   mlp:       8·32 + 32 + 32·8 + 8                                     -> 552
//   norms:     2 LayerNorms · (8 scale + 8 bias)                        -> 32
//   layer 872, two layers 1744; embedding 10·8 + 4·8 positions = 112;
//   head: final LayerNorm 16 + LM head 10·8 = 96; total 1952
TEST(ParameterCount, TinyGeluModelByHand) {
  const ModelSpec spec = tiny_gelu();
  EXPECT_EQ(attention_parameter_count(spec), 288);
  EXPECT_EQ(mlp_parameter_count(spec), 552);
  EXPECT_EQ(layer_parameter_count(spec), 872);
  EXPECT_EQ(embedding_parameter_count(spec), 112);
  EXPECT_EQ(head_parameter_count(spec), 96);
  EXPECT_EQ(parameter_count(spec), 1952);
}

TEST(ParameterCount, TiedEmbeddingsDropTheLmHead) {
  ModelSpec spec = tiny_gelu();
  spec.tied_embeddings = true;
  EXPECT_EQ(head_parameter_count(spec), 16);
  EXPECT_EQ(parameter_count(spec), 1952 - 80);
}

// h = 8, 4 heads of 2, 2 KV heads, ffn 12, vocab 10, 2 layers, untied, no biases:
//   attention: Q 8·8 = 64, K and V 8·(2·2) = 32 each, output 8·8 = 64   -> 192
//   mlp:       3·8·12                                                   -> 288
//   norms:     2 RMSNorms · 8                                           -> 16
//   layer 496, two layers 992; embedding 10·8 = 80 (rotary: no position weights);
//   head: final RMSNorm 8 + LM head 80 = 88; total 1160
TEST(ParameterCount, TinySwigluGqaModelByHand) {
  const ModelSpec spec = tiny_swiglu();
  EXPECT_EQ(attention_parameter_count(spec), 192);
  EXPECT_EQ(mlp_parameter_count(spec), 288);
  EXPECT_EQ(layer_parameter_count(spec), 496);
  EXPECT_EQ(embedding_parameter_count(spec), 80);
  EXPECT_EQ(head_parameter_count(spec), 88);
  EXPECT_EQ(parameter_count(spec), 1160);
}

// The same shape as a "squared-relu" (Nemotron) model: no linear biases, LayerNorms with biases,
// rotary positions:
//   attention 192; mlp 2·8·12 = 192; norms 2 LayerNorms · 2·8 = 32; layer 416, two layers 832;
//   embedding 80; head: final LayerNorm 16 + LM head 80 = 96; total 1008
TEST(ParameterCount, TinySquaredReluModelByHand) {
  ModelSpec spec = tiny_swiglu();
  spec.mlp = MlpKind::kSquaredRelu;
  EXPECT_EQ(attention_parameter_count(spec), 192);
  EXPECT_EQ(mlp_parameter_count(spec), 192);
  EXPECT_EQ(layer_parameter_count(spec), 416);
  EXPECT_EQ(embedding_parameter_count(spec), 80);
  EXPECT_EQ(head_parameter_count(spec), 96);
  EXPECT_EQ(parameter_count(spec), 1008);
}

// The swiglu model above with 4 experts of width 6: 4·(3·8·6) + router 8·4 = 608 per layer's
// MLP; layer 192 + 608 + 16 = 816, two layers 1632; + 80 + 88 = 1800.
TEST(ParameterCount, MoeCountsEveryExpertAndTheRouter) {
  ModelSpec spec = tiny_swiglu();
  spec.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 6};
  EXPECT_EQ(mlp_parameter_count(spec), 608);
  EXPECT_EQ(parameter_count(spec), 1800);
}

TEST(ParameterCount, RejectsAnInvalidSpec) {
  ModelSpec spec = tiny_gelu();
  spec.heads = 3;
  EXPECT_THAT([&] { (void)parameter_count(spec); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "invalid model \"tiny-gelu\": hidden (8) must be divisible by heads (3)")));
}

}  // namespace
}  // namespace metron::models
