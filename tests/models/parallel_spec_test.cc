#include "metron/models/parallel_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/model_presets.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

// A model every size below divides unless a test changes it: 8 layers, 8 heads, 4 kv heads,
// ffn 32, sequence 16.
ModelSpec toy() {
  return {.name = "toy",
          .layers = 8,
          .hidden = 16,
          .heads = 8,
          .kv_heads = 4,
          .ffn_hidden = 32,
          .vocab = 10,
          .seq_len = 16};
}

ModelSpec toy_moe() {
  ModelSpec model = toy();
  model.name = "toy-moe";
  model.moe = MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 16};
  return model;
}

void expect_invalid(const ParallelSpec& spec, const ModelSpec& model, const std::string& message,
                    std::optional<std::int64_t> gpus = std::nullopt) {
  EXPECT_THAT([&] { validate(spec, model, gpus); },
              ThrowsMessage<InvalidConfig>(HasSubstr(message)));
}

TEST(ValidateParallel, TensorParallelOverlapNeedsSequenceParallelism) {
  expect_invalid({.tp = 2, .num_microbatches = 1, .tp_comm_overlap = true}, toy(),
                 "tp_comm_overlap needs sequence_parallel");
  EXPECT_NO_THROW(validate(
      ParallelSpec{
          .tp = 2, .sequence_parallel = true, .num_microbatches = 1, .tp_comm_overlap = true},
      toy()));
  EXPECT_NO_THROW(validate(ParallelSpec{.num_microbatches = 1, .tp_comm_overlap = true}, toy()));
}

TEST(ValidateParallel, Fp8NeedsAModelDtypeToCastFrom) {
  ModelSpec fp8_model = toy();
  fp8_model.dtype = Precision::kFp8;
  expect_invalid({.num_microbatches = 1, .fp8 = Fp8Recipe::kDelayed}, fp8_model,
                 "fp8 \"delayed\" needs a model dtype of bf16, fp16 or fp32");
  EXPECT_NO_THROW(validate(ParallelSpec{.num_microbatches = 1}, fp8_model));
  EXPECT_NO_THROW(validate(ParallelSpec{.num_microbatches = 1, .fp8 = Fp8Recipe::kCurrent}, toy()));
}

TEST(Recompute, NamesRoundTrip) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    EXPECT_EQ(parse_recompute(to_string(r)), r);
  }
  EXPECT_EQ(to_string(Recompute::kSelective), "selective");
  EXPECT_EQ(parse_recompute("partial"), std::nullopt);
}

TEST(ParallelSpec, MicrobatchesComeFromGlobalBatchOrAreGiven) {
  // 1536 / (1·8) = 192 (GPT-3 175B on 8 data-parallel replicas).
  EXPECT_EQ((ParallelSpec{.dp = 8, .global_batch = 1536}.microbatches()), 192);
  // 1536 / (2·8) = 96.
  EXPECT_EQ((ParallelSpec{.dp = 8, .microbatch_size = 2, .global_batch = 1536}.microbatches()), 96);
  EXPECT_EQ((ParallelSpec{.num_microbatches = 12}.microbatches()), 12);
  EXPECT_EQ((ParallelSpec{.dp = 7, .global_batch = 1536}.microbatches()), std::nullopt);
  EXPECT_EQ(ParallelSpec{}.microbatches(), std::nullopt);
}

TEST(ParallelSpec, SequenceParallelNeedsTensorParallel) {
  EXPECT_FALSE((ParallelSpec{.tp = 1, .sequence_parallel = true}.sp()));
  EXPECT_TRUE((ParallelSpec{.tp = 2, .sequence_parallel = true}.sp()));
  EXPECT_EQ((ParallelSpec{.seq_len = 4}.sequence_length(toy())), 4);
  EXPECT_EQ(ParallelSpec{}.sequence_length(toy()), 16);
}

// --- validate: valid configurations -------------------------------------------------------------

TEST(ValidateParallel, AcceptsGpt3OnMegatronsLayout) {
  // Narayanan et al. (SC'21), Table 1: GPT-3 175B with tp 8, pp 16 on 1024 GPUs, so dp =
  // 1024 / (8·16) = 8; global batch 1536 = 192 microbatches of 1 per replica. 96 layers / 16 = 6
  // per stage, 96 heads / 8 = 12 per tp rank, ffn 4·12288 = 49152 / 8 = 6144.
  const ParallelSpec spec{
      .tp = 8, .pp = 16, .dp = 8, .sequence_parallel = true, .global_batch = 1536};
  EXPECT_NO_THROW(validate(spec, model_preset("gpt3-175b"), 1024));
}

TEST(ValidateParallel, AcceptsLlama3405bWithInterleavingAndContextParallel) {
  // 126 layers / (pp 7 · vp 2) = 9 per chunk; 128 heads and 8 kv heads / tp 8; ffn 53248 / 8 =
  // 6656; sequence 8192 / (2·cp 2) = 2048 and 8192 / (cp 2 · tp 8) = 512; 2048 sequences per
  // batch / (1·8) = 256 microbatches; GPUs 8·7·8·2 = 896.
  const ParallelSpec spec{
      .tp = 8, .pp = 7, .dp = 8, .vp = 2, .cp = 2, .sequence_parallel = true, .global_batch = 2048};
  EXPECT_NO_THROW(validate(spec, model_preset("llama3-405b"), 896));
}

TEST(ValidateParallel, RejectsLlama3405bOnSixteenUniformStages) {
  // Llama 3 (Dubey et al. 2024, §3.3.2) ran 405B on pp 16 by removing one layer from the first
  // and the last stage; metron's stages hold equal layer counts, so 126 layers on 16 do not fit.
  const ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .cp = 1, .global_batch = 2048};
  expect_invalid(spec, model_preset("llama3-405b"),
                 "invalid parallel configuration for model \"llama3-405b\": layers (126) must be "
                 "divisible by pp·vp (16·1 = 16)",
                 1024);
}

// Note [uneven stages]: Megatron-Core's first/last pipeline-rank counts, the rest even.
//   first 7, last 7: (126 - 7 - 7) / 14 = 8 on each other rank;
//   first 6 only: (126 - 6) / 15 = 8.
TEST(ValidateParallel, AcceptsLlama3405bOnSixteenStagesWithLighterEnds) {
  ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  spec.first_stage_layers = 7;
  spec.last_stage_layers = 7;
  EXPECT_NO_THROW(validate(spec, model_preset("llama3-405b"), 1024));
  std::vector<std::int64_t> expected(16, 8);
  expected.front() = 7;
  expected.back() = 7;
  EXPECT_EQ(pipeline_rank_layers(model_preset("llama3-405b"), spec), expected);
  spec.last_stage_layers.reset();
  spec.first_stage_layers = 6;
  expected.assign(16, 8);
  expected.front() = 6;
  EXPECT_EQ(pipeline_rank_layers(model_preset("llama3-405b"), spec), expected);
  // Even splits: layers/pp on every rank.
  EXPECT_EQ(pipeline_rank_layers(model_preset("gpt3-175b"), ParallelSpec{.pp = 8}),
            std::vector<std::int64_t>(8, 12));
}

TEST(ValidateParallel, RejectsUnevenStagesThatDoNotAddUp) {
  const ModelSpec& llama = model_preset("llama3-405b");
  ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  spec.first_stage_layers = 5;  // 121 over 15 ranks
  expect_invalid(spec, llama,
                 "invalid parallel configuration for model \"llama3-405b\": layers (126) - "
                 "first_stage_layers (5) = 121 must split evenly, at least one each, over the 15 "
                 "other pipeline ranks");
  spec.first_stage_layers = 7;
  spec.last_stage_layers = 7;
  spec.vp = 2;  // 7 layers on two chunks
  expect_invalid(spec, llama,
                 "invalid parallel configuration for model \"llama3-405b\": 2 problems\n"
                 "  - first_stage_layers (7) must be divisible by vp (2)\n"
                 "  - last_stage_layers (7) must be divisible by vp (2)");
  spec.vp = 1;
  spec.pp = 1;
  spec.tp = 8;
  spec.dp = 8;
  expect_invalid(spec, llama,
                 "invalid parallel configuration for model \"llama3-405b\": first_stage_layers "
                 "(7) - last_stage_layers (7) needs pp > 1 (pp = 1)");
  spec.pp = 2;  // the two ranks must hold all 126
  expect_invalid(spec, llama,
                 "invalid parallel configuration for model \"llama3-405b\": layers (126) - "
                 "first_stage_layers (7) - last_stage_layers (7) = 112; expected 0, as the two "
                 "ranks hold every layer");
  EXPECT_THAT([&] { (void)pipeline_rank_layers(llama, spec); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expected 0, as the two ranks")));
}

// pipeline_layers names every rank's count: 7, 8 x 14, 7 is what first/last 7 give; 8 x 15, 6
// (a split first/last cannot express) works as well, on two chunks each too.
TEST(ValidateParallel, AcceptsAnExplicitListOfEveryRanksLayers) {
  const ModelSpec& llama = model_preset("llama3-405b");
  ParallelSpec ends{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  ends.first_stage_layers = 7;
  ends.last_stage_layers = 7;
  ParallelSpec listed{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  listed.pipeline_layers = pipeline_rank_layers(llama, ends);
  EXPECT_NO_THROW(validate(listed, llama, 1024));
  EXPECT_TRUE(listed.uneven_split());
  EXPECT_EQ(pipeline_rank_layers(llama, listed), pipeline_rank_layers(llama, ends));
  listed.pipeline_layers.assign(16, 8);
  listed.pipeline_layers.back() = 6;
  listed.vp = 2;
  EXPECT_NO_THROW(validate(listed, llama, 1024));
  EXPECT_EQ(pipeline_rank_layers(llama, listed), listed.pipeline_layers);
  EXPECT_FALSE(ParallelSpec{}.uneven_split());
}

TEST(ValidateParallel, RejectsAListThatDoesNotAddUp) {
  const ModelSpec& llama = model_preset("llama3-405b");
  const std::string where = "invalid parallel configuration for model \"llama3-405b\": ";
  ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  spec.pipeline_layers = {63, 63};
  expect_invalid(spec, llama,
                 where + "pipeline_layers has 2 counts; expected one per pipeline rank, pp = 16");
  spec.pipeline_layers.assign(16, 8);
  expect_invalid(spec, llama,
                 where + "pipeline_layers add up to 128; expected the model's layers (126)");
  spec.pipeline_layers.back() = 6;
  spec.pipeline_layers.front() = 0;
  expect_invalid(spec, llama, where + "pipeline_layers[0]: expected a positive integer, got 0");
  spec.pipeline_layers.front() = 8;
  spec.pipeline_layers[1] = 7;
  spec.pipeline_layers[2] = 9;
  spec.vp = 2;
  expect_invalid(spec, llama,
                 where +
                     "2 problems\n  - pipeline_layers[1] (7) must be divisible by vp (2)\n"
                     "  - pipeline_layers[2] (9) must be divisible by vp (2)");
  spec.vp = 1;
  spec.first_stage_layers = 8;
  expect_invalid(spec, llama,
                 where +
                     "pipeline_layers names every rank's layers; expected no "
                     "first_stage_layers or last_stage_layers beside it");
}

// Megatron-Core's account_for_embedding/loss_in_pipeline_split (get_transformer_layer_offset):
// Llama 3 405B's 126 layers + embedding + loss = 128 over pp 16 · vp 2 virtual stages are 4 each,
// the first and the last 3; rank 0 runs stages 0 and 16 (3 + 4), rank 15 stages 15 and 31 (4 + 3).
// With one chunk per rank it is first/last 7, as Meta ran it.
TEST(ValidateParallel, AccountsForTheEmbeddingAndTheLossAsMegatronDoes) {
  const ModelSpec& llama = model_preset("llama3-405b");
  ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .vp = 2, .global_batch = 2048};
  spec.account_for_embedding_in_pipeline_split = true;
  spec.account_for_loss_in_pipeline_split = true;
  EXPECT_TRUE(spec.uneven_split());
  EXPECT_NO_THROW(validate(spec, llama, 1024));
  std::vector<std::int64_t> stages(32, 4);
  stages.front() = 3;
  stages.back() = 3;
  EXPECT_EQ(virtual_stage_layers(llama, spec), stages);
  std::vector<std::int64_t> ranks(16, 8);
  ranks.front() = 7;
  ranks.back() = 7;
  EXPECT_EQ(pipeline_rank_layers(llama, spec), ranks);
  spec.vp = 1;
  ParallelSpec ends{.tp = 8, .pp = 16, .dp = 8, .global_batch = 2048};
  ends.first_stage_layers = 7;
  ends.last_stage_layers = 7;
  EXPECT_EQ(pipeline_rank_layers(llama, spec), pipeline_rank_layers(llama, ends));
  // The embedding alone: 127 does not divide over 16.
  const std::string where = "invalid parallel configuration for model \"llama3-405b\": ";
  spec.account_for_loss_in_pipeline_split = false;
  expect_invalid(
      spec, llama,
      where + "layers (126) + embedding (1) = 127 must be divisible by pp·vp (16·1 = 16)");
  // Beside another form of split, and with a virtual stage left empty.
  spec.account_for_loss_in_pipeline_split = true;
  spec.first_stage_layers = 7;
  expect_invalid(spec, llama,
                 where +
                     "account_for_embedding/loss_in_pipeline_split split the layers themselves; "
                     "expected no first_stage_layers, last_stage_layers or pipeline_layers beside "
                     "them");
  spec.first_stage_layers.reset();
  spec.pp = 64;
  spec.vp = 2;  // 128 over 128 virtual stages: 1 each, the edges 0
  expect_invalid(spec, llama,
                 where +
                     "layers (126) + embedding (1) + loss (1) = 128 over pp·vp = 128 leaves a "
                     "virtual stage without a layer; expected at least one each");
}

TEST(ValidateParallel, AcceptsAnMoeModelWithExpertParallel) {
  // 8 experts / ep 4 = 2 per rank; dp·cp = 4·2 = 8 ranks / ep 4 = 2 expert replicas.
  const ParallelSpec spec{.dp = 4, .cp = 2, .ep = 4, .num_microbatches = 4};
  EXPECT_NO_THROW(validate(spec, toy_moe(), 8));
}

TEST(ValidateParallel, IgnoresSequenceParallelAtTpOne) {
  // Megatron turns sequence parallelism off at tp = 1 rather than failing; sequence 15 is not
  // divisible by anything relevant here, and yet nothing is reported.
  const ParallelSpec spec{.sequence_parallel = true, .num_microbatches = 1, .seq_len = 15};
  EXPECT_NO_THROW(validate(spec, toy()));
}

TEST(ValidateParallel, AcceptsMatchingGlobalBatchAndMicrobatches) {
  // 64 / (2·4) = 8.
  const ParallelSpec spec{.dp = 4, .microbatch_size = 2, .global_batch = 64, .num_microbatches = 8};
  EXPECT_NO_THROW(validate(spec, toy()));
}

// --- validate: one test per rule ----------------------------------------------------------------

TEST(ValidateParallel, RejectsNonPositiveSizes) {
  const std::string where = "invalid parallel configuration for model \"toy\": ";
  expect_invalid({.tp = 0, .num_microbatches = 1}, toy(),
                 where + "tp: expected a positive integer, got 0");
  expect_invalid({.pp = -2, .num_microbatches = 1}, toy(),
                 where + "pp: expected a positive integer, got -2");
  expect_invalid({.dp = 0, .num_microbatches = 1}, toy(), "dp: expected a positive integer, got 0");
  expect_invalid({.vp = 0, .num_microbatches = 1}, toy(), "vp: expected a positive integer, got 0");
  expect_invalid({.cp = 0, .num_microbatches = 1}, toy(), "cp: expected a positive integer, got 0");
  expect_invalid({.ep = 0, .num_microbatches = 1}, toy(), "ep: expected a positive integer, got 0");
  expect_invalid({.microbatch_size = 0, .num_microbatches = 1}, toy(),
                 "microbatch_size: expected a positive integer, got 0");
  expect_invalid({.global_batch = 0}, toy(), "global_batch: expected a positive integer, got 0");
  expect_invalid({.num_microbatches = -1}, toy(),
                 "num_microbatches: expected a positive integer, got -1");
  expect_invalid({.num_microbatches = 1, .seq_len = 0}, toy(),
                 "seq_len: expected a positive integer, got 0");
}

TEST(ValidateParallel, RejectsLayersNotDivisibleByPpTimesVp) {
  // GPT-3's 96 layers on pp 16 with 4 chunks each need 64 | 96, which fails.
  const ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .vp = 4, .global_batch = 1536};
  expect_invalid(spec, model_preset("gpt3-175b"),
                 "invalid parallel configuration for model \"gpt3-175b\": layers (96) must be "
                 "divisible by pp·vp (16·4 = 64)");
}

TEST(ValidateParallel, RejectsInterleavingWithoutPipeline) {
  expect_invalid({.vp = 2, .num_microbatches = 1}, toy(), "vp (2) needs pp > 1 (pp = 1)");
}

TEST(ValidateParallel, RejectsHeadsNotDivisibleByTp) {
  expect_invalid({.tp = 5, .num_microbatches = 1}, model_preset("gpt3-175b"),
                 "heads (96) must be divisible by tp (5)");
}

TEST(ValidateParallel, RejectsKvHeadsNotDivisibleByTp) {
  // toy: 8 heads divide by tp 8, its 4 kv heads (Megatron's query groups) do not.
  expect_invalid({.tp = 8, .num_microbatches = 1}, toy(),
                 "kv_heads (4) must be divisible by tp (8)");
}

TEST(ValidateParallel, ReportsKvHeadsOnlyWhenTheyDifferFromHeads) {
  // With kv_heads = heads the heads message already names the cause.
  ModelSpec model = toy();
  model.kv_heads.reset();
  EXPECT_THAT([&] { validate({.tp = 3, .num_microbatches = 1}, model); },
              ThrowsMessage<InvalidConfig>(Not(HasSubstr("kv_heads"))));
}

TEST(ValidateParallel, RejectsFfnNotDivisibleByTp) {
  ModelSpec model = toy();
  model.ffn_hidden = 36;  // 8 heads (and kv heads) divide by tp 8, 36 % 8 = 4 does not
  model.kv_heads = 8;
  expect_invalid({.tp = 8, .num_microbatches = 1}, model,
                 "invalid parallel configuration for model \"toy\": ffn_hidden (36) must be "
                 "divisible by tp (8)");
}

TEST(ValidateParallel, RejectsSequenceNotDivisibleByTpUnderSequenceParallel) {
  // 18 % 4 = 2.
  expect_invalid({.tp = 4, .sequence_parallel = true, .num_microbatches = 1, .seq_len = 18}, toy(),
                 "seq_len (18) must be divisible by tp (4) with sequence_parallel");
  EXPECT_NO_THROW(validate({.tp = 4, .num_microbatches = 1, .seq_len = 18}, toy()));
}

TEST(ValidateParallel, RejectsSequenceNotDivisibleByCpTimesTpUnderSequenceParallel) {
  // 24 divides by 2·cp = 8 and by tp = 8, but each cp rank keeps 24 / 4 = 6 tokens for 8 tp ranks.
  ModelSpec model = toy();
  model.kv_heads = 8;
  expect_invalid(
      {.tp = 8, .cp = 4, .sequence_parallel = true, .num_microbatches = 1, .seq_len = 24}, model,
      "invalid parallel configuration for model \"toy\": seq_len (24) must be divisible by cp·tp "
      "(4·8 = 32) with sequence_parallel");
}

TEST(ValidateParallel, RejectsSequenceNotDivisibleByTwiceCp) {
  // 18 % (2·3) = 0 but 20 % 6 = 2.
  EXPECT_NO_THROW(validate({.cp = 3, .num_microbatches = 1, .seq_len = 18}, toy()));
  expect_invalid({.cp = 3, .num_microbatches = 1, .seq_len = 20}, toy(),
                 "invalid parallel configuration for model \"toy\": seq_len (20) must be divisible "
                 "by 2·cp (2·3 = 6) with cp > 1");
}

TEST(ValidateParallel, RejectsNeitherGlobalBatchNorMicrobatches) {
  expect_invalid({}, toy(),
                 "invalid parallel configuration for model \"toy\": global_batch or "
                 "num_microbatches must be set");
}

TEST(ValidateParallel, RejectsGlobalBatchNotDivisibleByMicrobatchTimesDp) {
  // 1536 = 2^9·3 has no factor 7.
  expect_invalid({.dp = 7, .global_batch = 1536}, toy(),
                 "global_batch (1536) must be divisible by microbatch_size·dp (1·7 = 7)");
}

TEST(ValidateParallel, RejectsMicrobatchesDisagreeingWithGlobalBatch) {
  // 64 / (2·4) = 8, not 6.
  expect_invalid({.dp = 4, .microbatch_size = 2, .global_batch = 64, .num_microbatches = 6}, toy(),
                 "num_microbatches (6) must equal global_batch / (microbatch_size·dp) "
                 "(64 / (2·4) = 8)");
}

TEST(ValidateParallel, RejectsExpertParallelOnADenseModel) {
  expect_invalid({.dp = 2, .ep = 2, .num_microbatches = 1}, toy(),
                 "invalid parallel configuration for model \"toy\": ep (2) needs a "
                 "mixture-of-experts model (\"moe\" in the model)");
}

TEST(ValidateParallel, RejectsExpertsNotDivisibleByEp) {
  ModelSpec model = toy_moe();
  model.moe->experts = 6;  // 6 % 4 = 2
  expect_invalid({.dp = 4, .ep = 4, .num_microbatches = 1}, model,
                 "invalid parallel configuration for model \"toy-moe\": moe.experts (6) must be "
                 "divisible by ep (4)");
}

TEST(ValidateParallel, RejectsDpTimesCpNotDivisibleByEp) {
  // dp·cp = 3·2 = 6 ranks cannot hold 4 expert-parallel ranks evenly.
  expect_invalid({.dp = 3, .cp = 2, .ep = 4, .num_microbatches = 1}, toy_moe(),
                 "dp·cp (3·2 = 6) must be divisible by ep (4)");
}

TEST(ValidateParallel, RejectsGpusNotMatchingTheProduct) {
  // 8·16·8·1 = 1024.
  const ParallelSpec spec{.tp = 8, .pp = 16, .dp = 8, .global_batch = 1536};
  expect_invalid(spec, model_preset("gpt3-175b"),
                 "invalid parallel configuration for model \"gpt3-175b\": gpus (1000) must equal "
                 "tp·pp·dp·cp (8·16·8·1 = 1024)",
                 1000);
  EXPECT_NO_THROW(validate(spec, model_preset("gpt3-175b")));  // no gpus given: not checked
}

TEST(ValidateParallel, ListsEveryProblemTogether) {
  // 96 % (16·4) = 32, 96 % 5 = 1, 49152 % 5 = 2, 1536 % 7 = 3, 7 % 2 = 1, 5·16·7·1 = 560.
  const ParallelSpec spec{.tp = 5, .pp = 16, .dp = 7, .vp = 4, .ep = 2, .global_batch = 1536};
  expect_invalid(spec, model_preset("gpt3-175b"),
                 "invalid parallel configuration for model \"gpt3-175b\": 7 problems\n"
                 "  - layers (96) must be divisible by pp·vp (16·4 = 64)\n"
                 "  - heads (96) must be divisible by tp (5)\n"
                 "  - ffn_hidden (49152) must be divisible by tp (5)\n"
                 "  - global_batch (1536) must be divisible by microbatch_size·dp (1·7 = 7)\n"
                 "  - ep (2) needs a mixture-of-experts model (\"moe\" in the model)\n"
                 "  - dp·cp (7·1 = 7) must be divisible by ep (2)\n"
                 "  - gpus (1000) must equal tp·pp·dp·cp (5·16·7·1 = 560)",
                 1000);
}

// --- JSON ---------------------------------------------------------------------------------------

ParallelSpec every_field() {
  return {.tp = 8,
          .pp = 16,
          .dp = 4,
          .vp = 2,
          .cp = 2,
          .ep = 4,
          .sequence_parallel = true,
          .microbatch_size = 2,
          .global_batch = 1024,
          .num_microbatches = 128,
          .seq_len = 4096,
          .recompute = Recompute::kSelective,
          .attention = AttentionKernel::kFused,
          .tp_comm_overlap = true,
          .fp8 = Fp8Recipe::kDelayed,
          .scatter_gather_p2p = true,
          .first_stage_layers = 3,
          .last_stage_layers = 5};
}

TEST(ParallelJson, WritesEveryKeyInCanonicalOrder) {
  EXPECT_EQ(to_json(every_field()),
            R"({"tp":8,"pp":16,"dp":4,"vp":2,"cp":2,"ep":4,"sequence_parallel":true,)"
            R"("microbatch_size":2,"global_batch":1024,"num_microbatches":128,"seq_len":4096,)"
            R"("recompute":"selective","attention":"fused","tp_comm_overlap":true,"fp8":"delayed",)"
            R"("scatter_gather_p2p":true,"first_stage_layers":3,"last_stage_layers":5})"
            "\n");
}

TEST(ParallelJson, WritesUnsetOptionalsAsNull) {
  EXPECT_EQ(to_json(ParallelSpec{}),
            R"({"tp":1,"pp":1,"dp":1,"vp":1,"cp":1,"ep":1,"sequence_parallel":false,)"
            R"("microbatch_size":1,"global_batch":null,"num_microbatches":null,"seq_len":null,)"
            R"("recompute":"none","attention":"unfused","tp_comm_overlap":false,"fp8":"off",)"
            R"("scatter_gather_p2p":false,"first_stage_layers":null,"last_stage_layers":null})"
            "\n");
}

// pipeline_layers is written only when given, after the other keys.
TEST(ParallelJson, WritesAndReadsTheListOfEveryRanksLayers) {
  ParallelSpec spec{.pp = 3};
  spec.pipeline_layers = {2, 1, 3};
  EXPECT_THAT(to_json(spec), HasSubstr(R"("last_stage_layers":null,"pipeline_layers":[2,1,3]})"));
  EXPECT_EQ(parallel_from_json(to_json(spec)), spec);
  EXPECT_EQ(parallel_from_json(R"({"pipeline_layers":null})"), ParallelSpec{});
  EXPECT_THAT([] { (void)parallel_from_json(R"({"pipeline_layers":8})", "p.json"); },
              ThrowsMessage<ParseError>(HasSubstr(
                  "pipeline_layers: expected a list of positive layer counts, one per pipeline "
                  "rank, got 8")));
  EXPECT_THAT([] { (void)parallel_from_json(R"({"pipeline_layers":[8,-1]})", "p.json"); },
              ThrowsMessage<ParseError>(
                  HasSubstr("pipeline_layers[1]: expected a positive integer, got -1")));
}

// The accounted split is written only when set, after the other keys.
TEST(ParallelJson, WritesAndReadsTheAccountedSplit) {
  ParallelSpec spec{.pp = 4};
  EXPECT_THAT(to_json(spec), Not(HasSubstr("account_for")));
  spec.account_for_embedding_in_pipeline_split = true;
  EXPECT_THAT(to_json(spec), HasSubstr(R"("account_for_embedding_in_pipeline_split":true})"));
  EXPECT_EQ(parallel_from_json(to_json(spec)), spec);
  spec.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(parallel_from_json(to_json(spec)), spec);
  EXPECT_THAT(
      [] { (void)parallel_from_json(R"({"account_for_loss_in_pipeline_split":1})", "p.json"); },
      ThrowsMessage<ParseError>(HasSubstr("account_for_loss_in_pipeline_split")));
}

TEST(ParallelJson, RoundTrips) {
  EXPECT_EQ(parallel_from_json(to_json(every_field())), every_field());
  EXPECT_EQ(parallel_from_json(to_json(ParallelSpec{})), ParallelSpec{});
  ParallelSpec full_recompute = every_field();
  full_recompute.recompute = Recompute::kFull;
  full_recompute.global_batch.reset();
  EXPECT_EQ(parallel_from_json(to_json(full_recompute)), full_recompute);
}

TEST(Fp8Recipe, NamesRoundTrip) {
  for (const Fp8Recipe recipe : {Fp8Recipe::kOff, Fp8Recipe::kDelayed, Fp8Recipe::kCurrent}) {
    EXPECT_EQ(parse_fp8_recipe(to_string(recipe)), recipe);
  }
  EXPECT_EQ(parse_fp8_recipe("hybrid"), std::nullopt);
}

TEST(ParallelJson, AnUnknownFp8RecipeIsNamed) {
  EXPECT_THAT([] { (void)parallel_from_json(R"({"fp8":"mxfp8"})", "p.json"); },
              ::testing::ThrowsMessage<ParseError>(
                  ::testing::AllOf(::testing::HasSubstr("fp8"), ::testing::HasSubstr("mxfp8"))));
}

TEST(ParallelJson, AnUnknownAttentionKernelIsNamed) {
  EXPECT_THROW(
      {
        try {
          parallel_from_json(R"({"attention":"flash"})", "p.json");
        } catch (const ParseError& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("attention"));
          throw;
        }
      },
      ParseError);
}

TEST(ParallelJson, ReadsDefaultsForMissingKeys) {
  EXPECT_EQ(parallel_from_json("{}"), ParallelSpec{});
  const ParallelSpec spec = parallel_from_json(R"({"tp":8,"global_batch":512})");
  EXPECT_EQ(spec, (ParallelSpec{.tp = 8, .global_batch = 512}));
}

TEST(ParallelJson, ReadsNullOptionalsAsUnset) {
  EXPECT_EQ(parallel_from_json(R"({"global_batch":null,"num_microbatches":null,"seq_len":null})"),
            ParallelSpec{});
}

void expect_parse_error(const std::string& text, const std::string& message) {
  EXPECT_THAT([&] { (void)parallel_from_json(text, "parallel.json"); },
              ThrowsMessage<ParseError>(HasSubstr(message)))
      << text;
}

TEST(ParallelJson, RejectsNonPositiveSizesNamingTheKey) {
  expect_parse_error(R"({"tp":0})", "parallel.json: tp: expected a positive integer, got 0");
  expect_parse_error(R"({"pp":-1})", "parallel.json: pp: expected a positive integer, got -1");
  expect_parse_error(R"({"dp":2.5})", "parallel.json: dp: expected a positive integer, got 2.5");
  expect_parse_error(R"({"ep":"4"})", "parallel.json: ep: expected a positive integer, got \"4\"");
  expect_parse_error(R"({"microbatch_size":0})",
                     "parallel.json: microbatch_size: expected a positive integer, got 0");
  expect_parse_error(R"({"global_batch":0})",
                     "parallel.json: global_batch: expected a positive integer, got 0");
  expect_parse_error(R"({"num_microbatches":true})",
                     "parallel.json: num_microbatches: expected a positive integer, got true");
  expect_parse_error(R"({"seq_len":-4096})",
                     "parallel.json: seq_len: expected a positive integer, got -4096");
}

TEST(ParallelJson, RejectsNullForNonOptionalSizes) {
  expect_parse_error(R"({"vp":null})", "parallel.json: vp: expected a positive integer, got null");
}

TEST(ParallelJson, RejectsWrongTypes) {
  expect_parse_error(R"({"sequence_parallel":1})",
                     "parallel.json: sequence_parallel: expected true or false, got 1");
  expect_parse_error(R"({"recompute":"partial"})",
                     "parallel.json: recompute: expected one of \"none\", \"selective\", "
                     "\"full\", got \"partial\"");
  expect_parse_error(R"({"recompute":null})",
                     "parallel.json: recompute: expected one of \"none\", \"selective\", "
                     "\"full\", got null");
  expect_parse_error("[8]", "parallel.json: top level: expected an object, got [8]");
}

TEST(ParallelJson, RejectsMalformedJsonWithItsPosition) {
  expect_parse_error("{\n  \"tp\": }", "parallel.json:2:9: malformed JSON");
}

TEST(ParallelJson, CountsUnknownKeys) {
  Diagnostics diagnostics;
  const ParallelSpec spec =
      parallel_from_json(R"({"tp":2,"zero":1,"vpp":2})", "parallel.json", &diagnostics);
  EXPECT_EQ(spec.tp, 2);
  EXPECT_EQ(diagnostics.count("unknown_key"), 2u);
  EXPECT_THAT(diagnostics.messages(),
              ::testing::ElementsAre(::testing::StartsWith("zero: unknown key"),
                                     ::testing::StartsWith("vpp: unknown key")));
}

TEST(ParallelJson, DoesNotValidateAgainstAModel) {
  // vp 2 with pp 1 is a problem only validate() can see alongside a model; reading accepts it.
  EXPECT_EQ(parallel_from_json(R"({"vp":2})").vp, 2);
}

// Issue 14: sizes that would hang or exhaust memory are refused naming the value and the limit.
TEST(ParallelSpecValidation, RefusesSizesAboveTheirLimits) {
  EXPECT_THAT([] { validate(ParallelSpec{.num_microbatches = 1'000'000'000}, toy()); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "num_microbatches: expected at most 65536 (the limit of microbatches per "
                  "iteration), got 1000000000")));
  EXPECT_THAT([] { validate(ParallelSpec{.global_batch = 1'000'000'000'000'000'000}, toy()); },
              ThrowsMessage<InvalidConfig>(HasSubstr("global_batch: expected at most 16777216")));
  // The product of sizes is checked without overflowing.
  EXPECT_THAT(
      [] {
        validate(ParallelSpec{.tp = 1 << 20, .pp = 1 << 20, .dp = 1 << 23, .num_microbatches = 1},
                 toy());
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("tp·pp·dp·cp (1048576·1048576·8388608·1 = overflow)"
                                             ": expected at most 1048576")));
  EXPECT_THAT([] { validate_sizes(ParallelSpec{.pp = 4096, .vp = 64, .num_microbatches = 65536}); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("microbatches·pp·vp (65536·4096·64 = 17179869184): expected at most "
                            "4194304")));
  EXPECT_NO_THROW(validate_sizes(ParallelSpec{.pp = 8, .num_microbatches = 65536}));
}

}  // namespace
}  // namespace metron::models
