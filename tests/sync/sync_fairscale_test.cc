// fairscale ShardedDataParallel + OSS lowering (Note [fairscale sync] in sync_fairscale.cc,
// docs/SYNC_POLICIES.md §4) on small steps whose owners, reductions and broadcasts are derived by
// hand in the comments.
//
// Every layer holds tensors a (100 elements) and b (10), registered a then b; bf16 weights and
// gradients (2 bytes); data parallel 2 with both replicas in the graph, so a reduce's or
// broadcast's root is a real rank: pipeline rank r's group is {r, pp + r}, owner k = its k-th
// member.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "metron/sync/sync_policy.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using testing::lower_with;

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using testing::make_sync_step;
using testing::SyncStepSpec;

SyncStepSpec step_spec(std::int32_t pp, std::int32_t microbatches) {
  return {.pp = pp, .microbatches = microbatches, .layers = 4, .data_parallel = 2, .replicas = 2};
}

// F1[2] (forward of mb 1 running layer 2; [0-3] for several layers), B likewise, STEP,
// RD@1/200 (reduce of 200 bytes to rank 1), BC@0/440 (broadcast from rank 0), W:<target>.
std::string token(const ir::Graph& g, ir::TaskId id) {
  const ir::Task& t = g.task(id);
  if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
    if (c->phase == ir::Phase::kOptimizer) return "STEP";
    std::string layers = std::to_string(t.layers.first);
    if (t.layers.last - t.layers.first > 1) layers += "-" + std::to_string(t.layers.last - 1);
    const char letter = c->phase == ir::Phase::kForward ? 'F' : 'B';
    return std::string(1, letter) + std::to_string(t.microbatch.value()) + "[" + layers + "]";
  }
  if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
    const char* op = c->op == ir::CollectiveOp::kReduce ? "RD@" : "BC@";
    return op + std::to_string(c->root.value()) + "/" + std::to_string(c->bytes);
  }
  if (const auto* w = std::get_if<ir::HostWait>(&t.op)) return "W:" + token(g, w->target);
  return "p2p";
}

std::string issued(const ir::Graph& g, ir::RankId rank) {
  std::string out;
  for (ir::TaskId t : g.issue_order(rank)) {
    const std::string tok = token(g, t);
    if (tok != "p2p") out += (out.empty() ? "" : " ") + tok;
  }
  return out;
}

std::vector<std::string> dep_tokens(const ir::Graph& g, ir::TaskId id) {
  std::vector<std::string> out;
  for (ir::TaskId d : g.task(id).deps) out.push_back(token(g, d));
  return out;
}

ir::TaskId find(const ir::Graph& g, ir::RankId rank, const std::string& tok) {
  for (ir::TaskId t : g.issue_order(rank)) {
    if (token(g, t) == tok) return t;
  }
  ADD_FAILURE() << "no task " << tok;
  return ir::TaskId{};
}

TEST(Fairscale, LargeTensorsReduceToTheirOwnerAsReadyAndSmallOnesInOwnerBuckets) {
  // Tensors t0..t7 = L0.a L0.b L1.a L1.b L2.a L2.b L3.a L3.b. OSS, least loaded first:
  //   t0 → 0 (100), t1 → 1 (10), t2 → 1 (110), t3 → 0 (110), t4 → 0 (tie: lowest; 210),
  //   t5 → 1 (120), t6 → 1 (220), t7 → 0 (220). Owner totals 220 and 220.
  // reduce_buffer_size 50: by increasing size the b's fit (owner 0: t3, t7 = 20; owner 1: t1,
  // t5 = 20), no a fits (20 + 100 >= 50): t0 t2 t4 t6 are direct.
  // Only B1 reduces, cut per layer; gradient-ready order t7 t6 t5 t4 t3 t2 t1 t0:
  //   t7 checks in (1/2); t6 direct → rank 1; t5 checks in; t4 direct → rank 0; t3 completes
  //   owner 0's bucket (20 · 2 bytes) → rank 0, then t2 direct → rank 1 (both after B1[1]);
  //   t1 completes owner 1's bucket → rank 1, t0 direct → rank 0 (after B1[0]).
  // After the step: synchronize, one broadcast per owner (220 · 2 bytes), wait for each.
  const ir::Graph g =
      lower_with(step_spec(1, 2), {.policy = SyncPolicy::kFairscaleSdp, .bucket_size = 50});
  const std::string expected =
      "F0[0-3] B0[0-3] F1[0-3] B1[3] RD@1/200 B1[2] RD@0/200 B1[1] RD@0/40 RD@1/200 "
      "B1[0] RD@1/40 RD@0/200 STEP W:STEP BC@0/440 BC@1/440 W:BC@0/440 W:BC@1/440";
  EXPECT_EQ(issued(g, ir::RankId{0}), expected);
  EXPECT_EQ(issued(g, ir::RankId{1}), expected);  // the same program on the other replica
  // Reduces total P · b_g and broadcasts P · b_p (P = 440), on the one dp group.
  std::int64_t reduced = 0;
  std::int64_t broadcast = 0;
  for (const auto& c : testing::issued_collectives(g, ir::RankId{0})) {
    EXPECT_EQ(c.group, "dp0");
    (c.op == ir::CollectiveOp::kReduce ? reduced : broadcast) += c.bytes;
    if (c.op == ir::CollectiveOp::kReduce) {
      EXPECT_EQ(c.microbatch, 1);
    }
  }
  EXPECT_EQ(reduced, 440 * 2);
  EXPECT_EQ(broadcast, 440 * 2);
  // The end-of-backward callback waits for every reduce before the step.
  EXPECT_THAT(dep_tokens(g, find(g, ir::RankId{0}, "STEP")),
              IsSupersetOf({"RD@1/200", "RD@0/200", "RD@0/40", "RD@1/40"}));
  EXPECT_EQ(g.task(find(g, ir::RankId{0}, "RD@1/40")).deps.size(), 1U);
  EXPECT_THAT(dep_tokens(g, find(g, ir::RankId{0}, "RD@1/40")), ElementsAre("B1[0]"));
}

TEST(Fairscale, BucketsGoWhenTheirLastMemberChecksInOnEachPipelineRank) {
  // pp 2, 3 microbatches; graph rank 1 is pipeline rank 1 (layers 2-3: t0..t3 = L2.a L2.b L3.a
  // L3.b), its group {1, 3}. OSS: t0 → 0, t1 → 1, t2 → 1, t3 → 0 (110 each). Default
  // reduce_buffer_size 2^23 capped at the chunk's 220 elements: all four fit (10, 10, then
  // 110 < 220 per owner): no direct tensor. Ready order t3 t2 t1 t0: both buckets complete at
  // layer 2, owner 1's (t1) first. 1F1B on the last stage runs F0 B0 F1 B1 F2 B2.
  const ir::Graph g = lower_with(step_spec(2, 3), {.policy = SyncPolicy::kFairscaleSdp});
  EXPECT_EQ(issued(g, ir::RankId{1}),
            "F0[2-3] B0[2-3] F1[2-3] B1[2-3] F2[2-3] B2[3] B2[2] RD@3/220 RD@1/220 "
            "STEP W:STEP BC@1/220 BC@3/220 W:BC@1/220 W:BC@3/220");
}

TEST(Fairscale, OwnersSpanTheRanksChunksAndEachChunkReducesAfterItsOwnBackward) {
  // Interleaved, pp 2, vp 2, 4 layers: rank 0 holds stage 0 (layer 0) and stage 2 (layer 2).
  // One OSS over both chunks: L0.a → 0, L0.b → 1, L2.a → 1, L2.b → 0 (110 elements each).
  // reduce_buffer_size 50: every b bucketed (its own owner's bucket), every a direct. Chunk 1's
  // last backward runs before chunk 0's; in each, b's gradient is ready before a's:
  //   chunk 1: L2.b bucket → owner 0 (rank 0, 20 bytes), L2.a → owner 1 (rank 2, 200 bytes);
  //   chunk 0: L0.b bucket → owner 1 (rank 2, 20 bytes), L0.a → owner 0 (rank 0, 200 bytes).
  // Broadcasts: 110 · 2 bytes per owner.
  SyncStepSpec spec = step_spec(2, 4);
  spec.schedule = "interleaved-1f1b";
  spec.vp = 2;
  const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFairscaleSdp, .bucket_size = 50});
  std::vector<std::string> reduces;
  std::vector<std::string> broadcasts;
  for (const auto& c : testing::issued_collectives(g, ir::RankId{0})) {
    const std::string tok = token(g, c.id);
    if (c.op == ir::CollectiveOp::kReduce) {
      reduces.push_back(tok + " chunk " + std::to_string(g.task(c.id).chunk.value()) + " mb " +
                        std::to_string(c.microbatch));
    } else {
      broadcasts.push_back(tok);
    }
  }
  EXPECT_THAT(reduces, ElementsAre("RD@0/20 chunk 1 mb 3", "RD@2/200 chunk 1 mb 3",
                                   "RD@2/20 chunk 0 mb 3", "RD@0/200 chunk 0 mb 3"));
  EXPECT_THAT(broadcasts, ElementsAre("BC@0/220", "BC@2/220"));
}

TEST(Fairscale, WarmupBroadcastsEveryParameterFromRankZeroBeforeTheFirstForward) {
  // sync_models_at_startup: all 8 tensors (440 elements · 2 bytes) from the group's rank 0,
  // one task standing for 8 broadcasts, first in issue order; the first forward waits for it.
  // The steady-state iteration has none.
  const ir::Graph warm = lower_with(
      step_spec(1, 2), {.policy = SyncPolicy::kFairscaleSdp, .iteration = Iteration::kWarmup});
  const std::string order = issued(warm, ir::RankId{1});
  EXPECT_EQ(order.substr(0, order.find(" F0")), "BC@0/880");
  const ir::TaskId startup = warm.issue_order(ir::RankId{1})[0];
  EXPECT_EQ(std::get<ir::Collective>(warm.task(startup).op).count, 8);
  EXPECT_THAT(dep_tokens(warm, find(warm, ir::RankId{1}, "F0[0-3]")), IsSupersetOf({"BC@0/880"}));
  const ir::Graph steady = lower_with(step_spec(1, 2), {.policy = SyncPolicy::kFairscaleSdp});
  EXPECT_EQ(issued(steady, ir::RankId{1}).substr(0, 7), "F0[0-3]");
}

TEST(Fairscale, Fp16BroadcastHalvesFp32Parameters) {
  // fp32 weights: each owner's 220 elements broadcast as 220 · 2 bytes in fp16 instead of
  // 220 · 4; bf16 weights are sent unchanged.
  SyncStepSpec fp32 = step_spec(1, 2);
  fp32.param_bytes = 4;
  const auto broadcasts = [](const ir::Graph& g) {
    std::vector<std::pair<std::int64_t, ir::DType>> out;
    for (const auto& c : testing::issued_collectives(g, ir::RankId{0})) {
      if (c.op == ir::CollectiveOp::kBroadcast)
        out.emplace_back(c.bytes, std::get<ir::Collective>(g.task(c.id).op).dtype);
    }
    return out;
  };
  using P = std::pair<std::int64_t, ir::DType>;
  EXPECT_THAT(broadcasts(lower_with(fp32, {.policy = SyncPolicy::kFairscaleSdp})),
              ElementsAre(P{880, ir::DType::kFp32}, P{880, ir::DType::kFp32}));
  EXPECT_THAT(
      broadcasts(lower_with(fp32, {.policy = SyncPolicy::kFairscaleSdp, .broadcast_fp16 = true})),
      ElementsAre(P{440, ir::DType::kFp16}, P{440, ir::DType::kFp16}));
  EXPECT_THAT(broadcasts(lower_with(step_spec(1, 2),
                                    {.policy = SyncPolicy::kFairscaleSdp, .broadcast_fp16 = true})),
              ElementsAre(P{440, ir::DType::kBf16}, P{440, ir::DType::kBf16}));
}

}  // namespace
}  // namespace metron::sync
