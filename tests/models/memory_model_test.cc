#include "metron/models/memory_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "metron/base/error.h"
#include "metron/models/model_presets.h"
#include "metron/models/parameter_count.h"
#include "support/tiny_models.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// tiny_gelu(4) holds 4 layers of 872 parameters (tests/support/tiny_models.h).
ModelSpec tiny_gelu() { return testing::tiny_gelu(4); }
using testing::tiny_swiglu;

// tiny_swiglu with 4 experts of width 6, top 2: an expert holds 3·8·6 = 144, the router 8·4 = 32.
ModelSpec tiny_moe() {
  ModelSpec spec = tiny_swiglu();
  spec.name = "tiny-moe";
  spec.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 6};
  return spec;
}

// A gelu model whose Korthikanti terms are whole numbers: h = 16, a = 4, ffn = 64; V = 32, not
// padded.
ModelSpec small_gelu() {
  return {.name = "small-gelu",
          .layers = 2,
          .hidden = 16,
          .heads = 4,
          .vocab = 32,
          .seq_len = 8,
          .make_vocab_size_divisible_by = 1};
}

LayerShape shape(std::int64_t b, std::int64_t s, std::int64_t t, bool sp = false,
                 std::int64_t cp = 1) {
  return {.batch = b, .seq = s, .tp = t, .cp = cp, .sequence_parallel = sp};
}

// --- policies and bytes per parameter --------------------------------------------------------

TEST(StatePolicy, NamesRoundTrip) {
  constexpr std::array kAll{
      StatePolicy::kDdp,          StatePolicy::kMegatronDdp, StatePolicy::kMegatronDistopt,
      StatePolicy::kFairscaleSdp, StatePolicy::kZero1,       StatePolicy::kZero2,
      StatePolicy::kZero3,        StatePolicy::kFsdp1,       StatePolicy::kFsdp2};
  for (StatePolicy policy : kAll) EXPECT_EQ(parse_state_policy(to_string(policy)), policy);
  EXPECT_EQ(to_string(StatePolicy::kMegatronDistopt), "megatron-distopt");
  EXPECT_EQ(to_string(StatePolicy::kZero2), "zero2");
  EXPECT_EQ(to_string(StatePolicy::kFairscaleSdp), "fairscale-sdp");
  EXPECT_EQ(to_string(StatePolicy::kFsdp1), "fsdp1");
  EXPECT_EQ(to_string(StatePolicy::kFsdp2), "fsdp2");
}

// Scenarios written before FSDP2 had a policy of its own name FSDP1 "fsdp"; they keep loading.
TEST(StatePolicy, FsdpIsAnAliasOfFsdp1) {
  EXPECT_EQ(parse_state_policy("fsdp"), StatePolicy::kFsdp1);
  EXPECT_EQ(to_string(*parse_state_policy("fsdp")), "fsdp1");
}

TEST(StatePolicy, UnknownNameParsesToNothing) {
  EXPECT_EQ(parse_state_policy("zero4"), std::nullopt);
  EXPECT_EQ(parse_state_policy("ZeRO1"), std::nullopt);
  EXPECT_EQ(parse_state_policy(""), std::nullopt);
}

TEST(StateLayout, MegatronKeepsFp32GradientsForBf16AndAnFp32CopyForFp16) {
  EXPECT_EQ(state_layout(StatePolicy::kMegatronDdp, Precision::kBf16),
            (StateLayout{.weight_dtype = Precision::kBf16,
                         .grad_dtype = Precision::kFp32,
                         .fp32_grad_copy = false,
                         .sharding = Sharding::kNone}));
  EXPECT_EQ(state_layout(StatePolicy::kMegatronDistopt, Precision::kFp16),
            (StateLayout{.weight_dtype = Precision::kFp16,
                         .grad_dtype = Precision::kFp16,
                         .fp32_grad_copy = true,
                         .sharding = Sharding::kOptimizer}));
  EXPECT_EQ(state_layout(StatePolicy::kZero2, Precision::kBf16),
            (StateLayout{.weight_dtype = Precision::kBf16,
                         .grad_dtype = Precision::kBf16,
                         .sharding = Sharding::kGradients}));
  EXPECT_EQ(state_layout(StatePolicy::kFsdp1, Precision::kBf16).sharding, Sharding::kWeights);
}

// Note [model state bytes]: fairscale-sdp keeps model-dtype gradients whole and shards the
// optimizer (OSS) like zero1; FSDP1 and FSDP2 shard weights, gradients and optimizer like zero3.
TEST(StateLayout, FairscaleShardsTheOptimizerAndFsdpShardsEverything) {
  for (const Precision dtype : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    EXPECT_EQ(state_layout(StatePolicy::kFairscaleSdp, dtype),
              (StateLayout{.weight_dtype = dtype,
                           .grad_dtype = dtype,
                           .fp32_grad_copy = false,
                           .sharding = Sharding::kOptimizer}));
    for (const StatePolicy fsdp : {StatePolicy::kFsdp1, StatePolicy::kFsdp2}) {
      EXPECT_EQ(state_layout(fsdp, dtype), (StateLayout{.weight_dtype = dtype,
                                                        .grad_dtype = dtype,
                                                        .fp32_grad_copy = false,
                                                        .sharding = Sharding::kWeights}));
    }
  }
}

double total_bytes(StatePolicy policy, Precision dtype, std::int64_t d) {
  return bytes_per_parameter(state_layout(policy, dtype), d).total();
}

// Megatron's distributed-optimizer table (bytes per parameter, d data-parallel ranks):
//   weights/grads   non-distributed   distributed
//   fp16/fp16       20                4 + 16/d
//   bf16/fp32       18                6 + 12/d
//   fp32/fp32       16                8 + 8/d
TEST(BytesPerParameter, MatchesTheMegatronDistributedOptimizerTable) {
  for (const std::int64_t d : {1, 8, 64}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const auto dd = static_cast<double>(d);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDdp, Precision::kFp16, d), 20);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDistopt, Precision::kFp16, d), 4 + 16 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDdp, Precision::kBf16, d), 18);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDistopt, Precision::kBf16, d), 6 + 12 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDdp, Precision::kFp32, d), 16);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kMegatronDistopt, Precision::kFp32, d), 8 + 8 / dd);
  }
}

// The ZeRO paper (Rajbhandari et al. 2020, §5, K = 12) for mixed-precision Adam: 2 + 2 + 12 =
// 16 bytes; P_os 4 + 12/d, P_os+g 2 + 14/d, P_os+g+p 16/d.
TEST(BytesPerParameter, MatchesTheZeroPaper) {
  for (const std::int64_t d : {1, 8, 64}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const auto dd = static_cast<double>(d);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kDdp, Precision::kBf16, d), 16);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kZero1, Precision::kBf16, d), 4 + 12 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kZero2, Precision::kBf16, d), 2 + 14 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kZero3, Precision::kBf16, d), 16 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kFsdp1, Precision::kBf16, d), 16 / dd);
  }
}

// The Note's rows for the new policies, part by part, bf16 at d ranks:
//   fairscale-sdp  weights 2, gradients 2 (whole), optimizer (4 master + 8 moments)/d = 4 + 12/d
//   fsdp1 / fsdp2  weights 2/d, gradients 2/d, optimizer 12/d                         = 16/d
// and fp32 weights (no master copy): fairscale-sdp 4 + 4 + 8/d.
TEST(BytesPerParameter, FairscaleAndFsdpFollowTheNoteTable) {
  for (const std::int64_t d : {1, 8, 64}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const auto dd = static_cast<double>(d);
    const StateBytes sdp =
        bytes_per_parameter(state_layout(StatePolicy::kFairscaleSdp, Precision::kBf16), d);
    EXPECT_DOUBLE_EQ(sdp.weights, 2);
    EXPECT_DOUBLE_EQ(sdp.gradients, 2);
    EXPECT_DOUBLE_EQ(sdp.optimizer, 12 / dd);
    EXPECT_DOUBLE_EQ(sdp.total(), 4 + 12 / dd);
    EXPECT_DOUBLE_EQ(total_bytes(StatePolicy::kFairscaleSdp, Precision::kFp32, d), 8 + 8 / dd);
    for (const StatePolicy fsdp : {StatePolicy::kFsdp1, StatePolicy::kFsdp2}) {
      const StateBytes bytes = bytes_per_parameter(state_layout(fsdp, Precision::kBf16), d);
      EXPECT_DOUBLE_EQ(bytes.weights, 2 / dd);
      EXPECT_DOUBLE_EQ(bytes.gradients, 2 / dd);
      EXPECT_DOUBLE_EQ(bytes.optimizer, 12 / dd);
      EXPECT_DOUBLE_EQ(bytes.total(), 16 / dd);
    }
  }
}

// ZeRO-2 at d = 8: weights 2, gradients 2/8, optimizer (4 master + 8 moments)/8.
TEST(BytesPerParameter, SplitsIntoWeightsGradientsAndOptimizer) {
  const StateBytes bytes =
      bytes_per_parameter(state_layout(StatePolicy::kZero2, Precision::kBf16), 8);
  EXPECT_DOUBLE_EQ(bytes.weights, 2);
  EXPECT_DOUBLE_EQ(bytes.gradients, 0.25);
  EXPECT_DOUBLE_EQ(bytes.optimizer, 1.5);
}

TEST(BytesPerParameter, RejectsNonPositiveShards) {
  EXPECT_THAT(
      [] { (void)bytes_per_parameter(StateLayout{}, 0); },
      ThrowsMessage<InvalidConfig>(HasSubstr("shards: expected a positive integer, got 0")));
}

// --- parameters per rank ---------------------------------------------------------------------

// One rank holds the model, its word embeddings over the padded vocabulary: GPT-3's tied 50,257
// rows become 50,304 (47 more rows of 12,288), Llama 2's 32,000 are a multiple of 128 already.
TEST(RankParameters, OneRankHoldsTheWholeModel) {
  for (const ModelSpec& model :
       {tiny_gelu(), tiny_swiglu(), model_preset("llama2-7b"), model_preset("llama2-70b")}) {
    SCOPED_TRACE(model.name);
    const RankParameters params = rank_parameters(model, ParallelSpec{}, 0);
    EXPECT_EQ(params.dense, parameter_count(model));
    EXPECT_EQ(params.expert, 0);
  }
  const ModelSpec gpt3 = model_preset("gpt3-175b");
  EXPECT_EQ(rank_parameters(gpt3, ParallelSpec{}, 0).dense, parameter_count(gpt3) + 47 * 12288);
  EXPECT_EQ(rank_parameters(model_preset("llama2-7b"), ParallelSpec{}, 0).dense, 6'738'415'616);
}

// 4 layers over 4 ranks, one layer (872) each:
//   first  872 + embedding 112                = 984
//   middle 872
//   last   872 + final LayerNorm 16 + head 80 = 968
TEST(RankParameters, PipelineRanksSplitLayersAndAddEmbeddingsAndHeadAtTheEnds) {
  const ModelSpec model = tiny_gelu();
  const ParallelSpec spec{.pp = 4};
  EXPECT_EQ(rank_parameters(model, spec, 0).dense, 984);
  EXPECT_EQ(rank_parameters(model, spec, 1).dense, 872);
  EXPECT_EQ(rank_parameters(model, spec, 2).dense, 872);
  EXPECT_EQ(rank_parameters(model, spec, 3).dense, 968);
}

// Note [uneven stages]: 6 layers on pp 3 with a first and a last rank of one layer each leave 4
// for the middle one:
//   first  872 + embedding 112 = 984;  middle 4·872 = 3488;  last 872 + head 96 = 968.
TEST(RankParameters, UnevenStagesHoldTheirOwnLayerCounts) {
  const ModelSpec model = testing::tiny_gelu(6);
  ParallelSpec spec{.pp = 3};
  spec.first_stage_layers = 1;
  spec.last_stage_layers = 1;
  EXPECT_EQ(rank_parameters(model, spec, 0).dense, 984);
  EXPECT_EQ(rank_parameters(model, spec, 1).dense, 3488);
  EXPECT_EQ(rank_parameters(model, spec, 2).dense, 968);
  // The state follows the parameters: DDP keeps 2-byte weights and gradients per parameter.
  EXPECT_DOUBLE_EQ(state_memory(model, spec, StatePolicy::kDdp, 1).weights, 2 * 3488.0);
  // An explicit list, 2, 1, 3: rank 0 2·872 + 112 = 1856, rank 1 872, rank 2 3·872 + 96 = 2712.
  ParallelSpec listed{.pp = 3};
  listed.pipeline_layers = {2, 1, 3};
  EXPECT_EQ(rank_parameters(model, listed, 0).dense, 1856);
  EXPECT_EQ(rank_parameters(model, listed, 1).dense, 872);
  EXPECT_EQ(rank_parameters(model, listed, 2).dense, 2712);
}

// Tied embeddings: one rank shares the word embeddings with the head: 4·872 + 112 + 16 = 3616.
// Over two ranks the last keeps its own copy of the 80 word embeddings:
//   rank 0: 2·872 + 112 = 1856;  rank 1: 2·872 + 16 + 80 = 1840.
TEST(RankParameters, TiedEmbeddingsAreCopiedToTheLastRankOnlyWhenPipelined) {
  ModelSpec model = tiny_gelu();
  model.tied_embeddings = true;
  EXPECT_EQ(rank_parameters(model, ParallelSpec{}, 0).dense, 3616);
  const ParallelSpec two{.pp = 2};
  EXPECT_EQ(rank_parameters(model, two, 0).dense, 1856);
  EXPECT_EQ(rank_parameters(model, two, 1).dense, 1840);
}

// tp = 2, tiny gelu model (h 8, QKV out 24, ffn 32):
//   attention  QKV weight 8·24/2 = 96, QKV bias 24/2 = 12 (column parallel),
//              output weight 64/2 = 32, output bias 8 (row parallel: replicated)      = 148
//   mlp        up weight 256/2 = 128, up bias 32/2 = 16 (column parallel),
//              down weight 256/2 = 128, down bias 8 (row parallel: replicated)       = 280
//   norms      2 LayerNorms · 16, replicated                                          = 32
//   layer 460, 4 layers 1840; embedding words 80/2 = 40 + positions 32 (replicated) = 72;
//   head final LayerNorm 16 + LM head 80/2 = 56; total 1968
TEST(RankParameters, TensorParallelSplitsMatricesAndColumnBiasesOnly) {
  EXPECT_EQ(rank_parameters(tiny_gelu(), ParallelSpec{.tp = 2}, 0).dense, 1968);
}

// ep = 2: each rank holds 2 of the 4 experts; the router (32), attention (192) and norms (16)
// are dense.
//   tp 1: dense 2·(192 + 32 + 16) + 80 + 88 = 648, expert 2 layers · 2 · 144 = 576
//   tp 2: dense 2·(96 + 32 + 16) + 40 + (8 + 40) = 376, expert 2 · 2 · 144/2 = 288
TEST(RankParameters, ExpertsSplitOverExpertAndTensorParallelRanks) {
  const ModelSpec model = tiny_moe();
  const RankParameters ep2 = rank_parameters(model, ParallelSpec{.dp = 2, .ep = 2}, 0);
  EXPECT_EQ(ep2.dense, 648);
  EXPECT_EQ(ep2.expert, 576);
  const RankParameters tp2 = rank_parameters(model, ParallelSpec{.tp = 2, .dp = 2, .ep = 2}, 0);
  EXPECT_EQ(tp2.dense, 376);
  EXPECT_EQ(tp2.expert, 288);
  // Without expert parallelism one rank holds every expert: the whole model, 1800.
  EXPECT_EQ(rank_parameters(model, ParallelSpec{}, 0).total(), 1800);
}

TEST(RankParameters, RejectsLayersNotDivisibleByPp) {
  EXPECT_THAT([] { (void)rank_parameters(tiny_gelu(), ParallelSpec{.pp = 3}, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "parameters of model \"tiny-gelu\": layers (4) must be divisible by pp (3)")));
}

TEST(RankParameters, RejectsAPipelineRankOutOfRange) {
  EXPECT_THAT([] { (void)rank_parameters(tiny_gelu(), ParallelSpec{.pp = 4}, 4); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("pipeline_rank: expected 0 <= pipeline_rank < pp (4), got 4")));
  EXPECT_THAT([] { (void)rank_parameters(tiny_gelu(), ParallelSpec{}, -1); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("pipeline_rank: expected 0 <= pipeline_rank < pp (1), got -1")));
}

TEST(RankParameters, RejectsHeadsNotDivisibleByTp) {
  EXPECT_THAT([] { (void)rank_parameters(tiny_gelu(), ParallelSpec{.tp = 4}, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("heads (2) must be divisible by tp (4)")));
}

// --- state memory ----------------------------------------------------------------------------

// llama2-7b, 6'738'415'616 parameters, megatron-distopt over dp 8: bf16 weights 2 B, fp32
// gradients 4 B, optimizer (4 + 8)/8 = 1.5 B:
//   weights    13'476'831'232
//   gradients  26'953'662'464
//   optimizer  10'107'623'424
//   total      50'538'117'120 = 6'738'415'616 · 7.5
TEST(StateMemory, Llama2DistributedOptimizerByHand) {
  const StateBytes bytes = state_memory(model_preset("llama2-7b"), ParallelSpec{.dp = 8},
                                        StatePolicy::kMegatronDistopt, 0);
  EXPECT_DOUBLE_EQ(bytes.weights, 13'476'831'232.0);
  EXPECT_DOUBLE_EQ(bytes.gradients, 26'953'662'464.0);
  EXPECT_DOUBLE_EQ(bytes.optimizer, 10'107'623'424.0);
  EXPECT_DOUBLE_EQ(bytes.total(), 50'538'117'120.0);
}

// Llama 2 7B (6'738'415'616 parameters) at dp 8, bf16: FSDP2 holds 16/8 = 2 B per parameter
// (weights and gradients 2/8 each, optimizer 12/8); fairscale-sdp 2 + 2 + 12/8 = 5.5 B.
TEST(StateMemory, Llama2FsdpAndFairscaleByHand) {
  const ModelSpec llama = model_preset("llama2-7b");
  const ParallelSpec dp8{.dp = 8};
  const StateBytes fsdp = state_memory(llama, dp8, StatePolicy::kFsdp2, 0);
  EXPECT_DOUBLE_EQ(fsdp.weights, 6'738'415'616.0 / 4);
  EXPECT_DOUBLE_EQ(fsdp.gradients, 6'738'415'616.0 / 4);
  EXPECT_DOUBLE_EQ(fsdp.total(), 6'738'415'616.0 * 2);
  const StateBytes sdp = state_memory(llama, dp8, StatePolicy::kFairscaleSdp, 0);
  EXPECT_DOUBLE_EQ(sdp.gradients, 6'738'415'616.0 * 2);
  EXPECT_DOUBLE_EQ(sdp.total(), 6'738'415'616.0 * 5.5);
}

// FP8 training adds Transformer Engine's row- and column-wise FP8 copies of the linear GEMM
// weights, 2 B each: small_gelu has per layer 16·48 (QKV) + 16·16 (projection) + 2·16·64 (MLP) =
// 3072 of them, 6144 in its 2 layers (no biases, norms or embeddings); tp 2 halves them. Policies
// that shard the weights cast each gathered layer and keep no copy.
TEST(StateMemory, Fp8AddsTwoBytesPerLinearGemmWeight) {
  const ParallelSpec plain{.dp = 2};
  ParallelSpec fp8 = plain;
  fp8.fp8 = Fp8Recipe::kDelayed;
  const auto extra = [&](const ParallelSpec& with, const ParallelSpec& without, StatePolicy p) {
    const StateBytes a = state_memory(small_gelu(), with, p, 0);
    const StateBytes b = state_memory(small_gelu(), without, p, 0);
    EXPECT_EQ(a.gradients, b.gradients);
    EXPECT_EQ(a.optimizer, b.optimizer);
    return a.weights - b.weights;
  };
  EXPECT_EQ(extra(fp8, plain, StatePolicy::kDdp), 2 * 6144);
  EXPECT_EQ(extra(fp8, plain, StatePolicy::kMegatronDistopt), 2 * 6144);
  ParallelSpec tp2 = plain;
  tp2.tp = 2;
  ParallelSpec fp8_tp2 = tp2;
  fp8_tp2.fp8 = Fp8Recipe::kCurrent;
  EXPECT_EQ(extra(fp8_tp2, tp2, StatePolicy::kZero1), 6144);
  EXPECT_EQ(extra(fp8, plain, StatePolicy::kZero3), 0);
  EXPECT_EQ(extra(fp8, plain, StatePolicy::kFsdp2), 0);
}

// tiny_moe, ZeRO-1, dp 4, ep 2: dense 648 parameters over 4 shards (2 + 2 + 12/4 = 7 B),
// experts 576 over 4/2 = 2 shards (2 + 2 + 12/2 = 10 B):
//   weights 1224·2 = 2448, gradients 2448, optimizer 648·3 + 576·6 = 5400; total 10296
TEST(StateMemory, ExpertStateIsShardedOverDpCpOverEp) {
  const StateBytes bytes =
      state_memory(tiny_moe(), ParallelSpec{.dp = 4, .ep = 2}, StatePolicy::kZero1, 0);
  EXPECT_DOUBLE_EQ(bytes.weights, 2448);
  EXPECT_DOUBLE_EQ(bytes.gradients, 2448);
  EXPECT_DOUBLE_EQ(bytes.optimizer, 5400);
  EXPECT_DOUBLE_EQ(bytes.total(), 10296);
}

TEST(StateMemory, RejectsDpCpNotDivisibleByEp) {
  EXPECT_THAT(
      [] {
        (void)state_memory(tiny_moe(), ParallelSpec{.dp = 3, .ep = 2}, StatePolicy::kZero1, 0);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("dp·cp (3) must be divisible by ep (2)")));
}

// --- activations ---------------------------------------------------------------------------

// Korthikanti et al. 2022, §4 (bytes per layer, bf16, dropout masks 1 B, ffn = 4h, kv = a),
// written out with the model's s, b, h, a and the tensor-parallel size t.
void expect_korthikanti(const ModelSpec& model, std::int64_t s, std::int64_t b, std::int64_t t) {
  SCOPED_TRACE(model.name + " s=" + std::to_string(s) + " b=" + std::to_string(b) +
               " t=" + std::to_string(t));
  ASSERT_EQ(model.dtype, Precision::kBf16);
  ASSERT_EQ(model.ffn_size(), 4 * model.hidden);
  ASSERT_EQ(model.num_kv_heads(), model.heads);
  const auto sd = static_cast<double>(s);
  const auto h = static_cast<double>(model.hidden);
  const auto a = static_cast<double>(model.heads);
  const auto td = static_cast<double>(t);
  const double sbh = sd * static_cast<double>(b) * h;
  const auto bytes = [&](bool sp, Recompute r) {
    return layer_activation_bytes(model, shape(b, s, t, sp), r);
  };
  EXPECT_EQ(layer_activation_bytes(model, shape(b, s, 1), Recompute::kNone),
            sbh * (34 + 5 * a * sd / h));
  EXPECT_EQ(bytes(false, Recompute::kNone), sbh * (10 + 24 / td + 5 * a * sd / (h * td)));
  EXPECT_EQ(bytes(true, Recompute::kNone), sbh / td * (34 + 5 * a * sd / h));
  EXPECT_EQ(bytes(false, Recompute::kSelective), sbh * (10 + 24 / td));
  EXPECT_EQ(bytes(true, Recompute::kSelective), 34 * sbh / td);
  EXPECT_EQ(bytes(false, Recompute::kFull), 2 * sbh);
  EXPECT_EQ(bytes(true, Recompute::kFull), 2 * sbh / td);
}

// gpt3-175b at s = 2048: 5as/h = 5·96·2048/12288 = 80, and t = 8 divides every term.
TEST(LayerActivationBytes, Gpt3MatchesKorthikantiFormulas) {
  expect_korthikanti(model_preset("gpt3-175b"), 2048, 1, 8);
}

// h = 16, a = 4, s = 8: 5as/h = 10; at t = 2, 24/t = 12 and 5as/(ht) = 5.
TEST(LayerActivationBytes, SmallGeluModelMatchesKorthikantiFormulas) {
  expect_korthikanti(small_gelu(), 8, 2, 2);
  expect_korthikanti(small_gelu(), 8, 1, 4);
}

TEST(LayerActivationBytes, LayerShapeOfAParallelSpecGivesTheSameBytes) {
  const ModelSpec model = model_preset("gpt3-175b");
  const ParallelSpec spec{.tp = 8, .sequence_parallel = true, .seq_len = 2048};
  // sbh/t·(34 + 80) with sbh = 2048·12288
  EXPECT_EQ(layer_activation_bytes(model, layer_shape(model, spec), Recompute::kNone),
            2048.0 * 12288 / 8 * 114);
}

// Fused attention stores no score-sized tensor: of small_gelu's 5·a·s·s·b score bytes (softmax
// output 2, dropout mask 1, dropout output 2 per score) nothing is left, and it adds the fp32
// log-sum-exp per query and head, 4·a·s·b. small_gelu, b 1, s 8 (a 4): 34·8·16 = 4352 plus
// 4·4·8 = 128.
TEST(LayerActivationBytes, FusedAttentionDropsTheScoreTermsAndKeepsTheSoftmaxStatistics) {
  LayerShape fused = shape(1, 8, 1);
  fused.fused_attention = true;
  EXPECT_EQ(layer_activation_bytes(small_gelu(), fused, Recompute::kNone), 4352 + 128);
  // Under tp 2 (no sp) the statistics split with the heads: 10·sbh + 24·sbh/2 + 128/2.
  LayerShape fused_tp = shape(1, 8, 2);
  fused_tp.fused_attention = true;
  EXPECT_EQ(layer_activation_bytes(small_gelu(), fused_tp, Recompute::kNone),
            10 * 128 + 24 * 128 / 2 + 64);
}

// FP8 training keeps the four linear GEMMs' inputs in FP8 (1 B instead of 2): of Korthikanti's
// 34·sbh the QKV, projection and up inputs (2 each) and the down input (8) drop by 7·sbh.
// small_gelu, b 1, s 8 (sbh = 128, scores 5·a·s²·b = 1280): 27·128 + 1280. Under tp 2 (no sp) the
// replicated 10·sbh become 8 (QKV and up inputs) and the split 24·sbh become 19 (projection and
// down inputs): 8·128 + 19·128/2 + 1280/2.
TEST(LayerActivationBytes, Fp8KeepsTheLinearGemmInputsInOneByte) {
  LayerShape fp8 = shape(1, 8, 1);
  fp8.fp8 = Fp8Recipe::kDelayed;
  EXPECT_EQ(layer_activation_bytes(small_gelu(), fp8, Recompute::kNone), 27 * 128 + 1280);
  LayerShape fp8_tp = shape(1, 8, 2);
  fp8_tp.fp8 = Fp8Recipe::kCurrent;
  EXPECT_EQ(layer_activation_bytes(small_gelu(), fp8_tp, Recompute::kNone),
            8 * 128 + 19 * 128 / 2 + 1280 / 2);
}

// Context parallelism cp = 2 on small_gelu (b 1, s 8, h 16, a 4): every term sees s/cp = 4
// tokens, but each query still scores all 8 keys, so the score terms are 5·a·(s/cp)·s·b:
//   34·(s/cp)·b·h + 5·a·(s/cp)·s·b = 34·64 + 5·4·4·8 = 2176 + 640 = 2816
TEST(LayerActivationBytes, ContextParallelismSplitsAllButTheKeyDimension) {
  EXPECT_EQ(layer_activation_bytes(small_gelu(), shape(1, 8, 1, false, 2), Recompute::kNone), 2816);
}

// GQA with kv = 1 of a = 4 heads (dh = 4): K and V are 4 wide instead of 16. With b 1, s 8, bf16
// they shrink from 2·2·8·16 = 512 to 2·2·8·4 = 128 bytes together:
//   no parallelism 128·(34 + 10) - 384 = 5248;  t = 2 (K, V split): 128·(10 + 12 + 5) - 192 = 3264
TEST(LayerActivationBytes, GroupedQueryAttentionShrinksKeysAndValues) {
  ModelSpec model = small_gelu();
  model.kv_heads = 1;
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 8, 1), Recompute::kNone), 5248);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 8, 2), Recompute::kNone), 3264);
}

// tiny_swiglu (h 8, a 4, kv 2 of dh 2, ffn 12), b 1, s 4, bf16, no dropout anywhere:
//   replicated (/t only with SP)          split over t
//   LN1 input       2·4·8    = 64         Q               2·4·8       = 64
//   QKV input       2·4·8    = 64         K, V            2·2·4·4     = 32 + 32
//   LN2 input       2·4·8    = 64         out-proj input  2·4·8       = 64
//   gate/up input   2·4·8    = 64         gate, up, gate·up 3·2·4·12  = 288
//                            = 256                                    = 480
//   scores (split over t): softmax output 2·b·a·s·s = 2·1·4·4·4 = 128, which is also the input
//   of ·V (no attention dropout, so no mask and no dropout output)
// none: 256 + 480 + 128 = 864; selective: 736; full: the input 64.
// t = 2: 256 + 240 + 64 = 560; with SP 128 + 240 + 64 = 432.
TEST(LayerActivationBytes, SwigluModelByHandHasNoDropoutTerms) {
  const ModelSpec model = tiny_swiglu();
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kNone), 864);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kSelective), 736);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kFull), 64);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 2), Recompute::kNone), 560);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 2, true), Recompute::kNone), 432);
}

// tiny_swiglu's shape as a "squared-relu" model, b 1, s 4: the same attention and replicated
// terms, no dropout; the MLP keeps ReLU²'s input 2·4·12 = 96 and the down GEMM's input 96, so
// the split terms are 64 + 64 + 64 + 192 = 384.
// none: 256 + 384 + 128 = 768; selective: 640; full: 64. t = 2: 256 + 192 + 64 = 512; SP 384.
TEST(LayerActivationBytes, SquaredReluModelByHandHasNoDropoutTerms) {
  ModelSpec model = tiny_swiglu();
  model.mlp = MlpKind::kSquaredRelu;
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kNone), 768);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kSelective), 640);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 1), Recompute::kFull), 64);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 2), Recompute::kNone), 512);
  EXPECT_EQ(layer_activation_bytes(model, shape(1, 4, 2, true), Recompute::kNone), 384);
  EXPECT_EQ(embedding_activation_bytes(model, shape(1, 4, 1)), 0);
}

// tiny_moe (experts of width 6, top 2), b 1, s 4: the attention of tiny_swiglu (64 + 64 LN1 and
// QKV inputs, 192 Q/K/V/out-proj input, 128 scores) = 448, then
//   LN2 input 64, router input 64, expert inputs 2 copies · 64 = 128,
//   gate, up, gate·up 2 copies · 3 · 2·4·6 = 288
// total 448 + 64 + 64 + 128 + 288 = 992
TEST(LayerActivationBytes, MoeStoresTopKCopiesOfTheMlpPlusTheRouterInput) {
  EXPECT_EQ(layer_activation_bytes(tiny_moe(), shape(1, 4, 1), Recompute::kNone), 992);
}

TEST(LayerActivationBytes, RejectsANonPositiveShape) {
  EXPECT_THAT([] { (void)layer_activation_bytes(tiny_gelu(), shape(1, 4, 0), Recompute::kNone); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("layer shape: tp: expected a positive integer, got 0")));
}

// Korthikanti §4.3: the embedding dropout mask, sbh bytes (/t with SP); gpt3-175b at s 2048:
// sbh = 2048·12288 = 25'165'824.
TEST(EmbeddingActivationBytes, IsTheDropoutMaskOfGeluModelsOnly) {
  const ModelSpec gpt = model_preset("gpt3-175b");
  EXPECT_EQ(embedding_activation_bytes(gpt, shape(1, 2048, 8)), 25'165'824);
  EXPECT_EQ(embedding_activation_bytes(gpt, shape(1, 2048, 8, true)), 25'165'824 / 8);
  EXPECT_EQ(embedding_activation_bytes(model_preset("llama2-7b"), shape(1, 4096, 8)), 0);
}

// Korthikanti §4.3: final norm and LM head inputs 2sbh each (/t with SP) and fp32 logits 4sbv/t,
// with v the vocabulary as Megatron pads it: gpt3-175b's 50257 at t 8 becomes a multiple of
// 128·8, 51200, 6400 per rank. At s 2048: 4·25'165'824 + 4·2048·6400 = 100'663'296 + 52'428'800.
TEST(HeadActivationBytes, IsTheNormAndHeadInputsAndFp32Logits) {
  const ModelSpec gpt = model_preset("gpt3-175b");
  ASSERT_EQ(gpt.vocab, 50257);
  EXPECT_EQ(head_activation_bytes(gpt, shape(1, 2048, 8)), 100'663'296.0 + 52'428'800.0);
  EXPECT_EQ(head_activation_bytes(gpt, shape(1, 2048, 8, true)), 100'663'296.0 / 8 + 52'428'800.0);
}

}  // namespace
}  // namespace metron::models
