// The partitions of bucketing.h on small hand-made chunks. Every expected bucket is derived by hand
// in the comment above it from the upstream rule quoted in docs/SYNC_POLICIES.md; then comm group
// names.

#include "metron/sync/bucketing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "metron/base/error.h"
#include "metron/lowering/comm_groups.h"

namespace metron::sync {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

using Indices = std::vector<std::int32_t>;

ParamTensor tensor(std::int32_t layer, std::int64_t numel) {
  return {.name = "t", .layer = layer, .numel = numel};
}

std::vector<Indices> members(const std::vector<Bucket>& buckets) {
  std::vector<Indices> out;
  for (const Bucket& b : buckets) out.push_back(b.tensors);
  return out;
}

std::vector<std::int64_t> numels(const std::vector<Bucket>& buckets) {
  std::vector<std::int64_t> out;
  for (const Bucket& b : buckets) out.push_back(b.numel);
  return out;
}

std::vector<std::int64_t> padded(const std::vector<Bucket>& buckets) {
  std::vector<std::int64_t> out;
  for (const Bucket& b : buckets) out.push_back(b.padded_numel);
  return out;
}

// [lowest_layer, highest_layer] per bucket.
std::vector<std::pair<std::int32_t, std::int32_t>> layer_spans(const std::vector<Bucket>& buckets) {
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  for (const Bucket& b : buckets) out.emplace_back(b.lowest_layer, b.highest_layer);
  return out;
}

using Span = std::pair<std::int32_t, std::int32_t>;

// ---------------------------------------------------------------------------------------------
// PyTorch DDP (§2.2)

TEST(DdpAssignBySize, OvershootsByOneTensorAndALargeTensorClosesAlone) {
  // numel 10, 20, 5, 100, 3, 7 at 4 bytes = 40, 80, 20, 400, 12, 28 bytes; layers 0,0,1,1,2,2.
  const std::vector<ParamTensor> t = {tensor(0, 10),  tensor(0, 20), tensor(1, 5),
                                      tensor(1, 100), tensor(2, 3),  tensor(2, 7)};
  // Walk 0,1,3,2,4,5 with limits [50, 100]:
  //   first limit 50: t0 40 < 50, t1 -> 120 >= 50: close {0,1} (overshoot by t1); limit -> 100.
  //   t3 400 >= 100: close {3} alone.
  //   t2 20, t4 32, t5 60 < 100: the rest {2,4,5} at the end.
  const auto b = ddp_assign_by_size(t, {0, 1, 3, 2, 4, 5}, 4, {50, 100});
  EXPECT_THAT(members(b), ElementsAre(Indices{0, 1}, Indices{3}, Indices{2, 4, 5}));
  EXPECT_THAT(numels(b), ElementsAre(30, 100, 15));
  EXPECT_THAT(padded(b), ElementsAre(30, 100, 15));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{0, 0}, Span{1, 1}, Span{1, 2}));
  for (const Bucket& x : b) {
    EXPECT_EQ(x.owner, -1);
    EXPECT_FALSE(x.expert);
  }
}

TEST(DdpAssignBySize, ReachingTheLimitExactlyClosesTheBucket) {
  // 1-byte elements, one limit 10: 4+6 = 10 >= 10 closes {0,1}; 10 closes {2}; 3 stays open.
  const std::vector<ParamTensor> t = {tensor(0, 4), tensor(0, 6), tensor(0, 10), tensor(0, 3)};
  EXPECT_THAT(members(ddp_assign_by_size(t, {0, 1, 2, 3}, 1, {10})),
              ElementsAre(Indices{0, 1}, Indices{2}, Indices{3}));
}

TEST(DdpAssignBySize, OmittedTensorsAreInNoBucket) {
  const std::vector<ParamTensor> t = {tensor(0, 4), tensor(0, 6), tensor(0, 10)};
  EXPECT_THAT(members(ddp_assign_by_size(t, {2, 0}, 1, {100})), ElementsAre(Indices{2, 0}));
  EXPECT_THAT(ddp_assign_by_size(t, {}, 1, {100}), IsEmpty());
}

// emb, l0.w, l0.b, l1.w, l1.b, head: the embedding counts as layer 0, the head as layer 1.
std::vector<ParamTensor> two_layer_chunk() {
  return {tensor(0, 100), tensor(0, 40), tensor(0, 4), tensor(1, 40), tensor(1, 4), tensor(1, 100)};
}

TEST(DdpBuckets, RebuiltBucketsFollowGradientReadyOrder) {
  // Ready order: layer 1 in reverse registration (5, 4, 3), then layer 0 (2, 1, 0).
  // Bytes at 2 per element: 5:200 4:8 3:80 2:8 1:80 0:200.
  // Limits [100, 150]: 5 (200 >= 100) alone; limit 150: 4, 3, 2 -> 96, 1 -> 176 >= 150 closes
  // {4,3,2,1}; 0 (200 >= 150) alone.
  const auto b = ddp_buckets(two_layer_chunk(), 2, 100, 150, true);
  EXPECT_THAT(members(b), ElementsAre(Indices{5}, Indices{4, 3, 2, 1}, Indices{0}));
  EXPECT_THAT(numels(b), ElementsAre(100, 88, 100));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{1, 1}, Span{0, 1}, Span{0, 0}));
}

TEST(DdpBuckets, FirstBucketLimitAppliesOnlyToBucketZero) {
  // Limits [210, 150]: 5 -> 200, 4 -> 208 < 210, 3 -> 288 >= 210 closes {5,4,3} (the last layer);
  // limit 150: 2 -> 8, 1 -> 88, 0 -> 288 >= 150 closes {2,1,0}.
  const auto b = ddp_buckets(two_layer_chunk(), 2, 210, 150, true);
  EXPECT_THAT(members(b), ElementsAre(Indices{5, 4, 3}, Indices{2, 1, 0}));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{1, 1}, Span{0, 0}));
}

TEST(DdpBuckets, WarmUpIsOneBucketInRegistrationOrder) {
  // Limit [maxsize] over registration order: one bucket, numel 100+40+4+40+4+100 = 288.
  const auto b = ddp_buckets(two_layer_chunk(), 2, 100, 150, false);
  EXPECT_THAT(members(b), ElementsAre(Indices{0, 1, 2, 3, 4, 5}));
  EXPECT_THAT(numels(b), ElementsAre(288));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{0, 1}));
  EXPECT_THAT(ddp_buckets({}, 2, 100, 150, false), IsEmpty());
  EXPECT_THAT(ddp_buckets({}, 2, 100, 150, true), IsEmpty());
}

TEST(DdpBuckets, RejectsBadSizesAndOrders) {
  const std::vector<ParamTensor> t = {tensor(0, 4)};
  EXPECT_THAT(
      [&] { ddp_buckets(t, 2, 100, 0, true); },
      ThrowsMessage<InvalidConfig>(HasSubstr("ddp_buckets: bucket_bytes is 0; expected >= 1")));
  EXPECT_THAT([&] { ddp_buckets(t, 2, -1, 10, false); },
              ThrowsMessage<InvalidConfig>(HasSubstr("first_bucket_bytes is -1")));
  EXPECT_THAT([&] { ddp_assign_by_size(t, {0}, 0, {10}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("element_bytes is 0; expected >= 1")));
  EXPECT_THAT([&] { ddp_assign_by_size(t, {0}, 2, {}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("byte_limits is empty")));
  EXPECT_THAT(
      [&] {
        ddp_assign_by_size(t, {0}, 2, {10, 0});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("byte_limits[1] is 0")));
  EXPECT_THAT([&] { ddp_assign_by_size(t, {1}, 2, {10}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("order[0] is 1; expected 0..0")));
  EXPECT_THAT(
      [&] {
        ddp_assign_by_size(t, {0, 0}, 2, {10});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("order[1] names tensor 0 again")));
  const std::vector<ParamTensor> bad = {{.name = "layers.0.w", .layer = 0, .numel = -3}};
  EXPECT_THAT([&] { ddp_buckets(bad, 2, 10, 10, true); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("ddp_buckets: tensor 0 (\"layers.0.w\") has numel -3; expected >= 0")));
}

// ---------------------------------------------------------------------------------------------
// Megatron _ParamAndGradBuffer (§3.2)

// a(L0,30) b(L0,50) c(L1,20) d(L1,10) e(L2,45), all dense; walked e, d, c, b, a.
std::vector<ParamTensor> megatron_chunk() {
  return {tensor(0, 30), tensor(0, 50), tensor(1, 20), tensor(1, 10), tensor(2, 45)};
}

TEST(MegatronBuckets, WithoutPaddingClosesAtTheBucketSize) {
  // bucket 100: e 45, d 55, c 75, b 125 >= 100 closes {4,3,2,1}; a 30 is the last bucket.
  const auto b = megatron_buckets(megatron_chunk(), 100, 3, false);
  EXPECT_THAT(members(b), ElementsAre(Indices{4, 3, 2, 1}, Indices{0}));
  EXPECT_THAT(numels(b), ElementsAre(125, 30));
  EXPECT_THAT(padded(b), ElementsAre(125, 30));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{0, 2}, Span{0, 0}));
}

TEST(MegatronBuckets, DistributedOptimizerPadsStartsTo64AndEndsToLcmOfDAnd128) {
  // d = 3: bucket ends round up to lcm(3, 128) = 384; tensor starts to multiples of 64.
  //   e [0,45); d starts at 64: [64,74); c starts at 128: [128,148): 148 - 0 >= 100 closes
  //   {4,3,2} (numel 75) and its end pads to 384 (without padding c would not close it: 75 < 100).
  //   b [384,434): 50; a starts at 448: [448,478): 94 < 100; the end 478 pads to 768: span 384.
  const auto b = megatron_buckets(megatron_chunk(), 100, 3, true);
  EXPECT_THAT(members(b), ElementsAre(Indices{4, 3, 2}, Indices{1, 0}));
  EXPECT_THAT(numels(b), ElementsAre(75, 80));
  EXPECT_THAT(padded(b), ElementsAre(384, 384));
}

TEST(MegatronBuckets, NoBucketSizeMeansOneBucketPerBuffer) {
  // Without distopt: all 155 elements. With d = 3: e [0,45) d [64,74) c [128,148) b [192,242)
  // a [256,286): the end pads to 384.
  EXPECT_THAT(members(megatron_buckets(megatron_chunk(), std::nullopt, 3, false)),
              ElementsAre(Indices{4, 3, 2, 1, 0}));
  const auto b = megatron_buckets(megatron_chunk(), std::nullopt, 3, true);
  EXPECT_THAT(numels(b), ElementsAre(155));
  EXPECT_THAT(padded(b), ElementsAre(384));
}

TEST(MegatronBuckets, BucketEndPadsPastSeveralMultiples) {
  // d = 3, one tensor of 400 elements: [0,400) pads to 768 = 2 * 384.
  const auto b = megatron_buckets({tensor(0, 400)}, std::nullopt, 3, true);
  EXPECT_THAT(padded(b), ElementsAre(768));
}

// x(L0,10) emb(L0,100,shared) w0(L0,30) w1(L1,200); walked w1, w0, emb, x.
std::vector<ParamTensor> shared_embedding_chunk() {
  std::vector<ParamTensor> t = {tensor(0, 10), tensor(0, 100), tensor(0, 30), tensor(1, 200)};
  t[1].shared_embedding = true;
  return t;
}

TEST(MegatronBuckets, SharedEmbeddingGetsItsOwnBucketWithTheDistributedOptimizer) {
  // d = 3 (lcm 384), no size limit: w1 [0,200); w0 starts at 256: [256,286); emb: its start 320
  // closes {3,2} (numel 230) padded to 384; emb [384,484) closes alone, padded to 768 (span
  // 384); x [768,778) pads to 1152 (span 384).
  const auto b = megatron_buckets(shared_embedding_chunk(), std::nullopt, 3, true);
  EXPECT_THAT(members(b), ElementsAre(Indices{3, 2}, Indices{1}, Indices{0}));
  EXPECT_THAT(numels(b), ElementsAre(230, 100, 10));
  EXPECT_THAT(padded(b), ElementsAre(384, 384, 384));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{0, 1}, Span{0, 0}, Span{0, 0}));
}

TEST(MegatronBuckets, SharedEmbeddingSplitNeedsTheDistributedOptimizer) {
  // The split sits with the distopt padding rules: plain DDP keeps one bucket of 340 elements.
  const auto b = megatron_buckets(shared_embedding_chunk(), std::nullopt, 3, false);
  EXPECT_THAT(members(b), ElementsAre(Indices{3, 2, 1, 0}));
  EXPECT_THAT(padded(b), ElementsAre(340));
}

TEST(MegatronBuckets, SharedEmbeddingFirstInTheWalkOpensNoEmptyBucket) {
  // Walk: emb first (registered last). It closes alone: [0,100) -> 384; then w [384,414) -> 768.
  std::vector<ParamTensor> t = {tensor(0, 30), tensor(1, 100)};
  t[1].shared_embedding = true;
  const auto b = megatron_buckets(t, std::nullopt, 3, true);
  EXPECT_THAT(members(b), ElementsAre(Indices{1}, Indices{0}));
  EXPECT_THAT(padded(b), ElementsAre(384, 384));
}

// a(L0, dense 30) ex0(L0, expert 50) b(L1, dense 40) ex1(L1, expert 60).
std::vector<ParamTensor> moe_chunk() {
  std::vector<ParamTensor> t = {tensor(0, 30), tensor(0, 50), tensor(1, 40), tensor(1, 60)};
  t[1].expert = true;
  t[3].expert = true;
  return t;
}

TEST(MegatronBuckets, ExpertTensorsLiveInTheirOwnBucketsAfterTheDenseOnes) {
  // bucket 60, no padding. Dense walk b 40, a 70 >= 60: {2,0}. Expert walk ex1 60 >= 60: {3};
  // ex0 50: {1} at the end.
  const auto b = megatron_buckets(moe_chunk(), 60, 3, false);
  EXPECT_THAT(members(b), ElementsAre(Indices{2, 0}, Indices{3}, Indices{1}));
  EXPECT_THAT(numels(b), ElementsAre(70, 60, 50));
  EXPECT_FALSE(b[0].expert);
  EXPECT_TRUE(b[1].expert);
  EXPECT_TRUE(b[2].expert);
}

TEST(MegatronBuckets, ExpertBufferPadsForTheExpertDataParallelSize) {
  // Dense, d = 3: b [0,40), a [64,94) -> 384. Expert, edp = 256: lcm(256,128) = 256:
  // ex1 [0,60), ex0 [64,114) -> 256. Without edp the expert buffer uses d: 384.
  const auto b = megatron_buckets(moe_chunk(), std::nullopt, 3, true, 256);
  EXPECT_THAT(members(b), ElementsAre(Indices{2, 0}, Indices{3, 1}));
  EXPECT_THAT(numels(b), ElementsAre(70, 110));
  EXPECT_THAT(padded(b), ElementsAre(384, 256));
  EXPECT_THAT(padded(megatron_buckets(moe_chunk(), std::nullopt, 3, true)), ElementsAre(384, 384));
}

TEST(MegatronBuckets, DefaultBucketSizeIsMaxOf40MAnd1MPerRank) {
  EXPECT_EQ(megatron_default_bucket_params(1), 40'000'000);
  EXPECT_EQ(megatron_default_bucket_params(40), 40'000'000);  // 1M * 40 = 40M: equal
  EXPECT_EQ(megatron_default_bucket_params(64), 64'000'000);
  EXPECT_THAT([] { megatron_default_bucket_params(0); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("megatron_default_bucket_params: data_parallel is 0; expected >= 1")));
}

TEST(MegatronBuckets, RejectsBadSizes) {
  EXPECT_THAT([] { megatron_buckets(megatron_chunk(), 100, 0, true); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("megatron_buckets: data_parallel is 0; expected >= 1")));
  EXPECT_THAT([] { megatron_buckets(megatron_chunk(), 0, 2, false); },
              ThrowsMessage<InvalidConfig>(HasSubstr("bucket_params is 0")));
  EXPECT_THAT([] { megatron_buckets(megatron_chunk(), 10, 2, true, -4); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expert_data_parallel is -4")));
}

// ---------------------------------------------------------------------------------------------
// fairscale OSS and ShardedDataParallel (§4.1, §4.2)

TEST(OssPartition, GreedyLeastLoadedInRegistrationOrder) {
  // world 3, numel 50 30 20 40 10 10 5; totals after each step:
  //   50 -> r0 [50,0,0] (tie: lowest); 30 -> r1 [50,30,0]; 20 -> r2 [50,30,20];
  //   40 -> r2 [50,30,60]; 10 -> r1 [50,40,60]; 10 -> r1 [50,50,60]; 5 -> r0 (tie 50/50).
  const std::vector<ParamTensor> t = {tensor(0, 50), tensor(0, 30), tensor(0, 20), tensor(0, 40),
                                      tensor(0, 10), tensor(0, 10), tensor(0, 5)};
  EXPECT_THAT(oss_partition(t, 3), ElementsAre(0, 1, 2, 2, 1, 1, 0));
  EXPECT_THAT(oss_partition({}, 3), IsEmpty());
  EXPECT_THAT([&] { oss_partition(t, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("oss_partition: world is 0; expected >= 1")));
}

TEST(ShardedDdpPlan, SmallestTensorsFillTheirOwnersBucketsStrictlyBelowCapacity) {
  // numel 100 5 35 5 20 50, owners 0 1 0 0 1 1, world 3, capacity 40.
  // Sorted by numel (stable): t1 5, t3 5, t4 20, t2 35, t5 50, t0 100.
  //   t1 -> r1 (0+5 < 40, fill 5); t3 -> r0 (fill 5); t4 -> r1 (5+20 = 25 < 40);
  //   t2: r0 5+35 = 40, not < 40: direct; t5: 25+50: direct; t0: direct.
  // Rank 2 owns nothing: no bucket. Direct in registration order: 0, 2, 5.
  const std::vector<ParamTensor> t = {tensor(0, 100), tensor(0, 5),  tensor(1, 35),
                                      tensor(1, 5),   tensor(2, 20), tensor(2, 50)};
  const ShardedDdpPlan plan = sharded_ddp_plan(t, {0, 1, 0, 0, 1, 1}, 3, 40);
  EXPECT_THAT(members(plan.buckets), ElementsAre(Indices{3}, Indices{1, 4}));
  EXPECT_EQ(plan.buckets[0].owner, 0);
  EXPECT_EQ(plan.buckets[1].owner, 1);
  EXPECT_THAT(numels(plan.buckets), ElementsAre(5, 25));
  EXPECT_THAT(padded(plan.buckets), ElementsAre(5, 25));
  EXPECT_THAT(layer_spans(plan.buckets), ElementsAre(Span{1, 1}, Span{0, 2}));
  EXPECT_THAT(plan.direct, ElementsAre(0, 2, 5));
}

TEST(ShardedDdpPlan, ZeroCapacityDisablesBucketing) {
  const std::vector<ParamTensor> t = {tensor(0, 1), tensor(0, 2)};
  const ShardedDdpPlan plan = sharded_ddp_plan(t, {0, 0}, 1, 0);
  EXPECT_THAT(plan.buckets, IsEmpty());
  EXPECT_THAT(plan.direct, ElementsAre(0, 1));
}

TEST(ShardedDdpPlan, RejectsBadOwnersAndSizes) {
  const std::vector<ParamTensor> t = {tensor(0, 1), tensor(0, 2)};
  EXPECT_THAT([&] { sharded_ddp_plan(t, {0}, 2, 10); },
              ThrowsMessage<InvalidConfig>(HasSubstr("sharded_ddp_plan: 1 owners for 2 tensors")));
  EXPECT_THAT(
      [&] {
        sharded_ddp_plan(t, {0, 2}, 2, 10);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("owner of tensor 1 is 2; expected 0..1")));
  EXPECT_THAT(
      [&] {
        sharded_ddp_plan(t, {0, 0}, 0, 10);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("world is 0")));
  EXPECT_THAT(
      [&] {
        sharded_ddp_plan(t, {0, 0}, 1, -1);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("capacity is -1; expected >= 0")));
}

// ---------------------------------------------------------------------------------------------
// DeepSpeed IPG buckets (§5.2)

TEST(ZeroIpgBuckets, FlushesBeforeOverflowAndReducesALargeTensorAlone) {
  // a(L0,30) b(L0,40) c(L1,25) d(L1,150) e(L2,50) f(L2,50), bucket 100.
  // Ready order: f e (layer 2), d c (layer 1), b a (layer 0).
  //   f 50; e 100 (not > 100: stays, exactly full); d: 250 > 100 flushes {5,4}; d alone 150;
  //   c: 175 > 100 flushes {3}; c 25, b 65, a 95: {2,1,0} at the end.
  const std::vector<ParamTensor> t = {tensor(0, 30),  tensor(0, 40), tensor(1, 25),
                                      tensor(1, 150), tensor(2, 50), tensor(2, 50)};
  const auto b = zero_ipg_buckets(t, 100);
  EXPECT_THAT(members(b), ElementsAre(Indices{5, 4}, Indices{3}, Indices{2, 1, 0}));
  EXPECT_THAT(numels(b), ElementsAre(100, 150, 95));
  EXPECT_THAT(layer_spans(b), ElementsAre(Span{2, 2}, Span{1, 1}, Span{0, 1}));
  EXPECT_THAT(zero_ipg_buckets({}, 100), IsEmpty());
  EXPECT_THAT([&] { zero_ipg_buckets(t, 0); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("zero_ipg_buckets: bucket_elements is 0; expected >= 1")));
}

// ---------------------------------------------------------------------------------------------
// FSDP wrapping units (§6)

TEST(FsdpUnits, RootUnitFirstThenOneUnitPerLayer) {
  // emb(L0,10,outside) l0.w(L0,7) l0.b(L0,2) l1.w(L1,7) l1.b(L1,2) norm(L1,3,outside)
  // head(L1,11,outside), 4 shards. Root {0,5,6}: 24 (a multiple of 4); layer 0 {1,2}: 9 -> 12;
  // layer 1 {3,4}: 9 -> 12.
  std::vector<ParamTensor> t = {tensor(0, 10), tensor(0, 7), tensor(0, 2), tensor(1, 7),
                                tensor(1, 2),  tensor(1, 3), tensor(1, 11)};
  t[0].outside_layers = true;
  t[5].outside_layers = true;
  t[6].outside_layers = true;
  const auto u = fsdp_units(t, 4);
  EXPECT_THAT(members(u), ElementsAre(Indices{0, 5, 6}, Indices{1, 2}, Indices{3, 4}));
  EXPECT_THAT(numels(u), ElementsAre(24, 9, 9));
  EXPECT_THAT(padded(u), ElementsAre(24, 12, 12));
  EXPECT_THAT(layer_spans(u), ElementsAre(Span{0, 1}, Span{0, 0}, Span{1, 1}));
}

TEST(FsdpUnits, LayersInAscendingOrderAndNoRootWhenNothingIsOutside) {
  // l5.w(L5,8) registered before l4.w(L4,5) l4.b(L4,1); 4 shards: layer 4 {1,2} 6 -> 8,
  // layer 5 {0} 8 -> 8.
  const std::vector<ParamTensor> t = {tensor(5, 8), tensor(4, 5), tensor(4, 1)};
  const auto u = fsdp_units(t, 4);
  EXPECT_THAT(members(u), ElementsAre(Indices{1, 2}, Indices{0}));
  EXPECT_THAT(padded(u), ElementsAre(8, 8));
  EXPECT_THAT([&] { fsdp_units(t, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("fsdp_units: shards is 0; expected >= 1")));
}

// ---------------------------------------------------------------------------------------------
// Communication group names

TEST(CommGroups, NamesRoundTripForEveryKind) {
  const std::vector<std::pair<lowering::GroupKind, const char*>> kinds = {
      {lowering::GroupKind::kTensor, "tp"},
      {lowering::GroupKind::kContext, "cp"},
      {lowering::GroupKind::kExpert, "ep"},
      {lowering::GroupKind::kData, "dp"},
      {lowering::GroupKind::kExpertData, "edp"},
      {lowering::GroupKind::kDataIntra, "dp-intra"},
      {lowering::GroupKind::kDataInter, "dp-inter"},
      {lowering::GroupKind::kExpertIntra, "edp-intra"},
      {lowering::GroupKind::kExpertInter, "edp-inter"},
      {lowering::GroupKind::kStageCopies, "pp-copies"}};
  for (const auto& [kind, text] : kinds) {
    EXPECT_EQ(lowering::to_string(kind), text);
    EXPECT_EQ(lowering::group_name(kind, 17), std::string(text) + "17");
    EXPECT_EQ(lowering::group_kind(lowering::group_name(kind, 0)), kind) << text;
    EXPECT_EQ(lowering::group_kind(lowering::group_name(kind, 17)), kind) << text;
  }
}

TEST(CommGroups, KindsThatArePrefixesOfOthersDoNotMatchLongerNames) {
  EXPECT_EQ(lowering::group_kind("dp-intra3"), lowering::GroupKind::kDataIntra);
  EXPECT_EQ(lowering::group_kind("dp3"), lowering::GroupKind::kData);
  EXPECT_EQ(lowering::group_kind("edp-inter0"), lowering::GroupKind::kExpertInter);
  EXPECT_EQ(lowering::group_kind("edp0"), lowering::GroupKind::kExpertData);
  EXPECT_EQ(lowering::group_kind("ep2"), lowering::GroupKind::kExpert);
  EXPECT_EQ(lowering::group_kind("edp2"), lowering::GroupKind::kExpertData);
}

TEST(CommGroups, NamesNoPassMakesHaveNoKind) {
  for (const char* name : {"pp0", "dp", "dp-", "dp-intra", "edp-inter", "dpx1", "tp3a", "", "3",
                           "dp-intra-1", "ep 2", "dp-inter+1"}) {
    EXPECT_EQ(lowering::group_kind(name), std::nullopt) << name;
  }
  EXPECT_THAT([] { lowering::group_name(lowering::GroupKind::kData, -1); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("group_name: index of a \"dp\" group is -1; expected >= 0")));
}

}  // namespace
}  // namespace metron::sync
