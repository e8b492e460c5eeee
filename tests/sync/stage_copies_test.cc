// DualPipe's gradient sum over its stage copies (Note [stage copies] in sync/stage_copies.h) on
// make_sync_step's small steps. DualPipe with pp 4 places its 8 stages as (docs/SCHEDULES.md §4.2:
// rank r runs stage r of the first direction and the copy of stage P-1-r, numbered past the
// model's end, of the second):
//   rank 0: stages 0, 7    rank 1: stages 1, 6    rank 2: stages 2, 5    rank 3: stages 3, 4
// so the pairs are {0, 3} and {1, 2}. With 8 layers each stage holds one layer of "a" (100
// elements) and "b" (10): a rank's two stages hold 220 gradient elements, 440 bytes in bf16.

#include "metron/sync/stage_copies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/deadlock.h"
#include "metron/sync/bucket_plan.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using ir::CollectiveOp;
using ir::RankId;
using ir::TaskId;
using testing::collective;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::issued_collectives;
using testing::make_sync_step;
using testing::SyncStepSpec;
using ::testing::ThrowsMessage;

SyncStepSpec dualpipe(std::int32_t replicas) {
  return {.schedule = "dualpipe",
          .pp = 4,
          .vp = 2,
          .microbatches = 8,
          .layers = 8,
          .data_parallel = 2,
          .replicas = replicas};
}

TEST(StageCopies, EachRankSumsBothStagesWithItsMirrorJustBeforeTheStep) {
  for (std::int32_t replicas : {1, 2}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    auto step = make_sync_step(dualpipe(replicas));
    const std::vector<std::vector<TaskId>> step_deps = testing::step_deps_of(step.builder);
    add_stage_copy_sum(step.builder, step.input);
    const ir::Graph g = std::move(step.builder).build();  // validates: members agree on bytes
    EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
    ASSERT_EQ(g.num_ranks(), 4 * replicas);
    for (std::int32_t rank = 0; rank < g.num_ranks(); ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      const std::int32_t k = rank / 4;  // replica
      const std::int32_t r = rank % 4;  // pipeline rank
      const std::int32_t low = std::min(r, 3 - r);
      const auto all = issued_collectives(g, RankId{rank});
      ASSERT_EQ(all.size(), 1U);
      EXPECT_EQ(all[0].op, CollectiveOp::kAllReduce);
      EXPECT_EQ(all[0].group, "pp-copies" + std::to_string(2 * k + low));
      EXPECT_EQ(all[0].bytes, 2 * (100 + 10) * 2);
      EXPECT_THAT(g.group(collective(g, all[0].id).group).ranks,
                  ElementsAre(RankId{4 * k + low}, RankId{4 * k + 3 - low}));
      testing::expect_just_before_the_step(g, RankId{rank}, all[0].id,
                                           step_deps[static_cast<std::size_t>(rank)]);
    }
  }
}

TEST(StageCopies, FollowTheDataParallelReductionsAndCarryWholeGradients) {
  // Megatron's distributed optimizer over dp 2 steps half of each gradient; the sum still
  // carries both stages' whole gradients, 440 bytes, after the reduce-scatters the step waits for.
  auto step = make_sync_step(dualpipe(2));
  add_sync_policy(step.builder, step.input, {.policy = SyncPolicy::kMegatronDistopt});
  add_stage_copy_sum(step.builder, step.input);
  const ir::Graph g = std::move(step.builder).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  for (std::int32_t rank = 0; rank < g.num_ranks(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    testing::expect_one_sum_after_the_reduce_scatters(g, RankId{rank}, "pp-copies", 440);
  }
}

TEST(StageCopies, ACopyIsBucketedAsItsOriginal) {
  // Megatron buckets only pipeline rank 0's first chunk (hook-driven reduction); with buckets of
  // 110 elements that is one bucket per layer (16 layers: 2 a stage). Rank 3's second chunk
  // copies it (stage 4 runs model stage 0): bucketed alike, its reduce-scatters shard the same
  // elements.
  SyncStepSpec spec = dualpipe(1);
  spec.layers = 16;
  auto step = make_sync_step(spec);
  step.input.stage_copies = true;
  const SyncOptions options{
      .policy = SyncPolicy::kMegatronDistopt, .bucket_size = 110, .overlap_grad_reduce = true};
  const SyncPlan plan = policy_buckets(step.input, options);
  const auto buckets = [&](std::int32_t rank, std::int32_t chunk) {
    std::vector<std::int64_t> out;
    for (const Bucket& b : chunk_buckets(plan[static_cast<std::size_t>(rank)], chunk).buckets) {
      out.push_back(b.padded_numel);
    }
    return out;
  };
  EXPECT_EQ(buckets(0, 0).size(), 2U);  // model stage 0: two layers of 110
  EXPECT_EQ(buckets(3, 1), buckets(0, 0));
  EXPECT_EQ(buckets(1, 0).size(), 1U);  // unbucketed, and so its copy
  EXPECT_EQ(buckets(2, 1), buckets(1, 0));
  step.input.stage_copies = false;  // Megatron's rule alone: the copy is one bucket
  EXPECT_EQ(chunk_buckets(policy_buckets(step.input, options)[3], 1).buckets.size(), 1U);
}

TEST(StageCopies, OssGivesBothCopiesOfAStageTheSameOwners) {
  // fairscale's OSS assigns owners greedily in registration order (the least-loaded rank takes
  // the next tensor). Rank 0 holds stages 0 and 7 (a copy of model stage 3), rank 3 stages 3 and
  // 4 (a copy of model stage 0): registered in model-stage order, rank 3's copy of stage 0 comes
  // first, and each stage's tensors get the same owners on both of its ranks. With dp 2 and
  // tensors of 100 and 10 elements in the order 0.a 0.b 3.a 3.b: owners 0, 1, 1, 0 (after 0.a
  // rank 0 holds 100 and rank 1 0; after 0.b rank 1 holds 10; 3.a goes to rank 1, 110; 3.b to
  // rank 0).
  auto step = make_sync_step(dualpipe(1));
  step.input.stage_copies = true;
  const SyncPlan plan = policy_buckets(step.input, {.policy = SyncPolicy::kFairscaleSdp});
  // The broadcast buckets (one per owner, over all chunks: chunk 0's tensors, then chunk 1's).
  const auto owned = [&](std::int32_t rank) {
    std::map<std::int32_t, std::vector<std::int32_t>> out;  // owner -> tensor indices
    for (const PlannedBucket& b : plan[static_cast<std::size_t>(rank)]) {
      if (b.role == BucketRole::kBroadcastParameters && b.chunk == kAllChunks) {
        out[b.bucket.owner] = b.bucket.tensors;
      }
    }
    return out;
  };
  // Rank 0: chunk 0 = stage 0 (tensors 0, 1), chunk 1 = stage 7 (2, 3).
  EXPECT_THAT(owned(0)[0], ElementsAre(0, 3));
  EXPECT_THAT(owned(0)[1], ElementsAre(1, 2));
  // Rank 3: chunk 0 = stage 3 (tensors 0, 1), chunk 1 = stage 4, the copy of stage 0 (2, 3).
  EXPECT_THAT(owned(3)[0], ElementsAre(1, 2));
  EXPECT_THAT(owned(3)[1], ElementsAre(0, 3));
}

TEST(StageCopies, MegatronGathersEveryChunkBeforeItsFirstForward) {
  // overlap_param_gather: each chunk's all-gathers are dispatched by the pre-hook of its first
  // forward in the step. DualPipe's second direction (chunk 1) starts at microbatch m/2 = 4,
  // and still gathers its parameters first.
  auto step = make_sync_step(dualpipe(2));
  step.input.stage_copies = true;
  add_sync_policy(step.builder, step.input,
                  {.policy = SyncPolicy::kMegatronDistopt,
                   .overlap_grad_reduce = true,
                   .overlap_param_gather = true});
  const ir::Graph g = std::move(step.builder).build();
  for (std::int32_t rank = 0; rank < g.num_ranks(); ++rank) {
    for (std::int32_t chunk = 0; chunk < 2; ++chunk) {
      SCOPED_TRACE("rank " + std::to_string(rank) + " chunk " + std::to_string(chunk));
      std::vector<TaskId> gathers;
      TaskId first_forward;
      for (TaskId t : g.issue_order(RankId{rank})) {
        const ir::Task& task = g.task(t);
        if (task.chunk.value() != chunk) continue;
        const auto* c = std::get_if<ir::Collective>(&task.op);
        if (c != nullptr && c->op == CollectiveOp::kAllGather) gathers.push_back(t);
        const auto* f = std::get_if<ir::Compute>(&task.op);
        if (f != nullptr && f->phase == ir::Phase::kForward && !first_forward.valid()) {
          first_forward = t;
        }
      }
      ASSERT_FALSE(gathers.empty());
      ASSERT_TRUE(first_forward.valid());
      EXPECT_LT(g.issue_position(gathers.front()), g.issue_position(first_forward));
    }
  }
}

TEST(StageCopies, RefuseWhatCannotPairUp) {
  auto odd = make_sync_step({.schedule = "1f1b", .pp = 3, .layers = 3});
  EXPECT_THAT([&] { add_stage_copy_sum(odd.builder, odd.input); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "DualPipe's stage copies: 3 pipeline ranks cannot pair up; expected an even")));
  auto uneven = make_sync_step(dualpipe(1));
  uneven.input.params[3][0].tensors[0].numel = 101;  // rank 3's stage 3 "a": 1 element more
  EXPECT_THAT([&] { add_stage_copy_sum(uneven.builder, uneven.input); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "pipeline ranks 0 and 3 should hold copies of the same two stages, but their "
                  "gradients take 440 and 442 bytes")));
}

}  // namespace
}  // namespace metron::sync
