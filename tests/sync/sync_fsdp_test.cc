// FSDP1 / FSDP2 lowering (Note [fsdp sync] in sync_fsdp.cc, docs/SYNC_POLICIES.md §6) on small
// steps whose issue orders are derived by hand in the comments, from the hook rules of §6.1–6.2.
//
// Common step unless a test says otherwise: 1F1B, pp 1, 2 microbatches, 4 layers, every layer a
// unit of tensors a (100) + b (10) = 110 elements, data parallel 2 (110 is already a multiple of
// 2: padded 110), bf16 weights (2 bytes), fp32 gradients (4 bytes): AG 220 bytes, RS 440 bytes.
// With pp 1 and 2 microbatches 1F1B runs F0 B0 F1 B1 STEP; only mb 1 syncs gradients.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/sync/sync_policy.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using testing::lower_with;

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::make_sync_step;
using testing::SyncStepSpec;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

SyncStepSpec small_step() {
  return {.pp = 1, .microbatches = 2, .layers = 4, .data_parallel = 2, .grad_bytes = 4};
}

// One task as a short token: F1[2] (forward of mb 1 running layer 2; [0-3] for several layers),
// B/I/W likewise, STEP, AG3 / RS3 / AR3 (collective of unit 3, its bucket tag), W:<target>.
std::string token(const ir::Graph& g, ir::TaskId id) {
  const ir::Task& t = g.task(id);
  if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
    if (c->phase == ir::Phase::kOptimizer) return "STEP";
    const char letter = c->phase == ir::Phase::kForward          ? 'F'
                        : c->phase == ir::Phase::kBackwardInput  ? 'I'
                        : c->phase == ir::Phase::kBackwardWeight ? 'W'
                                                                 : 'B';
    std::string layers = std::to_string(t.layers.first);
    if (t.layers.last - t.layers.first > 1) layers += "-" + std::to_string(t.layers.last - 1);
    return std::string(1, letter) + std::to_string(t.microbatch.value()) + "[" + layers + "]";
  }
  if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
    const char* op = c->op == ir::CollectiveOp::kAllGather       ? "AG"
                     : c->op == ir::CollectiveOp::kReduceScatter ? "RS"
                                                                 : "AR";
    return op + std::to_string(t.bucket.value());
  }
  if (const auto* w = std::get_if<ir::HostWait>(&t.op)) return "W:" + token(g, w->target);
  return "p2p";
}

// The rank's issue order as tokens, p2p transfers left out.
std::string issued(const ir::Graph& g, ir::RankId rank) {
  std::string out;
  for (ir::TaskId t : g.issue_order(rank)) {
    const std::string tok = token(g, t);
    if (tok == "p2p") continue;
    out += (out.empty() ? "" : " ") + tok;
  }
  return out;
}

// The task with a unique token (compute pieces), or the task issued `before` places before it.
ir::TaskId find(const ir::Graph& g, ir::RankId rank, const std::string& tok,
                std::size_t before = 0) {
  const auto order = g.issue_order(rank);
  for (std::size_t i = before; i < order.size(); ++i) {
    if (token(g, order[i]) == tok) return order[i - before];
  }
  ADD_FAILURE() << "no task " << tok;
  return ir::TaskId{};
}

std::vector<std::string> deps(const ir::Graph& g, ir::TaskId id) {
  std::vector<std::string> out;
  for (ir::TaskId d : g.task(id).deps) out.push_back(token(g, d));
  return out;
}

std::int64_t total_bytes(const ir::Graph& g, ir::RankId rank, ir::CollectiveOp op) {
  std::int64_t sum = 0;
  for (const auto& c : testing::issued_collectives(g, rank)) {
    if (c.op == op) sum += c.bytes;
  }
  return sum;
}

constexpr ir::RankId kRank0{0};

TEST(Fsdp1, FullShardGathersInForwardAndBackwardWithTheRateLimiter) {
  // Units 0-3 = layers 0-3 (no root: no embedding or head). Free-event queue q (oldest first);
  // every _unshard first blocks on the oldest free when q holds 2. Frees: after each forward
  // piece (FULL_SHARD) and each backward piece (FULL_SHARD frees in backward even without sync).
  // F0: AG0 F0[0] q=[F0.0]; AG1 F0[1] q=[F0.0 F0.1]; W:F0[0] AG2 F0[2]; W:F0[1] AG3 F0[3]
  //     q=[F0.2 F0.3].
  // B0 (BACKWARD_PRE): pre L3: W:F0[2] AG3, prefetch L2 (q=[F0.3]: no wait) AG2; B0[3] frees
  //     q=[F0.3 B0.3]; pre L2 (prefetched: no unshard) prefetch L1: W:F0[3] AG1; B0[2]
  //     q=[B0.3 B0.2]; pre L1 prefetch L0: W:B0[3] AG0; B0[1]; pre L0: nothing to prefetch (first
  //     in post-forward order); B0[0]; q=[B0.2 B0.1 B0.0].
  // F1: W:B0[2] AG0 F1[0]; W:B0[1] AG1 F1[1]; W:B0[0] AG2 F1[2]; W:F1[0] AG3 F1[3].
  // B1 as B0, each unit's RS right after its piece (mb 1 syncs).
  const ir::Graph g = lower_with(small_step(), {.policy = SyncPolicy::kFsdp1});
  EXPECT_EQ(issued(g, kRank0),
            "AG0 F0[0] AG1 F0[1] W:F0[0] AG2 F0[2] W:F0[1] AG3 F0[3] "
            "W:F0[2] AG3 AG2 B0[3] W:F0[3] AG1 B0[2] W:B0[3] AG0 B0[1] B0[0] "
            "W:B0[2] AG0 F1[0] W:B0[1] AG1 F1[1] W:B0[0] AG2 F1[2] W:F1[0] AG3 F1[3] "
            "W:F1[1] AG3 W:F1[2] AG2 B1[3] RS3 W:F1[3] AG1 B1[2] RS2 W:B1[3] AG0 B1[1] RS1 "
            "B1[0] RS0 STEP");
  // Textbook volume per microbatch with sync: AG 2·P·b_p, RS P·b_g (P = 4 · 110). Both
  // microbatches gather twice, one reduces.
  EXPECT_EQ(total_bytes(g, kRank0, ir::CollectiveOp::kAllGather), 2 * 2 * 440 * 2);
  EXPECT_EQ(total_bytes(g, kRank0, ir::CollectiveOp::kReduceScatter), 440 * 4);
  for (const auto& c : testing::issued_collectives(g, kRank0)) {
    EXPECT_EQ(c.group, "dp0");
    EXPECT_EQ(c.bytes, c.op == ir::CollectiveOp::kAllGather ? 220 : 440) << c.label;
  }
  // The compute stream waits for the unit's gather; the step for every reduce-scatter.
  EXPECT_THAT(deps(g, find(g, kRank0, "F1[2]")), Contains("AG2"));
  EXPECT_THAT(deps(g, find(g, kRank0, "STEP")),
              ::testing::IsSupersetOf({"RS0", "RS1", "RS2", "RS3"}));
}

TEST(Fsdp1, GatheredParametersAreBuffersFreedAfterTheirLastPiece) {
  // The forward gather of unit 2 in mb 0 (issued right before F0[2]) allocates 110 · 2 bytes,
  // used by that piece only (FULL_SHARD frees it after the forward).
  const ir::Graph g = lower_with(small_step(), {.policy = SyncPolicy::kFsdp1});
  const ir::TaskId ag = find(g, kRank0, "F0[2]", 1);
  ASSERT_EQ(token(g, ag), "AG2");
  ASSERT_EQ(g.task(ag).allocates.size(), 1U);
  const ir::BufferId buffer = g.task(ag).allocates[0];
  EXPECT_EQ(g.buffer(buffer).bytes, 220);
  std::vector<std::string> users;
  for (std::size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& uses = g.tasks()[i].uses;
    if (std::find(uses.begin(), uses.end(), buffer) != uses.end())
      users.push_back(token(g, ir::TaskId{static_cast<std::int32_t>(i)}));
  }
  EXPECT_THAT(users, UnorderedElementsAre("AG2", "F0[2]"));
}

TEST(Fsdp1, ShardGradOpKeepsUnitsGatheredUntilTheSyncingBackward) {
  // SHARD_GRAD_OP never frees after forward, and without sync keeps units in backward too
  // (_should_free_in_backward): one forward gather per unit in the whole step, no backward
  // gather; the limiter never fires (no free queued before B1). B1 frees and reduce-scatters.
  const ir::Graph g = lower_with(
      small_step(), {.policy = SyncPolicy::kFsdp1, .fsdp_sharding = FsdpSharding::kShardGradOp});
  EXPECT_EQ(issued(g, kRank0),
            "AG0 F0[0] AG1 F0[1] AG2 F0[2] AG3 F0[3] B0[3] B0[2] B0[1] B0[0] "
            "F1[0] F1[1] F1[2] F1[3] B1[3] RS3 B1[2] RS2 B1[1] RS1 B1[0] RS0 STEP");
}

TEST(Fsdp1, PrefetchPrePostAndNonePlaceTheNextGatherDifferently) {
  // Limiter off to isolate the prefetch. B1 (syncing), units from the top:
  //   PRE:  the pre-backward of L3 gathers L3 and prefetches L2 before B1[3]; L2's prefetches
  //         L1 before B1[2]; ...; RS after each piece.
  //   POST: L3 is gathered at its own pre-backward; its post-backward reshards, prefetches L2
  //         and then reduce-scatters (AG2 before RS3 in issue order).
  //   NONE: every unit is gathered right before its own piece.
  const auto b1 = [](BackwardPrefetch p) {
    const ir::Graph g = lower_with(
        small_step(),
        {.policy = SyncPolicy::kFsdp1, .backward_prefetch = p, .limit_all_gathers = false});
    const std::string all = issued(g, kRank0);
    return all.substr(all.find("F1[3]") + 6);
  };
  EXPECT_EQ(b1(BackwardPrefetch::kPre),
            "AG3 AG2 B1[3] RS3 AG1 B1[2] RS2 AG0 B1[1] RS1 B1[0] RS0 STEP");
  EXPECT_EQ(b1(BackwardPrefetch::kPost),
            "AG3 B1[3] AG2 RS3 B1[2] AG1 RS2 B1[1] AG0 RS1 B1[0] RS0 STEP");
  EXPECT_EQ(b1(BackwardPrefetch::kNone),
            "AG3 B1[3] RS3 AG2 B1[2] RS2 AG1 B1[1] RS1 AG0 B1[0] RS0 STEP");
}

TEST(Fsdp1, HybridShardReduceScattersInTheShardGroupThenAllReducesTheShard) {
  // dp 4 as 2 shard groups of 2, all four replicas in the graph (rank k = replica k). Tensor a of
  // 101 elements: units of 111, padded to 112 (a multiple of the shard size 2). Rank 0's shard
  // group is replicas {0, 1} ("dp-intra0.0"), its replicate group {0, 2} ("dp-inter0.0").
  // Per unit after B1's piece: RS of 112 · 4 bytes, then AR of the shard, 112 / 2 · 4 bytes,
  // depending on the RS. Gathers: 112 · 2 bytes on the shard group.
  SyncStepSpec spec = small_step();
  spec.a_numel = 101;
  spec.data_parallel = 4;
  spec.replicas = 4;
  const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFsdp1,
                                        .fsdp_sharding = FsdpSharding::kHybridShard,
                                        .limit_all_gathers = false,
                                        .hsdp_shard_size = 2});
  const std::string all = issued(g, kRank0);
  EXPECT_EQ(all.substr(all.find("F1[3]") + 6),
            "AG3 AG2 B1[3] RS3 AR3 AG1 B1[2] RS2 AR2 AG0 B1[1] RS1 AR1 B1[0] RS0 AR0 STEP");
  for (const auto& c : testing::issued_collectives(g, kRank0)) {
    if (c.op == ir::CollectiveOp::kAllGather) {
      EXPECT_EQ(c.group, "dp-intra0.0");
      EXPECT_EQ(c.bytes, 224);
    } else if (c.op == ir::CollectiveOp::kReduceScatter) {
      EXPECT_EQ(c.group, "dp-intra0.0");
      EXPECT_EQ(c.bytes, 448);
    } else {
      EXPECT_EQ(c.op, ir::CollectiveOp::kAllReduce);
      EXPECT_EQ(c.group, "dp-inter0.0");
      EXPECT_EQ(c.bytes, 224);
      EXPECT_EQ(c.microbatch, 1);
      EXPECT_THAT(deps(g, c.id), UnorderedElementsAre("RS" + std::to_string(c.bucket)));
    }
  }
  const auto groups = g.data().groups;
  const auto members = [&](const std::string& name) {
    for (const auto& grp : groups) {
      if (grp.name == name) return grp.ranks;
    }
    return std::vector<ir::RankId>{};
  };
  EXPECT_EQ(members("dp-intra0.0"), (std::vector<ir::RankId>{ir::RankId{0}, ir::RankId{1}}));
  EXPECT_EQ(members("dp-inter0.0"), (std::vector<ir::RankId>{ir::RankId{0}, ir::RankId{2}}));
}

TEST(Fsdp1, PipelineGathersPerMicrobatchAndReducesOnlyInTheLastBackward) {
  // pp 2, 3 microbatches: rank 0 holds layers 0-1 (units 0, 1) and runs F0 F1 B0 F2 B1 B2.
  // FULL_SHARD: every forward gathers 0 then 1; every backward gathers 1 and prefetches 0
  // (PRE); only B2 reduce-scatters, 1 then 0. Per rank P = 220 elements: AG 3 · 2 · P · 2 bytes,
  // RS P · 4 bytes.
  SyncStepSpec spec = small_step();
  spec.pp = 2;
  spec.microbatches = 3;
  const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFsdp1, .limit_all_gathers = false});
  EXPECT_EQ(issued(g, kRank0),
            "AG0 F0[0] AG1 F0[1] AG0 F1[0] AG1 F1[1] AG1 AG0 B0[1] B0[0] "
            "AG0 F2[0] AG1 F2[1] AG1 AG0 B1[1] B1[0] AG1 AG0 B2[1] RS1 B2[0] RS0 STEP");
  for (std::int32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(total_bytes(g, ir::RankId{r}, ir::CollectiveOp::kAllGather), 3 * 2 * 220 * 2);
    EXPECT_EQ(total_bytes(g, ir::RankId{r}, ir::CollectiveOp::kReduceScatter), 220 * 4);
  }
  for (const auto& c : testing::issued_collectives(g, ir::RankId{1})) {
    EXPECT_EQ(c.group, "dp1");
    if (c.op == ir::CollectiveOp::kReduceScatter) {
      EXPECT_EQ(c.microbatch, 2);
    }
  }
}

TEST(Fsdp2, ReducesInTheLastBackwardTheScheduleRunsNotTheHighestMicrobatch) {
  // Looped BFS runs each chunk's backwards from the highest microbatch down (B1 then B0), so
  // pipelining's gradient sync is on for B0: every reduce-scatter of either chunk is microbatch
  // 0's (the model payload's check failed at 199 times the tolerance when B1 reduced).
  SyncStepSpec spec = small_step();
  spec.schedule = "looped-bfs";
  spec.pp = 2;
  spec.vp = 2;
  spec.microbatches = 2;
  const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFsdp2});
  std::int32_t reduce_scatters = 0;
  for (const auto& c : testing::issued_collectives(g, kRank0)) {
    if (c.op != ir::CollectiveOp::kReduceScatter) continue;
    ++reduce_scatters;
    EXPECT_EQ(c.microbatch, 0) << c.label;
  }
  EXPECT_GT(reduce_scatters, 0);
}

TEST(Fsdp2, ImplicitPrefetchAndStreamWaitsBoundTheGathers) {
  // Embedding (40) and head (20) make the root unit 0 (60 elements); layers are units 1-4.
  // F0: the root is gathered first (never resharded after forward), then each layer unit right
  // before its piece, resharded after it. B0: the root's pre-backward prefetches layer 3's unit
  // (the one before the root in post-forward order), each layer's pre-backward the next one;
  // layer 0 has none. Every unit, the root included, is resharded after backward, so F1
  // gathers all again. B1 reduce-scatters each unit after its piece, the root's last.
  SyncStepSpec spec = small_step();
  spec.embedding_numel = 40;
  spec.head_numel = 20;
  const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFsdp2});
  EXPECT_EQ(issued(g, kRank0),
            "AG0 AG1 F0[0] AG2 F0[1] AG3 F0[2] AG4 F0[3] AG4 AG3 B0[3] AG2 B0[2] AG1 B0[1] B0[0] "
            "AG0 AG1 F1[0] AG2 F1[1] AG3 F1[2] AG4 F1[3] "
            "AG4 AG3 B1[3] RS4 AG2 B1[2] RS3 AG1 B1[1] RS2 B1[0] RS1 RS0 STEP");
  // Copy-out of the previous gather (right before its unit's first piece) gates the next one:
  // AG3 (layer 2) of F1 waits for what the compute stream ran before F1[1], i.e. F1[0].
  EXPECT_THAT(deps(g, find(g, kRank0, "F1[2]", 1)), UnorderedElementsAre("F1[0]"));
  // The root pre-forward makes the gather streams wait for the compute stream (B0[0]); the
  // copy-out left pending by B0 was layer 0's, right after B0[1].
  EXPECT_THAT(deps(g, find(g, kRank0, "F1[0]", 2)), UnorderedElementsAre("B0[0]", "B0[1]"));
  // <= 1 pending reduce-scatter: the compute after layer 2's hook waits for layer 3's RS.
  EXPECT_THAT(deps(g, find(g, kRank0, "B1[1]")), UnorderedElementsAre("AG2", "RS4"));
  EXPECT_THAT(deps(g, find(g, kRank0, "STEP")),
              ::testing::IsSupersetOf({"RS0", "RS1", "RS2", "RS3", "RS4"}));
  // No host waits: FSDP2 has no CPU limiter.
  EXPECT_EQ(issued(g, kRank0).find("W:"), std::string::npos);
  const auto colls = testing::issued_collectives(g, kRank0);
  EXPECT_EQ(colls.front().bytes, 60 * 2);  // root AG
  EXPECT_EQ(colls.back().bytes, 60 * 4);   // root RS
  EXPECT_EQ(colls.back().label, "fsdp2 RS unit 0 (root) after backward mb 1");
}

TEST(Fsdp2, WithoutReshardAfterForwardTheBackwardGathersNothing) {
  // reshard_after_forward = false: units stay gathered from their forward to their
  // post-backward, so no backward gather; every unit is still resharded after backward, so F1
  // gathers again.
  const ir::Graph g =
      lower_with(small_step(), {.policy = SyncPolicy::kFsdp2, .reshard_after_forward = false});
  EXPECT_EQ(issued(g, kRank0),
            "AG0 F0[0] AG1 F0[1] AG2 F0[2] AG3 F0[3] B0[3] B0[2] B0[1] B0[0] "
            "AG0 F1[0] AG1 F1[1] AG2 F1[2] AG3 F1[3] B1[3] RS3 B1[2] RS2 B1[1] RS1 B1[0] RS0 "
            "STEP");
}

TEST(Fsdp2, HsdpAndSplitBackwardBuildOnEveryScheduleShape) {
  // Smoke over pipeline shapes: the graph validates and every rank reduce-scatters each of its
  // units once (HSDP: and all-reduces it once).
  for (const bool split : {false, true}) {
    for (const char* schedule : {"1f1b", "interleaved-1f1b"}) {
      SyncStepSpec spec = small_step();
      spec.schedule = schedule;
      spec.pp = 2;
      spec.vp = std::string(schedule) == "1f1b" ? 1 : 2;
      spec.layers = 8;
      spec.microbatches = 4;
      spec.split_backward = split;
      spec.data_parallel = 4;
      const ir::Graph g = lower_with(spec, {.policy = SyncPolicy::kFsdp2, .hsdp_shard_size = 2});
      const std::int32_t units = 8 / 2;  // layers per rank
      for (std::int32_t r = 0; r < 2; ++r) {
        std::int32_t rs = 0, ar = 0;
        for (const auto& c : testing::issued_collectives(g, ir::RankId{r})) {
          rs += c.op == ir::CollectiveOp::kReduceScatter ? 1 : 0;
          ar += c.op == ir::CollectiveOp::kAllReduce ? 1 : 0;
        }
        EXPECT_EQ(rs, units) << schedule << " split " << split;
        EXPECT_EQ(ar, units) << schedule << " split " << split;
      }
    }
  }
}

TEST(FsdpOptions, OptionsOfTheOtherVersionAreRejected) {
  const auto run = [](const SyncOptions& o) { lower_with(small_step(), o); };
  EXPECT_THAT(
      [&] { run({.policy = SyncPolicy::kFsdp2, .fsdp_sharding = FsdpSharding::kShardGradOp}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("sync policy fsdp2: SHARD_GRAD_OP")));
  EXPECT_THAT([&] { run({.policy = SyncPolicy::kFsdp2, .limit_all_gathers = false}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("limit_all_gathers are FSDP1's")));
  EXPECT_THAT([&] { run({.policy = SyncPolicy::kFsdp1, .reshard_after_forward = false}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("reshard_after_forward is FSDP2's")));
  EXPECT_THAT([&] { run({.policy = SyncPolicy::kFsdp1, .hsdp_shard_size = 2}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("hsdp_shard_size needs fsdp_sharding")));
}

}  // namespace
}  // namespace metron::sync
