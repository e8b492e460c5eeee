#include "metron/models/compute_cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"

namespace metron::models {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

// A hand-sized "gelu" model: h = 8, a = 2 heads of dh = 4, ffn = 4h = 32, V = 10 (not padded),
// bf16 (e = 2).
ModelSpec tiny(MlpKind mlp = MlpKind::kGelu) {
  return {.name = "tiny",
          .layers = 2,
          .hidden = 8,
          .heads = 2,
          .vocab = 10,
          .seq_len = 6,
          .dtype = Precision::kBf16,
          .mlp = mlp,
          .make_vocab_size_divisible_by = 1};
}

// b = 2, s = 6, no parallelism: T = b·s = 12 tokens.
LayerShape tiny_shape() { return {.batch = 2, .seq = 6}; }

// What the tests compare of an op: its identity and GEMM dims (flops and bytes separately).
struct Dims {
  std::string name;
  OpKind kind;
  std::int64_t batch, m, n, k;
  friend bool operator==(const Dims&, const Dims&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Dims& d) {
    return os << d.name << " " << to_string(d.kind) << " " << d.batch << "x" << d.m << "x" << d.n
              << "x" << d.k;
  }
};

std::vector<Dims> dims(const std::vector<OpCost>& ops) {
  std::vector<Dims> out;
  for (const OpCost& op : ops) out.push_back({op.name, op.kind, op.batch, op.m, op.n, op.k});
  return out;
}

std::vector<std::string> names(const std::vector<OpCost>& ops) {
  std::vector<std::string> out;
  for (const OpCost& op : ops) out.push_back(op.name);
  return out;
}

const OpCost& find(const std::vector<OpCost>& ops, const std::string& name) {
  for (const OpCost& op : ops) {
    if (op.name == name) return op;
  }
  throw std::runtime_error("no op " + name);
}

double total_flops(const std::vector<OpCost>& ops) {
  double flops = 0;
  for (const OpCost& op : ops) flops += op.flops;
  return flops;
}

constexpr OpKind kG = OpKind::kGemm;
constexpr OpKind kB = OpKind::kBatchedGemm;
constexpr OpKind kE = OpKind::kElementwise;

TEST(OpKind, HasItsName) {
  EXPECT_EQ(to_string(OpKind::kGemm), "gemm");
  EXPECT_EQ(to_string(OpKind::kBatchedGemm), "batched-gemm");
  EXPECT_EQ(to_string(OpKind::kElementwise), "elementwise");
  EXPECT_EQ(to_string(OpKind::kFusedAttention), "fused-attention");
  EXPECT_EQ(to_string(OpKind::kFusedAttentionBackward), "fused-attention-backward");
}

TEST(OpCost, ProfileKeyNamesTheShape) {
  EXPECT_EQ((OpCost{.name = "qkv", .kind = kG, .m = 12, .n = 24, .k = 8}).profile_key(),
            "gemm:12x24x8");
  EXPECT_EQ((OpCost{.name = "s", .kind = kB, .m = 6, .n = 6, .k = 4, .batch = 4}).profile_key(),
            "batched-gemm:4x6x6x4");
  EXPECT_EQ((OpCost{.name = "softmax", .kind = kE, .m = 144}).profile_key(),
            "elementwise:softmax:144");
}

// Hand-worked forward of tiny() at b = 2, s = 6 (T = 12, h = 8, a = 2, dh = 4, ffn = 32):
//   qkv               m = T = 12, n = h + 2·kv·dh = 8 + 2·2·4 = 24, k = h = 8
//   attention-scores  batch = b·a = 4, m = s = 6, n = s = 6, k = dh = 4
//   attention-values  batch 4, m = 6, n = dh = 4, k = s = 6
//   attention-out     m = 12, n = 8, k = 8
//   mlp-up            m = 12, n = 32, k = 8;  mlp-down m = 12, n = 8, k = 32
//   element-wise: norms and residuals T·h = 96, softmax/dropout b·a·s·s = 144, gelu T·ffn = 384
TEST(LayerOps, ForwardOfATinyGeluLayer) {
  const std::vector<OpCost> ops = layer_ops(tiny(), tiny_shape(), ComputePhase::kForward);
  EXPECT_THAT(
      dims(ops),
      ElementsAre(Dims{"input-norm", kE, 1, 96, 0, 0}, Dims{"qkv", kG, 1, 12, 24, 8},
                  Dims{"attention-scores", kB, 4, 6, 6, 4}, Dims{"softmax", kE, 1, 144, 0, 0},
                  Dims{"attention-dropout", kE, 1, 144, 0, 0},
                  Dims{"attention-values", kB, 4, 6, 4, 6}, Dims{"attention-out", kG, 1, 12, 8, 8},
                  Dims{"attention-residual", kE, 1, 96, 0, 0},
                  Dims{"post-attention-norm", kE, 1, 96, 0, 0}, Dims{"mlp-up", kG, 1, 12, 32, 8},
                  Dims{"gelu", kE, 1, 384, 0, 0}, Dims{"mlp-down", kG, 1, 12, 8, 32},
                  Dims{"mlp-residual", kE, 1, 96, 0, 0}));
  EXPECT_EQ(find(ops, "qkv").flops, 4608);               // 2·12·24·8
  EXPECT_EQ(find(ops, "attention-scores").flops, 1152);  // 2·4·6·6·4
  EXPECT_EQ(find(ops, "attention-values").flops, 1152);  // 2·4·6·4·6
  EXPECT_EQ(find(ops, "attention-out").flops, 1536);     // 2·12·8·8
  EXPECT_EQ(find(ops, "mlp-up").flops, 6144);            // 2·12·32·8
  EXPECT_EQ(find(ops, "mlp-down").flops, 6144);          // 2·12·8·32
  // Megatron's per-layer forward 24·T·h² + 4·T·s·h = 24·12·64 + 4·12·6·8 = 18432 + 2304.
  EXPECT_EQ(total_flops(ops), 20736);
  for (const OpCost& op : ops) {
    if (op.kind == kE) {
      EXPECT_EQ(op.flops, 0) << op.name;
    }
  }
}

// Bytes with e = 2 and a 1-byte dropout mask.
TEST(LayerOps, ForwardBytesFollowTheInventory) {
  const std::vector<OpCost> ops = layer_ops(tiny(), tiny_shape(), ComputePhase::kForward);
  EXPECT_EQ(find(ops, "input-norm").bytes, 384);          // 96 · 2e
  EXPECT_EQ(find(ops, "qkv").bytes, 1152);                // 2·(12·8 + 8·24 + 12·24)
  EXPECT_EQ(find(ops, "attention-scores").bytes, 672);    // 4 · 2·(6·4 + 4·6 + 6·6)
  EXPECT_EQ(find(ops, "softmax").bytes, 576);             // 144 · 2e
  EXPECT_EQ(find(ops, "attention-dropout").bytes, 720);   // 144 · (2e + 1)
  EXPECT_EQ(find(ops, "attention-residual").bytes, 672);  // 96 · (3e + 1)
  EXPECT_EQ(find(ops, "gelu").bytes, 1536);               // 384 · 2e
  EXPECT_EQ(find(ops, "mlp-residual").bytes, 672);        // 96 · (3e + 1)
}

// I reverses F: weight GEMMs get dA (m, k, n); batched GEMMs get dA (m, k, n) and dB (k, n, m).
TEST(LayerOps, BackwardInputReversesTheForward) {
  const std::vector<OpCost> ops = layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardInput);
  EXPECT_THAT(dims(ops), ElementsAre(Dims{"mlp-residual-backward", kE, 1, 96, 0, 0},
                                     Dims{"mlp-down-dgrad", kG, 1, 12, 32, 8},
                                     Dims{"gelu-backward", kE, 1, 384, 0, 0},
                                     Dims{"mlp-up-dgrad", kG, 1, 12, 8, 32},
                                     Dims{"post-attention-norm-backward", kE, 1, 96, 0, 0},
                                     Dims{"attention-residual-backward", kE, 1, 96, 0, 0},
                                     Dims{"attention-out-dgrad", kG, 1, 12, 8, 8},
                                     Dims{"attention-values-dgrad-a", kB, 4, 6, 6, 4},
                                     Dims{"attention-values-dgrad-b", kB, 4, 6, 4, 6},
                                     Dims{"attention-dropout-backward", kE, 1, 144, 0, 0},
                                     Dims{"softmax-backward", kE, 1, 144, 0, 0},
                                     Dims{"attention-scores-dgrad-a", kB, 4, 6, 4, 6},
                                     Dims{"attention-scores-dgrad-b", kB, 4, 4, 6, 6},
                                     Dims{"qkv-dgrad", kG, 1, 12, 8, 24},
                                     Dims{"input-norm-backward", kE, 1, 96, 0, 0}));
  EXPECT_EQ(find(ops, "input-norm-backward").bytes, 576);          // 96 · 3e
  EXPECT_EQ(find(ops, "softmax-backward").bytes, 864);             // 144 · 3e
  EXPECT_EQ(find(ops, "attention-dropout-backward").bytes, 720);   // 144 · (2e + 1)
  EXPECT_EQ(find(ops, "attention-residual-backward").bytes, 480);  // 96 · (2e + 1)
  EXPECT_EQ(find(ops, "gelu-backward").bytes, 2304);               // 384 · 3e
  EXPECT_EQ(find(ops, "qkv-dgrad").bytes, 1152);                   // 2·(12·24 + 24·8 + 12·8)
}

TEST(LayerOps, BackwardWeightHasOneGemmPerWeightMatrix) {
  const std::vector<OpCost> ops = layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardWeight);
  // dW[k, n] = Aᵀ[k, m] · dC[m, n]: m' = k, n' = n, k' = m = T = 12.
  EXPECT_THAT(dims(ops), ElementsAre(Dims{"mlp-down-wgrad", kG, 1, 32, 8, 12},
                                     Dims{"mlp-up-wgrad", kG, 1, 8, 32, 12},
                                     Dims{"attention-out-wgrad", kG, 1, 8, 8, 12},
                                     Dims{"qkv-wgrad", kG, 1, 8, 24, 12}));
}

// Every gradient GEMM does the forward GEMM's FLOPs: dgrad and wgrad of a weight GEMM once each,
// a batched GEMM's two gradients twice in I.
TEST(LayerOps, GradientGemmsDoTheForwardFlops) {
  const std::vector<OpCost> f = layer_ops(tiny(), tiny_shape(), ComputePhase::kForward);
  const std::vector<OpCost> i = layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardInput);
  const std::vector<OpCost> w = layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardWeight);
  for (const std::string name : {"qkv", "attention-out", "mlp-up", "mlp-down"}) {
    EXPECT_EQ(find(i, name + "-dgrad").flops, find(f, name).flops) << name;
    EXPECT_EQ(find(w, name + "-wgrad").flops, find(f, name).flops) << name;
  }
  for (const std::string name : {"attention-scores", "attention-values"}) {
    EXPECT_EQ(find(i, name + "-dgrad-a").flops, 1152) << name;  // 2·4·6·6·4, as forward
    EXPECT_EQ(find(i, name + "-dgrad-b").flops, 1152) << name;
  }
  // I = weight GEMMs once + batched twice: 4608+1536+6144+6144 + 2·(1152+1152) = 23040.
  EXPECT_EQ(total_flops(i), 23040);
  // W = the weight GEMMs: 4608 + 1536 + 6144 + 6144 = 18432.
  EXPECT_EQ(total_flops(w), 18432);
}

TEST(LayerOps, BackwardIsBackwardInputThenBackwardWeight) {
  std::vector<OpCost> expected = layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardInput);
  for (const OpCost& op : layer_ops(tiny(), tiny_shape(), ComputePhase::kBackwardWeight)) {
    expected.push_back(op);
  }
  EXPECT_EQ(layer_ops(tiny(), tiny_shape(), ComputePhase::kBackward), expected);
}

TEST(LayerOps, RecomputeReRunsNothingTheAttentionCoreOrTheWholeForward) {
  const LayerShape shape = tiny_shape();
  EXPECT_THAT(layer_ops(tiny(), shape, ComputePhase::kRecompute, Recompute::kNone), IsEmpty());
  EXPECT_THAT(names(layer_ops(tiny(), shape, ComputePhase::kRecompute, Recompute::kSelective)),
              ElementsAre("attention-scores", "softmax", "attention-dropout", "attention-values"));
  EXPECT_THAT(names(layer_ops(tiny(MlpKind::kSwiglu), shape, ComputePhase::kRecompute,
                              Recompute::kSelective)),
              ElementsAre("attention-scores", "softmax", "attention-values"));
  EXPECT_EQ(layer_ops(tiny(), shape, ComputePhase::kRecompute, Recompute::kFull),
            layer_ops(tiny(), shape, ComputePhase::kForward));
}

TEST(LayerOps, RecomputeSettingDoesNotChangeTheOtherPhases) {
  const LayerShape shape = tiny_shape();
  EXPECT_EQ(layer_ops(tiny(), shape, ComputePhase::kForward, Recompute::kFull),
            layer_ops(tiny(), shape, ComputePhase::kForward, Recompute::kNone));
  EXPECT_EQ(layer_ops(tiny(), shape, ComputePhase::kBackward, Recompute::kSelective),
            layer_ops(tiny(), shape, ComputePhase::kBackward, Recompute::kNone));
}

// "swiglu": no dropout anywhere; one gate-up GEMM of width 2·ffn; SwiGLU reads 2 and writes 1.
TEST(LayerOps, SwigluLayerHasAGateUpGemmAndNoDropout) {
  const std::vector<OpCost> ops =
      layer_ops(tiny(MlpKind::kSwiglu), tiny_shape(), ComputePhase::kForward);
  EXPECT_THAT(
      dims(ops),
      ElementsAre(Dims{"input-norm", kE, 1, 96, 0, 0}, Dims{"qkv", kG, 1, 12, 24, 8},
                  Dims{"attention-scores", kB, 4, 6, 6, 4}, Dims{"softmax", kE, 1, 144, 0, 0},
                  Dims{"attention-values", kB, 4, 6, 4, 6}, Dims{"attention-out", kG, 1, 12, 8, 8},
                  Dims{"attention-residual", kE, 1, 96, 0, 0},
                  Dims{"post-attention-norm", kE, 1, 96, 0, 0},
                  Dims{"mlp-gate-up", kG, 1, 12, 64, 8}, Dims{"swiglu", kE, 1, 384, 0, 0},
                  Dims{"mlp-down", kG, 1, 12, 8, 32}, Dims{"mlp-residual", kE, 1, 96, 0, 0}));
  EXPECT_EQ(find(ops, "swiglu").bytes, 2304);             // 384 · 3e
  EXPECT_EQ(find(ops, "attention-residual").bytes, 576);  // 96 · 3e, no mask
  const std::vector<OpCost> i =
      layer_ops(tiny(MlpKind::kSwiglu), tiny_shape(), ComputePhase::kBackwardInput);
  EXPECT_EQ(find(i, "mlp-residual-backward").bytes, 384);  // 96 · 2e, no mask
}

// "squared-relu" (Nemotron): no dropout anywhere; one up GEMM of width ffn; ReLU² moves what GeLU
// moves, reading 1 and writing 1 forward (2e), reading 2 and writing 1 backward (3e).
TEST(LayerOps, SquaredReluLayerHasOneUpGemmAndNoDropout) {
  const std::vector<OpCost> ops =
      layer_ops(tiny(MlpKind::kSquaredRelu), tiny_shape(), ComputePhase::kForward);
  EXPECT_THAT(
      dims(ops),
      ElementsAre(Dims{"input-norm", kE, 1, 96, 0, 0}, Dims{"qkv", kG, 1, 12, 24, 8},
                  Dims{"attention-scores", kB, 4, 6, 6, 4}, Dims{"softmax", kE, 1, 144, 0, 0},
                  Dims{"attention-values", kB, 4, 6, 4, 6}, Dims{"attention-out", kG, 1, 12, 8, 8},
                  Dims{"attention-residual", kE, 1, 96, 0, 0},
                  Dims{"post-attention-norm", kE, 1, 96, 0, 0}, Dims{"mlp-up", kG, 1, 12, 32, 8},
                  Dims{"squared-relu", kE, 1, 384, 0, 0}, Dims{"mlp-down", kG, 1, 12, 8, 32},
                  Dims{"mlp-residual", kE, 1, 96, 0, 0}));
  EXPECT_EQ(find(ops, "squared-relu").bytes, 1536);       // 384 · 2e
  EXPECT_EQ(find(ops, "attention-residual").bytes, 576);  // 96 · 3e, no mask
  const std::vector<OpCost> i =
      layer_ops(tiny(MlpKind::kSquaredRelu), tiny_shape(), ComputePhase::kBackwardInput);
  EXPECT_EQ(find(i, "squared-relu-backward").bytes, 2304);  // 384 · 3e
  EXPECT_EQ(find(i, "mlp-residual-backward").bytes, 384);   // 96 · 2e, no mask
  EXPECT_THAT(
      names(embedding_ops(tiny(MlpKind::kSquaredRelu), tiny_shape(), ComputePhase::kForward)),
      ElementsAre("embedding"));
}

// tp = 2 with sequence parallelism and cp = 2 on b = 2, s = 8: T = 2·8/2 = 8 tokens per rank,
// Tr = T/t = 4; heads per rank a/t = 1.
TEST(LayerOps, TensorSequenceAndContextParallelismSplitTheShapes) {
  const LayerShape shape = {.batch = 2, .seq = 8, .tp = 2, .cp = 2, .sequence_parallel = true};
  const std::vector<OpCost> ops = layer_ops(tiny(), shape, ComputePhase::kForward);
  EXPECT_THAT(dims(ops), ElementsAre(Dims{"input-norm", kE, 1, 32, 0, 0},       // Tr·h = 4·8
                                     Dims{"qkv", kG, 1, 8, 12, 8},              // n = 24/2
                                     Dims{"attention-scores", kB, 2, 4, 8, 4},  // b·a/t, s/cp, s
                                     Dims{"softmax", kE, 1, 64, 0, 0},          // 2·1·4·8
                                     Dims{"attention-dropout", kE, 1, 64, 0, 0},
                                     Dims{"attention-values", kB, 2, 4, 4, 8},
                                     Dims{"attention-out", kG, 1, 8, 8, 4},  // k = h/t
                                     Dims{"attention-residual", kE, 1, 32, 0, 0},
                                     Dims{"post-attention-norm", kE, 1, 32, 0, 0},
                                     Dims{"mlp-up", kG, 1, 8, 16, 8},  // ffn/t = 16
                                     Dims{"gelu", kE, 1, 128, 0, 0},   // T·ffn/t = 8·16
                                     Dims{"mlp-down", kG, 1, 8, 8, 16},
                                     Dims{"mlp-residual", kE, 1, 32, 0, 0}));
}

// llama2-70b: h = 8192, 64 heads of 128, 8 KV heads; at tp 8 the fused QKV GEMM has
// n = (8192 + 2·8·128)/8 = 10240/8 = 1280 columns per rank.
TEST(LayerOps, GroupedQueryAttentionNarrowsTheQkvGemm) {
  const ModelSpec& llama = model_preset("llama2-70b");
  const LayerShape shape = {.batch = 1, .seq = 4096, .tp = 8};
  const OpCost qkv = find(layer_ops(llama, shape, ComputePhase::kForward), "qkv");
  EXPECT_EQ(qkv.m, 4096);
  EXPECT_EQ(qkv.n, 1280);
  EXPECT_EQ(qkv.k, 8192);
  const OpCost scores = find(layer_ops(llama, shape, ComputePhase::kForward), "attention-scores");
  EXPECT_EQ(scores.batch, 8);  // b·a/t = 64/8 query heads per rank
}

// MoE with E = 4 experts, top-2, expert width f = 16, on T = 12 tokens: the router sees every
// token, the experts T·k = 24 token copies.
TEST(LayerOps, MixtureOfExpertsRoutesTopKCopiesThroughTheExperts) {
  ModelSpec model = tiny();
  model.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 16};
  const std::vector<OpCost> ops = layer_ops(model, tiny_shape(), ComputePhase::kForward);
  const std::vector<Dims> all = dims(ops);
  EXPECT_THAT(
      std::vector<Dims>(all.begin() + 8, all.end()),
      ElementsAre(Dims{"post-attention-norm", kE, 1, 96, 0, 0}, Dims{"router", kG, 1, 12, 4, 8},
                  Dims{"moe-dispatch", kE, 1, 192, 0, 0},  // T·k·h = 12·2·8
                  Dims{"mlp-up", kG, 1, 24, 16, 8}, Dims{"gelu", kE, 1, 384, 0, 0},  // 24·16
                  Dims{"mlp-down", kG, 1, 24, 8, 16}, Dims{"moe-combine", kE, 1, 192, 0, 0},
                  Dims{"mlp-residual", kE, 1, 96, 0, 0}));
  EXPECT_EQ(find(ops, "moe-dispatch").bytes, 768);  // 192 · 2e
  const std::vector<OpCost> w = layer_ops(model, tiny_shape(), ComputePhase::kBackwardWeight);
  EXPECT_THAT(names(w), ElementsAre("mlp-down-wgrad", "mlp-up-wgrad", "router-wgrad",
                                    "attention-out-wgrad", "qkv-wgrad"));
}

TEST(EmbeddingOps, LookUpAndDropoutForwardScatterAddWeightGradient) {
  const LayerShape shape = tiny_shape();
  const std::vector<OpCost> f = embedding_ops(tiny(), shape, ComputePhase::kForward);
  EXPECT_THAT(dims(f), ElementsAre(Dims{"embedding", kE, 1, 96, 0, 0},
                                   Dims{"embedding-dropout", kE, 1, 96, 0, 0}));
  EXPECT_EQ(f[0].bytes, 384);  // 96 · 2e
  EXPECT_EQ(f[1].bytes, 480);  // 96 · (2e + 1)
  EXPECT_THAT(embedding_ops(tiny(), shape, ComputePhase::kBackwardInput), IsEmpty());
  const std::vector<OpCost> w = embedding_ops(tiny(), shape, ComputePhase::kBackwardWeight);
  EXPECT_THAT(dims(w), ElementsAre(Dims{"embedding-wgrad", kE, 1, 96, 0, 0}));
  EXPECT_EQ(w[0].bytes, 576);  // 96 · 3e
  EXPECT_EQ(embedding_ops(tiny(), shape, ComputePhase::kBackward), w);
  EXPECT_THAT(names(embedding_ops(tiny(MlpKind::kSwiglu), shape, ComputePhase::kForward)),
              ElementsAre("embedding"));
}

// The head on T = 12 tokens, V = 10: lm-head m = 12, n = 10, k = 8; the loss on 12·10 logits as
// Megatron's cross-entropy runs it (cross_entropy.py): .float() (e + 4), max (4), -= max (8),
// exp (8), sum (4), div_ (8); backward mul_ by the output gradient (8), then the cast back (4 + e).
TEST(HeadOps, FinalNormLmHeadAndCrossEntropy) {
  const LayerShape shape = tiny_shape();
  const std::vector<OpCost> f = head_ops(tiny(), shape, ComputePhase::kForward);
  EXPECT_THAT(
      dims(f),
      ElementsAre(Dims{"final-norm", kE, 1, 96, 0, 0}, Dims{"lm-head", kG, 1, 12, 10, 8},
                  Dims{"logits-fp32", kE, 1, 120, 0, 0}, Dims{"logits-max", kE, 1, 120, 0, 0},
                  Dims{"logits-shift", kE, 1, 120, 0, 0}, Dims{"logits-exp", kE, 1, 120, 0, 0},
                  Dims{"logits-sum", kE, 1, 120, 0, 0}, Dims{"loss-softmax", kE, 1, 120, 0, 0}));
  EXPECT_EQ(f[1].flops, 1920);  // 2·12·10·8
  double loss_bytes = 0;
  for (std::size_t k = 2; k < f.size(); ++k) loss_bytes += f[k].bytes;
  EXPECT_EQ(loss_bytes, 4560);  // 120 · (e + 36)
  const std::vector<OpCost> i = head_ops(tiny(), shape, ComputePhase::kBackwardInput);
  EXPECT_THAT(dims(i), ElementsAre(Dims{"loss-softmax-backward", kE, 1, 120, 0, 0},
                                   Dims{"logits-fp32-backward", kE, 1, 120, 0, 0},
                                   Dims{"lm-head-dgrad", kG, 1, 12, 8, 10},
                                   Dims{"final-norm-backward", kE, 1, 96, 0, 0}));
  EXPECT_EQ(i[0].bytes, 960);  // 120 · 8
  EXPECT_EQ(i[1].bytes, 720);  // 120 · (4 + e)
  EXPECT_EQ(i[3].bytes, 576);  // 96 · 3e
  EXPECT_THAT(dims(head_ops(tiny(), shape, ComputePhase::kBackwardWeight)),
              ElementsAre(Dims{"lm-head-wgrad", kG, 1, 8, 10, 12}));
  EXPECT_THAT(head_ops(tiny(), shape, ComputePhase::kRecompute), IsEmpty());
}

// Megatron pads the vocabulary (ModelSpec::vocab_per_rank): with make_vocab_size_divisible_by 4
// at tp 2, V = 10 becomes 16, 8 per rank, so the LM head is 12 x 8 x 8 and the loss runs over
// 12·8 logits; the model's FLOPs (iteration_flops) still count V = 10.
TEST(HeadOps, TheLmHeadComputesThePaddedVocabulary) {
  ModelSpec padded = tiny();
  padded.make_vocab_size_divisible_by = 4;
  const LayerShape tp2 = {.batch = 2, .seq = 6, .tp = 2};
  const std::vector<OpCost> f = head_ops(padded, tp2, ComputePhase::kForward);
  EXPECT_EQ(dims(f)[1], (Dims{"lm-head", kG, 1, 12, 8, 8}));
  EXPECT_EQ(dims(f).back(), (Dims{"loss-softmax", kE, 1, 96, 0, 0}));
  const ParallelSpec spec = {.tp = 2, .global_batch = 2};
  EXPECT_EQ(iteration_flops(padded, spec, false), iteration_flops(tiny(), spec, false));
}

// An fp32 model's logits are already fp32: .float() returns them, so no cast either way.
TEST(HeadOps, AnFp32ModelCastsNoLogits) {
  ModelSpec fp32 = tiny();
  fp32.dtype = Precision::kFp32;
  const std::vector<std::string> f = names(head_ops(fp32, tiny_shape(), ComputePhase::kForward));
  EXPECT_THAT(f, ElementsAre("final-norm", "lm-head", "logits-max", "logits-shift", "logits-exp",
                             "logits-sum", "loss-softmax"));
  EXPECT_THAT(names(head_ops(fp32, tiny_shape(), ComputePhase::kBackwardInput)),
              ElementsAre("loss-softmax-backward", "lm-head-dgrad", "final-norm-backward"));
}

// Adam per parameter: fp32 main weights r+w 8, two moments r+w 16, fp32 gradient read 4 = 28,
// plus writing the model's copy (2 for bf16, 1 for fp8, none for an fp32 model).
TEST(OptimizerOps, AdamMovesTheFp32StateAndTheModelCopy) {
  EXPECT_THAT(dims(optimizer_ops(1000, Precision::kBf16)),
              ElementsAre(Dims{"adam", kE, 1, 1000, 0, 0}));
  EXPECT_EQ(optimizer_ops(1000, Precision::kBf16)[0].bytes, 30000);  // 1000 · (28 + 2)
  EXPECT_EQ(optimizer_ops(1000, Precision::kFp8)[0].bytes, 29000);   // 1000 · (28 + 1)
  EXPECT_EQ(optimizer_ops(1000, Precision::kFp32)[0].bytes, 28000);  // 1000 · 28
  EXPECT_EQ(optimizer_ops(1000, Precision::kBf16)[0].flops, 0);
}

// ---- iteration FLOPs against Megatron's closed forms (Narayanan et al. SC'21, eq. 3) ----

// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)): full recompute (4 forward passes of each layer) and
// the LM head's forward and backward (3 · 2·B·s·h·V).
double megatron_full_recompute(double b, double s, double l, double h, double v) {
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

// 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)): the same without the recompute (3 forward passes).
double megatron_no_recompute(double b, double s, double l, double h, double v) {
  return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
}

void expect_relative(double actual, double expected) {
  EXPECT_NEAR(actual / expected, 1.0, 1e-12) << actual << " vs " << expected;
}

TEST(IterationFlops, MatchesMegatronForGpt3WithFullRecompute) {
  const ModelSpec& gpt3 = model_preset("gpt3-175b");  // l 96, h 12288, s 2048, V 50257
  const ParallelSpec spec = {.global_batch = 1536, .recompute = Recompute::kFull};
  expect_relative(iteration_flops(gpt3, spec, true),
                  megatron_full_recompute(1536, 2048, 96, 12288, 50257));
  expect_relative(iteration_flops(gpt3, spec, false),
                  megatron_no_recompute(1536, 2048, 96, 12288, 50257));
}

TEST(IterationFlops, MatchesMegatronForATinyModel) {
  // tiny(): l 2, h 8, s 6, V 10. B = 8 samples as 2 microbatches of 2 on dp = 2.
  const ParallelSpec spec = {
      .dp = 2, .microbatch_size = 2, .global_batch = 8, .recompute = Recompute::kFull};
  // 96·8·6·2·64·(1 + 6/48 + 10/256) = 589824·1.1640625 = 686592.
  EXPECT_NEAR(iteration_flops(tiny(), spec, true), 686592, 686592 * 1e-12);
  expect_relative(iteration_flops(tiny(), spec, true), megatron_full_recompute(8, 6, 2, 8, 10));
  expect_relative(iteration_flops(tiny(), spec, false), megatron_no_recompute(8, 6, 2, 8, 10));
}

// Per-rank ops are 1/tp (and 1/cp) of the layer; times tp·cp ranks the total is unchanged.
// Megatron pads the vocabulary to a multiple of 128·tp, and eq. 3 is stated with V = 51200, so
// the tp = 8 check uses that padded vocabulary.
TEST(IterationFlops, IsUnchangedByTensorAndContextParallelism) {
  ModelSpec gpt3 = model_preset("gpt3-175b");
  gpt3.vocab = 51200;
  const ParallelSpec tp8 = {.tp = 8,
                            .pp = 8,
                            .dp = 4,
                            .sequence_parallel = true,
                            .global_batch = 1536,
                            .recompute = Recompute::kFull};
  expect_relative(iteration_flops(gpt3, tp8, true),
                  megatron_full_recompute(1536, 2048, 96, 12288, 51200));
  // tiny() at tp 2 and cp 2: B = 4 samples of s = 8.
  const ParallelSpec split = {
      .tp = 2, .cp = 2, .global_batch = 4, .seq_len = 8, .recompute = Recompute::kFull};
  expect_relative(iteration_flops(tiny(), split, true), megatron_full_recompute(4, 8, 2, 8, 10));
}

TEST(IterationFlops, SelectiveRecomputeAddsOnlyTheAttentionCore) {
  // Per layer and sample the attention core is 2·2·s²·h = 4·s²·h: 4·36·8 = 1152 for tiny().
  // B = 1, l = 2: no-recompute total + 2 · 1152.
  const ParallelSpec spec = {.global_batch = 1, .recompute = Recompute::kSelective};
  expect_relative(iteration_flops(tiny(), spec, true),
                  megatron_no_recompute(1, 6, 2, 8, 10) + 2 * 1152);
}

TEST(IterationFlops, ThrowsWithoutANumberOfMicrobatches) {
  EXPECT_THAT([] { (void)iteration_flops(tiny(), ParallelSpec{}, true); },
              ThrowsMessage<InvalidConfig>(HasSubstr("number of microbatches is unknown")));
}

// ---- the roofline ----

// dgx-a100: bf16 peak 312e12 FLOP/s at gemm_efficiency 0.8, HBM 2.039e12 B/s at
// memory_efficiency 0.85, 108 SMs.
ComputeModel a100() { return ComputeModel(hardware_preset("dgx-a100"), Precision::kBf16); }

OpCost gemm_op(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1) {
  const double b = double(batch), dm = double(m), dn = double(n), dk = double(k);
  return {.name = "g",
          .kind = batch == 1 ? OpKind::kGemm : OpKind::kBatchedGemm,
          .m = m,
          .n = n,
          .k = k,
          .batch = batch,
          .flops = 2 * b * dm * dn * dk,
          .bytes = 2 * b * (dm * dk + dk * dn + dm * dn)};
}

TEST(ComputeModel, LargeSquareGemmIsComputeBound) {
  // 8192³: 64·64 = 4096 full tiles over 108 SMs in ⌈4096/108⌉ = 38 waves, wave util 4096/4104.
  // Compute 2·8192³ / (312e12 · 0.8 · 4096/4104) ≈ 4.41 ms; memory 2·3·8192² / (2.039e12 · 0.85)
  // ≈ 0.23 ms.
  const OpCost op = gemm_op(8192, 8192, 8192);
  EXPECT_DOUBLE_EQ(a100().gemm_efficiency(op), 0.8 * 4096.0 / 4104.0);
  EXPECT_DOUBLE_EQ(a100().op_time(op), 2.0 * 8192 * 8192 * 8192 / (312e12 * 0.8 * 4096.0 / 4104.0));
}

TEST(ComputeModel, ThinGemmIsMemoryBound) {
  // 8192x8192x16: compute 2·8192²·16 / (312e12·0.8·4096/4104) ≈ 8.6 us; memory
  // 2·(8192·16 + 16·8192 + 8192²) = 134742016 B / (2.039e12 · 0.85) ≈ 77.7 us.
  EXPECT_DOUBLE_EQ(a100().op_time(gemm_op(8192, 8192, 16)), 134742016.0 / (2.039e12 * 0.85));
}

TEST(ComputeModel, ElementwiseOpsRunAtStreamBandwidth) {
  const OpCost op = {.name = "softmax", .kind = kE, .m = 1000, .bytes = 4000};
  EXPECT_EQ(a100().gemm_efficiency(op), 1.0);
  EXPECT_DOUBLE_EQ(a100().op_time(op), 4000 / (2.039e12 * 0.85));
}

TEST(ComputeModel, QuantizesTilesAndWaves) {
  // 129x129: ⌈129/128⌉² = 4 tiles of 128², of which 129²/256² is used; 4 tiles fill 4 of 108 SMs
  // in one wave.
  EXPECT_DOUBLE_EQ(a100().gemm_efficiency(gemm_op(129, 129, 64)),
                   0.8 * (129.0 * 129.0) / (256.0 * 256.0) * (4.0 / 108.0));
  // 100 batched full tiles: one wave, 100/108 busy; 109 tiles: 2 waves, 109/216.
  EXPECT_DOUBLE_EQ(a100().gemm_efficiency(gemm_op(128, 128, 64, 100)), 0.8 * 100.0 / 108.0);
  EXPECT_DOUBLE_EQ(a100().gemm_efficiency(gemm_op(128, 128, 64, 109)), 0.8 * 109.0 / 216.0);
  // 1536x1152 = (12·128)x(9·128): 108 full tiles, exactly one wave, no loss.
  EXPECT_DOUBLE_EQ(a100().gemm_efficiency(gemm_op(1536, 1152, 64)), 0.8);
}

// Note [gemm tile overhead], derived as time rather than as efficiency: a wave of tiles takes one
// tile's k-loop, 2·128²·k FLOPs at one SM's rate R = peak · efficiency / sm_count, plus the fixed
// time t; a GEMM takes that once per wave.
TEST(ComputeModel, EachWaveOfTilesPaysTheTileOverheadOnTopOfItsKLoop) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  constexpr double kOverhead = 1.1e-6;
  ASSERT_EQ(hw.gpu.gemm_tile_overhead, kOverhead);  // the H100's, measured (hardware_presets.cc)
  // One wave of these GEMMs takes about the GEMM floor: the floors have a test of their own.
  hw.gpu.kernel_floor = 0;
  hw.gpu.gemm_floor = 0;
  const ComputeModel h100(hw, Precision::kBf16);
  const double rate = 989.4e12 * 0.75 / 132;
  const auto wave = [&](double k, double r) { return 2.0 * 128 * 128 * k / r + kOverhead; };
  // 1536 x 1408 = (12·128) x (11·128): 132 full tiles, one wave on 132 SMs.
  for (const std::int64_t k : {768, 1536, 12288}) {
    EXPECT_NEAR(h100.op_time(gemm_op(1536, 1408, k)), wave(double(k), rate), 1e-15) << k;
  }
  // 1536 x 2816: 264 tiles, two waves.
  EXPECT_NEAR(h100.op_time(gemm_op(1536, 2816, 1536)), 2 * wave(1536, rate), 1e-15);
  // FP8: the k-loop at the fp8 peak and efficiency, the same fixed time per tile.
  OpCost fp8 = gemm_op(1536, 1408, 1536);
  fp8.fp8 = true;
  const double fp8_rate = 1978.9e12 * (0.75 * (1402.6 / 1978.9) / (794.5 / 989.4)) / 132;
  EXPECT_NEAR(h100.op_time(fp8), wave(1536, fp8_rate), 1e-15);
  // Without it the wave is its k-loop alone.
  hw.gpu.gemm_tile_overhead = 0;
  EXPECT_NEAR(ComputeModel(hw, Precision::kBf16).op_time(gemm_op(1536, 1408, 1536)),
              wave(1536, rate) - kOverhead, 1e-15);
}

// Note [kernel floor]: an op whose roofline is shorter than its floor takes the floor (a GEMM
// the GEMM floor, every other kernel the kernel floor); a longer op and an op without work keep
// their roofline.
TEST(ComputeModel, NoKernelFinishesSoonerThanItsFloor) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  constexpr double kKernel = 3.4e-6;
  constexpr double kGemm = 6.2e-6;
  ASSERT_EQ(hw.gpu.kernel_floor, kKernel);  // the H100's, measured (hardware_presets.cc)
  ASSERT_EQ(hw.gpu.gemm_floor, kGemm);
  const ComputeModel h100(hw, Precision::kBf16);
  const double stream = 3.35e12 * 0.85;  // HBM bandwidth at memory_efficiency
  const auto elementwise = [](double bytes) {
    return OpCost{.name = "e", .kind = OpKind::kElementwise, .m = 1, .bytes = bytes};
  };
  // 4 KiB streamed in 1.4 ns; 1 MiB in 0.37 us: both below the floor. 100 MB take 35 us.
  EXPECT_EQ(h100.op_time(elementwise(4096)), kKernel);
  EXPECT_EQ(h100.op_time(elementwise(1 << 20)), kKernel);
  EXPECT_DOUBLE_EQ(h100.op_time(elementwise(1e8)), 1e8 / stream);
  // A 64³ GEMM (0.5 MFLOP, one tile) and 16 batched ones: the GEMM floor. 8192³ takes ~1.5 ms.
  EXPECT_EQ(h100.op_time(gemm_op(64, 64, 64)), kGemm);
  EXPECT_EQ(h100.op_time(gemm_op(64, 64, 64, 16)), kGemm);
  const OpCost large = gemm_op(8192, 8192, 8192);
  EXPECT_DOUBLE_EQ(h100.op_time(large), large.flops / (989.4e12 * h100.gemm_efficiency(large)));
  // A tiny fused attention kernel is a kernel, not a GEMM call.
  const OpCost attention{.name = "attention",
                         .kind = OpKind::kFusedAttention,
                         .m = 16,
                         .n = 16,
                         .k = 8,
                         .flops = 4.0 * 16 * 16 * 8,
                         .bytes = 4.0 * 16 * 8 * 2};
  EXPECT_EQ(h100.op_time(attention), kKernel);
  // No work: no kernel.
  EXPECT_EQ(h100.op_time(elementwise(0)), 0);
  // Without floors: the roofline.
  hw.gpu.kernel_floor = 0;
  hw.gpu.gemm_floor = 0;
  const ComputeModel bare(hw, Precision::kBf16);
  EXPECT_DOUBLE_EQ(bare.op_time(elementwise(4096)), 4096 / stream);
  EXPECT_LT(bare.op_time(gemm_op(64, 64, 64)), kKernel);  // one tile: 1.1 us of overhead
  // A GEMM floor below the kernel floor: a GEMM is a kernel too.
  hw.gpu.kernel_floor = kKernel;
  hw.gpu.gemm_floor = 1e-6;
  EXPECT_EQ(ComputeModel(hw, Precision::kBf16).op_time(gemm_op(64, 64, 64)), kKernel);
}

TEST(ComputeModel, UnknownSmCountSkipsQuantization) {
  HardwareSpec hw = hardware_preset("dgx-a100");
  hw.gpu.sm_count = 0;
  hw.gpu.gemm_efficiency = 0.7;
  const ComputeModel model(hw, Precision::kBf16);
  EXPECT_EQ(model.gemm_efficiency(gemm_op(129, 129, 64)), 0.7);
  EXPECT_EQ(model.gemm_efficiency(gemm_op(7, 3, 5, 11)), 0.7);
}

TEST(ComputeModel, CostSumsFlopsBytesAndTimes) {
  const std::vector<OpCost> ops = {gemm_op(8192, 8192, 8192), gemm_op(8192, 8192, 16)};
  const PhaseCost total = a100().cost(ops);
  EXPECT_DOUBLE_EQ(total.flops, 2.0 * 8192 * 8192 * 8192 + 2.0 * 8192 * 8192 * 16);
  EXPECT_DOUBLE_EQ(total.bytes, 2.0 * 3 * 8192 * 8192 + 134742016.0);
  EXPECT_DOUBLE_EQ(total.seconds, 2.0 * 8192 * 8192 * 8192 / (312e12 * 0.8 * 4096.0 / 4104.0) +
                                      134742016.0 / (2.039e12 * 0.85));
}

TEST(ComputeModel, ProfileEntryOverridesExactlyThatOp) {
  CostProfile profile;
  profile.set_compute("gemm:12x24x8", Precision::kBf16, 0.125);  // tiny()'s qkv
  profile.set_compute("gemm:12x24x8", Precision::kFp16, 9.0);    // another dtype: not used
  const ComputeModel plain(hardware_preset("dgx-a100"), Precision::kBf16);
  const ComputeModel profiled(hardware_preset("dgx-a100"), Precision::kBf16, &profile);
  int overridden = 0;
  for (ComputePhase phase :
       {ComputePhase::kForward, ComputePhase::kBackwardInput, ComputePhase::kBackwardWeight}) {
    for (const OpCost& op : layer_ops(tiny(), tiny_shape(), phase)) {
      if (op.name == "qkv") {
        EXPECT_EQ(profiled.op_time(op), 0.125);
        ++overridden;
      } else {
        EXPECT_EQ(profiled.op_time(op), plain.op_time(op)) << op.name;
      }
    }
  }
  EXPECT_EQ(overridden, 1);
}

// Fused attention on tiny() at b = 2, s = 6 (a = 2, dh = 4): one op of b·a = 4 heads, 6 queries
// against 6 keys; its FLOPs are QKᵀ's and ·V's, 2 · 2·4·6·6·4 = 2304, and the backward's twice
// that. Bytes: Q, K, V, O of 4·6·4 = 96 elements each, 2 bytes: 768; the backward moves twice.
TEST(LayerOps, FusedAttentionIsOneOpWithTheProductsFlopsAndNoScoreTraffic) {
  LayerShape fused = tiny_shape();
  fused.fused_attention = true;
  const std::vector<OpCost> forward = layer_ops(tiny(), fused, ComputePhase::kForward);
  EXPECT_THAT(names(forward),
              ElementsAre("input-norm", "qkv", "attention", "attention-out", "attention-residual",
                          "post-attention-norm", "mlp-up", "gelu", "mlp-down", "mlp-residual"));
  const OpCost& attention = forward[2];
  EXPECT_EQ(dims({attention}),
            (std::vector<Dims>{{"attention", OpKind::kFusedAttention, 4, 6, 6, 4}}));
  EXPECT_EQ(attention.flops, 2304);
  EXPECT_EQ(attention.bytes, 768);
  const std::vector<OpCost> input = layer_ops(tiny(), fused, ComputePhase::kBackwardInput);
  const auto backward = std::ranges::find(input, std::string("attention-backward"), &OpCost::name);
  ASSERT_NE(backward, input.end());
  EXPECT_EQ(backward->kind, OpKind::kFusedAttentionBackward);
  EXPECT_EQ(backward->flops, 4608);
  EXPECT_EQ(backward->bytes, 1536);
  EXPECT_EQ(backward->profile_key(), "fused-attention-backward:4x6x6x4");
  // The model FLOPs of every phase are those of the unfused layer (MFU does not change).
  for (ComputePhase phase :
       {ComputePhase::kForward, ComputePhase::kBackwardInput, ComputePhase::kBackwardWeight}) {
    double fused_flops = 0;
    double unfused_flops = 0;
    for (const OpCost& op : layer_ops(tiny(), fused, phase)) fused_flops += op.flops;
    for (const OpCost& op : layer_ops(tiny(), tiny_shape(), phase)) unfused_flops += op.flops;
    EXPECT_EQ(fused_flops, unfused_flops);
  }
  // Selective recompute re-runs the fused kernel.
  EXPECT_THAT(names(layer_ops(tiny(), fused, ComputePhase::kRecompute, Recompute::kSelective)),
              ElementsAre("attention"));
}

// The H100 preset's cuDNN table at s = 4096 (forward 518, backward 499 TFLOP/s) for one head
// group of gpt3-1.3b-like shape: b·a = 16 heads, dh 128. FLOPs f = 4·16·4096²·128; the causal
// kernel does f/2 forward and 2.5·f/2 backward.
TEST(ComputeModel, FusedAttentionTakesItsTimeFromTheKernelTable) {
  const ComputeModel h100(hardware_preset("dgx-h100"), Precision::kBf16);
  const double f = 4.0 * 16 * 4096 * 4096 * 128;
  const OpCost forward = {.name = "attention",
                          .kind = OpKind::kFusedAttention,
                          .m = 4096,
                          .n = 4096,
                          .k = 128,
                          .batch = 16,
                          .flops = f,
                          .bytes = 1e6};
  OpCost backward = forward;
  backward.kind = OpKind::kFusedAttentionBackward;
  backward.flops = 2 * f;
  EXPECT_DOUBLE_EQ(h100.op_time(forward), f / 2 / 518e12);
  EXPECT_DOUBLE_EQ(h100.op_time(backward), 2.5 * f / 2 / 499e12);
  // Halfway between 2048 and 4096 in log(seq): halfway between 484 and 518.
  OpCost between = forward;
  between.n = 2896;
  EXPECT_NEAR(h100.op_time(between), f / 2 / 501e12, f / 2 / 501e12 * 1e-4);
  // Beyond the table: its last entry.
  between.n = 65536;
  EXPECT_DOUBLE_EQ(h100.op_time(between), f / 2 / 539e12);
}

TEST(ComputeModel, FusedAttentionWithoutAKernelTableIsCostedAsItsProducts) {
  HardwareSpec hw = hardware_preset("dgx-a100");
  hw.gpu.fused_attention.reset();
  const ComputeModel model(hw, Precision::kBf16);
  // 16 heads of 128x128 tiles (m = n = 128): one wave of 16 on 108 SMs.
  const OpCost op = {.name = "attention",
                     .kind = OpKind::kFusedAttention,
                     .m = 128,
                     .n = 128,
                     .k = 64,
                     .batch = 16,
                     .flops = 4.0 * 16 * 128 * 128 * 64};
  EXPECT_DOUBLE_EQ(model.op_time(op), op.flops / (312e12 * 0.8 * 16.0 / 108.0));
}

TEST(ComputeModel, RejectsADtypeTheGpuLacks) {
  EXPECT_THAT([] { (void)ComputeModel(hardware_preset("dgx-a100"), Precision::kFp8); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("dgx-a100"), HasSubstr("A100-SXM4-80GB"), HasSubstr("fp8"))));
}

// FP8 training (Note [fp8 training]) on tiny() at b = 2, s = 6 (T = 12, h = 8, ffn = 32, e = 2):
// each linear GEMM is preceded by the casts of its input (m·k) and weight (k·n) at e + 2 = 4 bytes
// per element under delayed scaling; the GEMM reads one-byte operands and writes e-byte output.
// qkv (12x24x8): input 96 and weight 192 elements, GEMM bytes 96 + 192 + 2·288 = 864.
TEST(LayerOps, Fp8CastsTheOperandsOfEachLinearGemmAndRunsItInFp8) {
  LayerShape fp8 = tiny_shape();
  fp8.fp8 = Fp8Recipe::kDelayed;
  const std::vector<OpCost> forward = layer_ops(tiny(), fp8, ComputePhase::kForward);
  EXPECT_THAT(
      names(forward),
      ElementsAre("input-norm", "qkv-cast", "qkv-weight-cast", "qkv", "attention-scores", "softmax",
                  "attention-dropout", "attention-values", "attention-out-cast",
                  "attention-out-weight-cast", "attention-out", "attention-residual",
                  "post-attention-norm", "mlp-up-cast", "mlp-up-weight-cast", "mlp-up", "gelu",
                  "mlp-down-cast", "mlp-down-weight-cast", "mlp-down", "mlp-residual"));
  EXPECT_EQ(find(forward, "qkv-cast").bytes, 96 * 4);
  EXPECT_EQ(find(forward, "qkv-weight-cast").bytes, 192 * 4);
  EXPECT_EQ(find(forward, "qkv").bytes, 864);
  EXPECT_TRUE(find(forward, "qkv").fp8);
  EXPECT_EQ(find(forward, "qkv").flops, 2 * 12 * 24 * 8);
  // mlp-down (12x8x32): its input is the GeLU output, 12·32 elements.
  EXPECT_EQ(find(forward, "mlp-down-cast").bytes, 384 * 4);
  // The attention products stay in the model's dtype.
  EXPECT_FALSE(find(forward, "attention-scores").fp8);

  // I: the output gradient of each FP8 GEMM is cast before its dgrad; a cast has no backward.
  const std::vector<OpCost> input = layer_ops(tiny(), fp8, ComputePhase::kBackwardInput);
  EXPECT_THAT(
      names(input),
      ElementsAre("mlp-residual-backward", "mlp-down-grad-cast", "mlp-down-dgrad", "gelu-backward",
                  "mlp-up-grad-cast", "mlp-up-dgrad", "post-attention-norm-backward",
                  "attention-residual-backward", "attention-out-grad-cast", "attention-out-dgrad",
                  "attention-values-dgrad-a", "attention-values-dgrad-b",
                  "attention-dropout-backward", "softmax-backward", "attention-scores-dgrad-a",
                  "attention-scores-dgrad-b", "qkv-grad-cast", "qkv-dgrad", "input-norm-backward"));
  EXPECT_EQ(find(input, "mlp-up-grad-cast").bytes, 12 * 32 * 4);
  // qkv-dgrad (12x8x24): dC 12·24 and W 8·24 in FP8, dA 12·8 in bf16.
  EXPECT_EQ(find(input, "qkv-dgrad").bytes, 288 + 192 + 2 * 96);
  EXPECT_TRUE(find(input, "qkv-dgrad").fp8);
  EXPECT_FALSE(find(input, "attention-scores-dgrad-a").fp8);

  // W: every wgrad in FP8, reading the transposed copies the casts wrote.
  for (const OpCost& op : layer_ops(tiny(), fp8, ComputePhase::kBackwardWeight)) {
    EXPECT_TRUE(op.fp8) << op.name;
  }
  // The model FLOPs of every phase are those of the layer without FP8 (MFU does not change).
  for (ComputePhase phase :
       {ComputePhase::kForward, ComputePhase::kBackwardInput, ComputePhase::kBackwardWeight}) {
    EXPECT_EQ(total_flops(layer_ops(tiny(), fp8, phase)),
              total_flops(layer_ops(tiny(), tiny_shape(), phase)));
  }
  // The LM head stays in the model's dtype (Megatron keeps the output layer out of FP8).
  for (const OpCost& op : head_ops(tiny(), fp8, ComputePhase::kForward)) EXPECT_FALSE(op.fp8);
}

// Current scaling reads each tensor once more for its amax: 2e + 2 = 6 bytes per element.
TEST(LayerOps, Fp8CurrentScalingReadsEachCastTensorTwice) {
  LayerShape current = tiny_shape();
  current.fp8 = Fp8Recipe::kCurrent;
  const std::vector<OpCost> forward = layer_ops(tiny(), current, ComputePhase::kForward);
  EXPECT_EQ(find(forward, "qkv-cast").bytes, 96 * 6);
  EXPECT_EQ(find(forward, "mlp-up-weight-cast").bytes, 8 * 32 * 6);
  const std::vector<OpCost> input = layer_ops(tiny(), current, ComputePhase::kBackwardInput);
  EXPECT_EQ(find(input, "qkv-grad-cast").bytes, 288 * 6);
}

// dgx-h100: fp8 peak 1978.9e12 at fp8_gemm_efficiency 0.75 · (1402.6 / 1978.9) / (794.5 / 989.4)
// (H100's FP8 and BF16 matmul ceilings); 8192³ is 4096 tiles over 132 SMs in 32 waves.
TEST(ComputeModel, Fp8GemmRunsAtTheFp8PeakAndEfficiency) {
  HardwareSpec spec = hardware_preset("dgx-h100");
  spec.gpu.gemm_tile_overhead = 0;  // its own test: EachWaveOfTilesPaysTheTileOverhead...
  const ComputeModel h100(spec, Precision::kBf16);
  OpCost op = gemm_op(8192, 8192, 8192);
  op.fp8 = true;
  const double fp8_efficiency = 0.75 * (1402.6 / 1978.9) / (794.5 / 989.4);
  const double efficiency = fp8_efficiency * 4096.0 / 4224.0;
  EXPECT_DOUBLE_EQ(h100.gemm_efficiency(op), efficiency);
  EXPECT_DOUBLE_EQ(h100.op_time(op), 2.0 * 8192 * 8192 * 8192 / (1978.9e12 * efficiency));
  // The same GEMM in bf16 takes 1402.6 / 794.5 ≈ 1.77 times as long: the ratio of the ceilings.
  OpCost bf16 = op;
  bf16.fp8 = false;
  EXPECT_NEAR(h100.op_time(bf16) / h100.op_time(op), 1402.6 / 794.5, 1e-12);
  // Without an fp8 efficiency of its own a GPU's FP8 GEMMs use its gemm_efficiency.
  HardwareSpec plain = spec;
  plain.gpu.fp8_gemm_efficiency.reset();
  EXPECT_DOUBLE_EQ(ComputeModel(plain, Precision::kBf16).gemm_efficiency(op),
                   0.75 * 4096.0 / 4224.0);
}

TEST(ComputeModel, Fp8GemmTakesItsProfileEntryAtFp8) {
  CostProfile profile;
  profile.set_compute("gemm:8192x8192x8192", Precision::kBf16, 9.0);  // the bf16 GEMM's
  const ComputeModel plain(hardware_preset("dgx-h100"), Precision::kBf16);
  const ComputeModel profiled(hardware_preset("dgx-h100"), Precision::kBf16, &profile);
  OpCost op = gemm_op(8192, 8192, 8192);
  op.fp8 = true;
  EXPECT_EQ(profiled.op_time(op), plain.op_time(op));
  profile.set_compute("gemm:8192x8192x8192", Precision::kFp8, 0.25);
  EXPECT_EQ(profiled.op_time(op), 0.25);
}

TEST(ComputeModel, Fp8GemmOnAGpuWithoutAnFp8PeakIsAConfigError) {
  OpCost op = gemm_op(64, 64, 64);
  op.name = "qkv";
  op.fp8 = true;
  EXPECT_THAT([&] { (void)a100().op_time(op); },
              ThrowsMessage<InvalidConfig>(AllOf(HasSubstr("dgx-a100"), HasSubstr("fp8"),
                                                 HasSubstr("parallel.fp8"), HasSubstr("qkv"))));
}

TEST(LayerPhaseCosts, CostsEachPhaseAndSumsTheBackward) {
  HardwareSpec hw = hardware_preset("dgx-a100");
  hw.gpu.sm_count = 0;
  const ComputeModel model(hw, Precision::kBf16);
  const LayerPhaseCosts costs =
      layer_phase_costs(tiny(), tiny_shape(), Recompute::kSelective, model);
  EXPECT_EQ(costs.forward.flops, 20736);         // see ForwardOfATinyGeluLayer
  EXPECT_EQ(costs.backward_input.flops, 23040);  // see GradientGemmsDoTheForwardFlops
  EXPECT_EQ(costs.backward_weight.flops, 18432);
  EXPECT_EQ(costs.backward.flops, 23040 + 18432);
  EXPECT_DOUBLE_EQ(costs.backward.seconds,
                   costs.backward_input.seconds + costs.backward_weight.seconds);
  EXPECT_EQ(costs.recompute.flops, 2304);  // attention-scores + attention-values: 1152 + 1152
  // The recompute's bytes are the core's: scores 4·2·(6·4 + 4·6 + 6·6) = 672, softmax 576,
  // dropout 720, values 4·2·(6·6 + 6·4 + 6·4) = 672.
  EXPECT_EQ(costs.recompute.bytes, 672 + 576 + 720 + 672);
}

}  // namespace
}  // namespace metron::models
