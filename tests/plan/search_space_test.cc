// The plan space (plan_request.h, Note [plan space]) and the rules that drop configurations
// before anything is estimated (search_space.h).

#include "metron/plan/search_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/models/parallel_spec.h"

namespace metron::plan {
namespace {

PlanRequest request(std::string_view model, std::int64_t gpus, std::int64_t global_batch) {
  PlanRequest r;
  r.model = models::model_preset(model);
  r.hardware = models::hardware_preset("dgx-h100");
  r.gpus = gpus;
  r.global_batch = global_batch;
  r.seq_len = 2048;
  return r;
}

const DroppedFamily* find_family(const SearchSpace& s, DropReason reason, std::string_view family) {
  const auto it = std::find_if(s.dropped.begin(), s.dropped.end(), [&](const DroppedFamily& f) {
    return f.reason == reason && f.family == family;
  });
  return it == s.dropped.end() ? nullptr : &*it;
}

TEST(SearchSpace, CountsATinySpaceByHand) {
  // gpt3-1.3b on 8 GPUs, batch 8, tp and pp in {1, 2}, 1F1B, no recompute, microbatch 1:
  // dp ranges over the divisors of 8 with tp·pp·dp <= 8, so (tp, pp) = (1, 1) has dp 1, 2, 4, 8;
  // (1, 2) and (2, 1) have 1, 2, 4; (2, 2) has 1, 2: 4 + 3 + 3 + 2 = 12.
  PlanRequest r = request("gpt3-1.3b", 8, 8);
  r.space.tp = {1, 2};
  r.space.pp = {1, 2};
  r.space.schedules = {"1f1b"};
  r.space.recompute = {models::Recompute::kNone};
  r.space.max_microbatch_size = 1;
  const SearchSpace s = enumerate_space(r);
  EXPECT_EQ(s.candidates.size(), 12U);
  for (const Candidate& c : s.candidates) {
    EXPECT_EQ(c.parallel.microbatch_size, 1);
    EXPECT_EQ(c.parallel.sequence_parallel, c.parallel.tp > 1);  // Megatron's recommendation
    EXPECT_EQ(c.schedule, "1f1b");
    EXPECT_EQ(c.policy, sync::SyncPolicy::kMegatronDistopt);
    // The kernel options stay at the scenario's defaults unless listed.
    EXPECT_EQ(c.parallel.attention, models::AttentionKernel::kUnfused);
    EXPECT_EQ(c.parallel.fp8, models::Fp8Recipe::kOff);
    EXPECT_FALSE(c.parallel.tp_comm_overlap);
  }
}

TEST(SearchSpace, SearchesTheKernelOptionsWhereListed) {
  // The tiny space above at pp 1 (tp 1: dp 1, 2, 4, 8; tp 2: dp 1, 2, 4), each with both
  // attention kernels and fp8 off and delayed; the overlap on is tried only at tp 2, where
  // sequence parallelism is on: 4·2·2·1 + 3·2·2·2 = 16 + 24 = 40.
  PlanRequest r = request("gpt3-1.3b", 8, 8);
  r.space.tp = {1, 2};
  r.space.pp = {1};
  r.space.schedules = {"1f1b"};
  r.space.recompute = {models::Recompute::kNone};
  r.space.max_microbatch_size = 1;
  r.space.attention = {models::AttentionKernel::kUnfused, models::AttentionKernel::kFused};
  r.space.fp8 = {models::Fp8Recipe::kOff, models::Fp8Recipe::kDelayed};
  r.space.tp_comm_overlap = {false, true};
  const SearchSpace s = enumerate_space(r);
  EXPECT_EQ(s.candidates.size(), 40U);
  std::set<std::tuple<std::int64_t, std::int64_t, int, int, bool>> seen;
  for (const Candidate& c : s.candidates) {
    EXPECT_NO_THROW(models::validate(c.parallel, r.model, c.parallel.gpus())) << describe(c);
    if (c.parallel.tp_comm_overlap) {
      EXPECT_TRUE(c.parallel.tp == 2 && c.parallel.sp()) << describe(c);
    }
    EXPECT_TRUE(seen.emplace(c.parallel.tp, c.parallel.dp, static_cast<int>(c.parallel.attention),
                             static_cast<int>(c.parallel.fp8), c.parallel.tp_comm_overlap)
                    .second)
        << "twice: " << describe(c);
  }
  // Without sequence parallelism the overlap is not tried: 3 dp × 2 × 2 at tp 2.
  r.space.tp = {2};
  r.space.sequence_parallel = {false};
  EXPECT_EQ(enumerate_space(r).candidates.size(), 12U);
}

// Context parallelism is searched by default only for long sequences: powers of two that leave
// each rank at least 8,192 tokens, 2·cp dividing the sequence.
TEST(SearchSpace, SearchesContextParallelismForLongSequences) {
  EXPECT_EQ(default_context_parallel_sizes(2048), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(default_context_parallel_sizes(8192), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(default_context_parallel_sizes(32768), (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(default_context_parallel_sizes(131072), (std::vector<std::int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(default_context_parallel_sizes(24576), (std::vector<std::int64_t>{1, 2}));  // 3·8192
  PlanRequest r = request("gpt3-1.3b", 64, 16);
  r.seq_len = 32768;
  r.space.tp = {1};
  r.space.schedules = {"1f1b"};
  std::set<std::int64_t> cps;
  for (const Candidate& c : enumerate_space(r).candidates) cps.insert(c.parallel.cp);
  EXPECT_EQ(cps, (std::set<std::int64_t>{1, 2, 4}));
  r.seq_len = 2048;
  const SearchSpace short_seq = enumerate_space(r);
  ASSERT_FALSE(short_seq.candidates.empty());
  for (const Candidate& c : short_seq.candidates) EXPECT_EQ(c.parallel.cp, 1);
}

TEST(SearchSpace, EveryCandidatePassesTheModelsValidationWithinTheGpusAndBatch) {
  // An independent check of the enumeration's divisibility rules: models::validate.
  PlanRequest r = request("gpt3-13b", 64, 128);
  r.space.schedules = {"1f1b", "interleaved-1f1b", "zb-v"};
  const SearchSpace s = enumerate_space(r);
  ASSERT_GT(s.candidates.size(), 100U);
  for (const Candidate& c : s.candidates) {
    EXPECT_NO_THROW(models::validate(c.parallel, r.model, c.parallel.gpus())) << describe(c);
    EXPECT_LE(c.parallel.gpus(), 64) << describe(c);
    EXPECT_EQ(*c.parallel.microbatches() * c.parallel.microbatch_size * c.parallel.dp, 128)
        << describe(c);
  }
}

TEST(SearchSpace, SplitsLayersUnevenlyWhereTheyDoNotDivideAndDropsWhatSplitsNeitherWay) {
  // Turing-NLG's 105 layers, by hand: pp = 2 splits them 52 + 53 with one chunk per rank and
  // 51 + 54 with 3 (whole chunks); with 2 chunks, or with pp = 5 and 2 chunks, every rank's
  // layers would be even and 105 is odd; pp = 4 cannot (the two middle ranks hold
  // 105 − 2·edge, odd, which 2 does not divide); pp = 5 with 3 chunks divides evenly (7 each).
  PlanRequest r = request("turing-530b", 4096, 2520);
  r.space.tp = {8};
  r.space.pp = {2, 4, 5};
  r.space.schedules = {"1f1b", "interleaved-1f1b"};
  r.space.vp = {2, 3};
  const SearchSpace s = enumerate_space(r);
  const DroppedFamily* pp4 = find_family(s, DropReason::kLayers, "tp=8 pp=4");
  ASSERT_NE(pp4, nullptr);
  EXPECT_EQ(pp4->detail,
            "layers (105) split over pp = 4 neither evenly nor with lighter first and last ranks");
  const DroppedFamily* vp2 = find_family(s, DropReason::kLayers, "tp=8 pp=5 interleaved-1f1b vp=2");
  ASSERT_NE(vp2, nullptr);
  EXPECT_NE(vp2->detail.find("105"), std::string::npos);
  EXPECT_EQ(find_family(s, DropReason::kLayers, "tp=8 pp=5 interleaved-1f1b vp=3"), nullptr);
  EXPECT_NE(find_family(s, DropReason::kLayers, "tp=8 pp=2 interleaved-1f1b vp=2"), nullptr);
  bool saw_pp2 = false;
  for (const Candidate& c : s.candidates) {
    EXPECT_NE(c.parallel.pp, 4);
    EXPECT_FALSE(c.parallel.pp == 5 && c.parallel.vp == 2);
    if (c.parallel.pp == 2) {
      saw_pp2 = true;
      EXPECT_NE(c.parallel.vp, 2);
      EXPECT_EQ(c.parallel.first_stage_layers, c.parallel.vp == 3 ? 51 : 52);
      EXPECT_EQ(c.parallel.last_stage_layers, c.parallel.vp == 3 ? 54 : 53);
    } else {
      EXPECT_EQ(c.parallel.first_stage_layers, std::nullopt) << describe(c);
    }
    EXPECT_NO_THROW(models::validate(c.parallel, r.model, c.parallel.gpus())) << describe(c);
  }
  EXPECT_TRUE(saw_pp2);
}

TEST(SearchSpace, SplitsLlama3405bOnSixteenStagesAsMetaDid) {
  // 126 layers on pp 16: 7 + 14 · 8 + 7 (the Llama 3 paper's first and last stages one layer
  // short). With 2 chunks per rank no whole-chunk edge counts exist (each rank's layers even,
  // edges at most the middle: 2·edge + 14·middle = 126 has no solution with both even), but
  // Megatron's accounted split does: (126 + 2) / 32 = 4 per virtual stage, the first and the
  // last 3. V placements stay even, so zb-v is dropped.
  PlanRequest r = request("llama3-405b", 16384, 2048);
  r.seq_len = 8192;
  r.space.tp = {8};
  r.space.pp = {16};
  r.space.schedules = {"1f1b", "interleaved-1f1b", "zb-v"};
  r.space.vp = {2};
  const SearchSpace s = enumerate_space(r);
  ASSERT_FALSE(s.candidates.empty());
  std::set<std::string_view> schedules;
  for (const Candidate& c : s.candidates) {
    schedules.insert(c.schedule);
    const bool interleaved = c.schedule == "interleaved-1f1b";
    EXPECT_EQ(c.parallel.first_stage_layers, interleaved ? std::nullopt : std::optional(7));
    EXPECT_EQ(c.parallel.last_stage_layers, interleaved ? std::nullopt : std::optional(7));
    EXPECT_EQ(c.parallel.account_for_embedding_in_pipeline_split, interleaved) << describe(c);
    EXPECT_EQ(c.parallel.account_for_loss_in_pipeline_split, interleaved) << describe(c);
    EXPECT_EQ(models::pipeline_rank_layers(r.model, c.parallel).front(), 7) << describe(c);
  }
  EXPECT_EQ(schedules, (std::set<std::string_view>{"1f1b", "interleaved-1f1b"}));
  EXPECT_THAT(describe(s.candidates.front()), ::testing::HasSubstr(" first7 last7 "));
  EXPECT_THAT(describe(s.candidates.back()), ::testing::HasSubstr(" account=embedding+loss"));
  EXPECT_EQ(find_family(s, DropReason::kLayers, "tp=8 pp=16 interleaved-1f1b vp=2"), nullptr);
  EXPECT_NE(find_family(s, DropReason::kLayers, "tp=8 pp=16 zb-v vp=2"), nullptr);
}

// split_unevenly: Megatron's edge counts where whole chunks allow them, else its accounted split,
// else nothing (Note [uneven stages]).
TEST(SearchSpace, SplitsUnevenlyByEdgeCountsElseByAccountingTheEmbeddingAndLoss) {
  models::ParallelSpec edges{.pp = 16};
  ASSERT_TRUE(split_unevenly(edges, 126));
  EXPECT_EQ(edges.first_stage_layers, 7);
  EXPECT_FALSE(edges.account_for_embedding_in_pipeline_split);
  models::ParallelSpec four{.pp = 16, .vp = 4};  // 128 / 64 = 2 per virtual stage, edges 1
  ASSERT_TRUE(split_unevenly(four, 126));
  EXPECT_EQ(four.first_stage_layers, std::nullopt);
  EXPECT_TRUE(four.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(four.account_for_loss_in_pipeline_split);
  models::ParallelSpec eight{.pp = 16, .vp = 8};  // 128 / 128 = 1: the edges would hold none
  EXPECT_FALSE(split_unevenly(eight, 126));
  EXPECT_EQ(eight, (models::ParallelSpec{.pp = 16, .vp = 8}));
}

TEST(SearchSpace, DropsTensorParallelSizesThatDoNotDivideTheHeads) {
  PlanRequest r = request("gpt3-175b", 1024, 1536);  // 96 heads
  r.space.tp = {5, 8};
  r.space.pp = {16};
  const SearchSpace s = enumerate_space(r);
  const DroppedFamily* tp5 = find_family(s, DropReason::kTensorParallel, "tp=5");
  ASSERT_NE(tp5, nullptr);
  EXPECT_NE(tp5->detail.find("heads (96)"), std::string::npos) << tp5->detail;
  for (const Candidate& c : s.candidates) EXPECT_EQ(c.parallel.tp, 8);
}

TEST(SearchSpace, CountsConfigurationsTheScheduleRejects) {
  // Interleaved 1F1B on pp = 4 needs at least pp = 4 microbatches (group size 4): with batch 16
  // and dp = 8 there are 2 microbatches of 1 sample, or 1 of 2. Both are dropped, counted once
  // per configuration (two recompute settings each).
  PlanRequest r = request("gpt3-1.3b", 32, 16);
  r.space.tp = {1};
  r.space.pp = {4};
  r.space.dp = {8};
  r.space.vp = {2};
  r.space.schedules = {"interleaved-1f1b"};
  r.space.recompute = {models::Recompute::kNone, models::Recompute::kFull};
  const SearchSpace s = enumerate_space(r);
  EXPECT_TRUE(s.candidates.empty());
  const DroppedFamily* f = find_family(s, DropReason::kSchedule, "tp=1 pp=4 interleaved-1f1b vp=2");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->configurations, 4);  // microbatch sizes 1 and 2 × two recompute settings
  EXPECT_NE(f->detail.find("exceeds microbatches"), std::string::npos) << f->detail;
}

TEST(SearchSpace, CountsEveryConfigurationASequenceSplitDrops) {
  // Sequence parallelism asked for at tp = 2 on a 2,049-token sequence: no split. One microbatch
  // size (batch 8 over dp 8) × three recompute modes × two policies = 6 configurations.
  PlanRequest r = request("gpt3-1.3b", 16, 8);
  r.seq_len = 2049;
  r.space.tp = {2};
  r.space.pp = {1};
  r.space.dp = {8};
  r.space.sequence_parallel = {true};
  r.space.policies = {sync::SyncPolicy::kMegatronDistopt, sync::SyncPolicy::kDdp};
  const SearchSpace s = enumerate_space(r);
  EXPECT_TRUE(s.candidates.empty());
  const DroppedFamily* f = find_family(s, DropReason::kSequence, "tp=2 pp=1 1f1b vp=1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->configurations, 6);
}

TEST(SearchSpace, ListedValuesThatBreakTheBatchOrGpusAreReported) {
  PlanRequest r = request("gpt3-1.3b", 16, 24);
  r.space.tp = {1};
  r.space.pp = {1};
  r.space.dp = {5, 32, 8};
  const SearchSpace s = enumerate_space(r);
  EXPECT_NE(find_family(s, DropReason::kBatch, "tp=1 pp=1 1f1b vp=1 dp=5"), nullptr);
  EXPECT_NE(find_family(s, DropReason::kGpus, "tp=1 pp=1 1f1b vp=1 dp=32"), nullptr);
  for (const Candidate& c : s.candidates) EXPECT_EQ(c.parallel.dp, 8);
}

TEST(SearchSpace, SearchesExpertParallelismOverTheExpertsThatDivideDataParallelism) {
  // A Mixtral-like MoE on 16 GPUs: 8 experts; ep ranges over the divisors of 8 that divide
  // dp·cp (Megatron carves ep out of the data-parallel ranks). tp = pp = 1 leaves dp in
  // {1, 2, 4, 8, 16}, so dp = 1 has ep 1; 2 has 1, 2; 4 has 1, 2, 4; 8 and 16 have 1, 2, 4, 8.
  PlanRequest r = request("gpt3-1.3b", 16, 16);
  r.model.moe = models::MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 4096};
  r.space.tp = {1};
  r.space.pp = {1};
  r.space.schedules = {"1f1b"};
  r.space.recompute = {models::Recompute::kNone};
  r.space.microbatch_size = {1};
  const SearchSpace s = enumerate_space(r);
  std::vector<std::pair<std::int64_t, std::int64_t>> dp_ep;
  for (const Candidate& c : s.candidates) {
    dp_ep.emplace_back(c.parallel.dp, c.parallel.ep);
    EXPECT_NO_THROW(models::validate(c.parallel, r.model, c.parallel.gpus())) << describe(c);
  }
  const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
      {1, 1}, {2, 1}, {2, 2}, {4, 1},  {4, 2},  {4, 4},  {8, 1},
      {8, 2}, {8, 4}, {8, 8}, {16, 1}, {16, 2}, {16, 4}, {16, 8}};
  EXPECT_EQ(dp_ep, expected);
}

TEST(SearchSpace, ListedContextParallelSizesSplitTheSequence) {
  // cp = 2 needs the sequence divisible by 2·cp = 4 (load-balanced split) and, with sequence
  // parallelism at tp = 2, by tp·cp = 4: 2048 is; cp = 3 is not (2048 mod 6 != 0).
  PlanRequest r = request("gpt3-1.3b", 32, 32);
  r.space.tp = {2};
  r.space.pp = {2};
  r.space.cp = {1, 2, 3};
  const SearchSpace s = enumerate_space(r);
  EXPECT_NE(find_family(s, DropReason::kSequence, "tp=2 cp=3"), nullptr);
  bool saw_cp2 = false;
  for (const Candidate& c : s.candidates) {
    saw_cp2 = saw_cp2 || c.parallel.cp == 2;
    EXPECT_NE(c.parallel.cp, 3);
    EXPECT_LE(c.parallel.gpus(), 32);
    EXPECT_NO_THROW(models::validate(c.parallel, r.model, c.parallel.gpus())) << describe(c);
  }
  EXPECT_TRUE(saw_cp2);
}

TEST(SearchSpace, DescribesAConfigurationByItsFields) {
  const Candidate c{.parallel = {.tp = 8,
                                 .pp = 16,
                                 .dp = 8,
                                 .vp = 2,
                                 .sequence_parallel = true,
                                 .microbatch_size = 1,
                                 .recompute = models::Recompute::kFull},
                    .schedule = "interleaved-1f1b"};
  EXPECT_EQ(describe(c),
            "tp8 pp16 dp8 vp2 mbs1 sp interleaved-1f1b megatron-distopt recompute=full");
  EXPECT_EQ(family_of(c), "tp=8 pp=16 interleaved-1f1b vp=2");
  Candidate kernels = c;
  kernels.parallel.attention = models::AttentionKernel::kFused;
  kernels.parallel.fp8 = models::Fp8Recipe::kDelayed;
  kernels.parallel.tp_comm_overlap = true;
  EXPECT_EQ(describe(kernels),
            "tp8 pp16 dp8 vp2 mbs1 sp interleaved-1f1b megatron-distopt recompute=full "
            "attention=fused fp8=delayed tpoverlap");
}

TEST(SearchSpace, RejectsAnImpossibleRequest) {
  PlanRequest r = request("gpt3-1.3b", 0, 8);
  EXPECT_THROW((void)enumerate_space(r), InvalidConfig);
  r.gpus = 8;
  r.space.schedules = {"no-such-schedule"};
  EXPECT_THROW((void)enumerate_space(r), InvalidConfig);
  r.space.schedules.clear();
  r.memory_headroom = 1;
  EXPECT_THROW((void)enumerate_space(r), InvalidConfig);
  // FP8 asked of a GPU without an fp8 peak (the A100) is refused, naming both.
  r.memory_headroom = 0.1;
  r.hardware = models::hardware_preset("dgx-a100");
  r.space.fp8 = {models::Fp8Recipe::kOff, models::Fp8Recipe::kDelayed};
  try {
    (void)enumerate_space(r);
    ADD_FAILURE() << "fp8 on an A100 was accepted";
  } catch (const InvalidConfig& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("fp8 \"delayed\" needs a GPU with an fp8 peak"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("dgx-a100"));
  }
  r.space.fp8 = {models::Fp8Recipe::kOff};
  EXPECT_NO_THROW((void)enumerate_space(r));
}

}  // namespace
}  // namespace metron::plan
