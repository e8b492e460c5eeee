// The PyTorch DDP lowering (Note [ddp sync] in sync_ddp.cc) on make_sync_step's small steps. Every
// expected value is derived by hand in a comment from docs/SYNC_POLICIES.md §1 and §2.
//
// The default step: pp 1, 4 layers; layer l holds "layers.l.a" (100 elements) and "layers.l.b"
// (10), registered a then b. Gradients of 2 bytes (bf16) unless said otherwise, so a = 200 bytes
// and b = 20 bytes. The gradient-ready order (§2.2 "Rebuild": the order the hooks fire, i.e. the
// backward's, top layer first and, within a layer, the later-registered tensor first) is
//   L3.b L3.a L2.b L2.a L1.b L1.a L0.b L0.a.
// A bucket's last gradient is that of its lowest layer, so its hook fires once the backward has
// passed that layer (§1.1): the pass cuts the backward there (Note [compute pieces]: a backward
// runs its pieces top layers first).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <variant>
#include <vector>

#include "support/sync_step.h"

namespace metron::sync {
namespace {

using testing::buckets_of;
using testing::bytes_of;
using testing::collective;
using testing::compute_tasks;
using testing::layers_of;
using testing::lower_with;
using testing::optimizer_step;

using ir::CollectiveOp;
using ir::LayerRange;
using ir::Phase;
using ir::RankId;
using ir::TaskId;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::issued_collectives;
using testing::IssuedCollective;
using testing::make_sync_step;
using testing::SyncStepSpec;
using ::testing::UnorderedElementsAre;

/// Checks that every collective is an all-reduce issued right after the piece it depends on and
/// that the optimizer step waits for it.
void expect_reduced_right_after(const ir::Graph& g, RankId rank,
                                const std::vector<IssuedCollective>& ars,
                                const std::vector<TaskId>& hook_pieces) {
  ASSERT_EQ(ars.size(), hook_pieces.size());
  const TaskId step = optimizer_step(g, rank);
  for (std::size_t k = 0; k < ars.size(); ++k) {
    EXPECT_EQ(ars[k].op, CollectiveOp::kAllReduce) << k;
    EXPECT_THAT(g.task(ars[k].id).deps, ElementsAre(hook_pieces[k])) << k;
    EXPECT_THAT(g.task(step).deps, Contains(ars[k].id)) << k;
    EXPECT_LT(g.issue_position(ars[k].id), g.issue_position(step)) << k;
  }
}

// ---- steady state -------------------------------------------------------------------------------

// §2.2 rebuild with limits [first_bucket_bytes 100, bucket_cap 440], walking the ready order and
// closing a bucket as soon as its bytes reach the current limit:
//   bucket 0 (limit 100): L3.b 20, L3.a 220 >= 100 -> {L3.b, L3.a}, 220 bytes (overshoots by the
//            one tensor, as §2.2 allows);
//   bucket 1 (limit 440): L2.b 20, L2.a 220, L1.b 240, L1.a 440 >= 440 -> layers 1-2, 440 bytes;
//   bucket 2 (limit 440): L0.b 20, L0.a 220, end of the walk -> layer 0, 220 bytes.
// §2.4/§2.10: microbatch 0 runs under no_sync (no collective); microbatch 1 reduces each bucket
// once, an all-reduce of the whole bucket on the data-parallel group "dp0" (pipeline rank 0).
// §2.3.4: launch strictly in bucket order, so the group's sequence numbers are 0, 1, 2.
TEST(DdpSync, SteadyStateReducesRebuiltBucketsOnTheLastMicrobatch) {
  const ir::Graph g =
      lower_with({.microbatches = 2},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 440, .first_bucket_bytes = 100});
  const auto all = issued_collectives(g, RankId{0});
  ASSERT_EQ(all.size(), 3U);
  EXPECT_THAT(bytes_of(all), ElementsAre(220, 440, 220));
  EXPECT_THAT(buckets_of(all), ElementsAre(0, 1, 2));
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].op, CollectiveOp::kAllReduce) << k;
    EXPECT_EQ(all[k].group, "dp0") << k;
    EXPECT_EQ(all[k].microbatch, 1) << k;
    EXPECT_EQ(collective(g, all[k].id).seq, static_cast<std::int64_t>(k)) << k;
    EXPECT_EQ(collective(g, all[k].id).dtype, ir::DType::kBf16) << k;
  }
  // §2.8: all buckets go through the one process group's NCCL stream, not the compute stream.
  const ir::StreamId stream = g.task(all[0].id).stream;
  EXPECT_NE(stream, g.task(optimizer_step(g, RankId{0})).stream);
  for (const IssuedCollective& c : all) EXPECT_EQ(g.task(c.id).stream, stream);
}

// The lowest layers of buckets 0, 1, 2 (above) are 3, 1 and 0, so microbatch 1's backward [0, 4) is
// cut at 3 and 1 (0 is its lower end): pieces [3,4), [1,3), [0,1), issued top layers first.
// Bucket k's hook fires on the host as the piece holding its lowest layer is enqueued (§1.1), and
// the bucket is launched at once (in-order launch never waits here: bucket k-1's hook point comes
// earlier), so all-reduce k depends on that piece and is issued right after it. finalize_backward
// waits on every bucket (§2.3.5), so the optimizer step depends on all three.
// Microbatch 0's backward, under no_sync, stays whole.
TEST(DdpSync, EachBucketIsReducedRightAfterThePieceProducingItsLowestLayer) {
  const ir::Graph g =
      lower_with({.microbatches = 2},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 440, .first_bucket_bytes = 100});
  const RankId r{0};
  EXPECT_THAT(layers_of(g, compute_tasks(g, r, Phase::kBackward, 0)),
              ElementsAre(LayerRange{0, 4}));
  const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, pieces),
              ElementsAre(LayerRange{3, 4}, LayerRange{1, 3}, LayerRange{0, 1}));
  const auto all = issued_collectives(g, r);
  expect_reduced_right_after(g, r, all, pieces);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    EXPECT_EQ(g.issue_position(all[k].id), g.issue_position(pieces[k]) + 1) << k;
  }
}

// The backward outside no_sync is the last one the stage runs (PyTorch's pipelining counts the
// backwards a stage has seen), not the highest microbatch. Looped BFS on pp 1 with 2 chunks of 2
// layers runs, per chunk, every forward, then the backwards from microbatch 1 down to 0
// (`metron schedule --schedule looped-bfs --pp 1 --vp 2 -m 2`: 0F0 0F1 1F0 1F1 1B1 1B0 0B1 0B0):
// each chunk reduces after its microbatch 0, cut at its buckets' lowest layers; microbatch 1's
// backwards stay whole. (Reducing after microbatch 1 would sum replicas' gradients before
// microbatch 0's were added: found by the model payload's check, issue 21.)
TEST(DdpSync, ReducesAfterTheLastBackwardTheScheduleRunsNotTheHighestMicrobatch) {
  const ir::Graph g =
      lower_with({.schedule = "looped-bfs", .vp = 2, .microbatches = 2},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 200, .first_bucket_bytes = 100});
  const RankId r{0};
  for (std::int32_t chunk = 0; chunk < 2; ++chunk) {
    EXPECT_EQ(compute_tasks(g, r, Phase::kBackward, 1, chunk).size(), 1U) << chunk;
    const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackward, 0, chunk);
    EXPECT_EQ(pieces.size(), 2U) << chunk;  // one piece per layer: buckets of one layer each
    for (const auto& c : issued_collectives(g, r)) {
      if (g.task(c.id).chunk.value() != chunk) continue;
      EXPECT_EQ(g.task(c.id).microbatch.value(), 0);
      EXPECT_THAT(pieces, Contains(g.task(c.id).deps.front()));
    }
  }
}

// Limits [20, 20]: every tensor reaches the limit alone, so each is its own bucket, in the ready
// order: bucket 2j = L(3-j).b (20 bytes), bucket 2j+1 = L(3-j).a (200 bytes). Buckets 2j and 2j+1
// share the lowest layer 3-j, hence the hook point: piece [3-j, 4-j). §2.3.4: launch is strictly in
// bucket order, so after that piece come all-reduce 2j then 2j+1, back to back.
TEST(DdpSync, BucketsSharingAHookPointLaunchInBucketOrder) {
  const ir::Graph g =
      lower_with({.microbatches = 2},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 20, .first_bucket_bytes = 20});
  const RankId r{0};
  const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, pieces),
              ElementsAre(LayerRange{3, 4}, LayerRange{2, 3}, LayerRange{1, 2}, LayerRange{0, 1}));
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 8U);
  EXPECT_THAT(bytes_of(all), ElementsAre(20, 200, 20, 200, 20, 200, 20, 200));
  EXPECT_THAT(buckets_of(all), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  std::vector<TaskId> hooks;
  for (TaskId p : pieces) hooks.insert(hooks.end(), 2, p);
  expect_reduced_right_after(g, r, all, hooks);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    EXPECT_EQ(g.issue_position(all[2 * j].id), g.issue_position(pieces[j]) + 1) << j;
    EXPECT_EQ(g.issue_position(all[2 * j + 1].id), g.issue_position(pieces[j]) + 2) << j;
  }
}

// ---- warm-up ------------------------------------------------------------------------------------

// §2.2 "At construction" (find_unused_parameters=False): limits [sys.maxsize], one bucket of all
// gradients: 4·(100 + 10) = 440 elements = 880 bytes, whatever the caps. Its last gradient is
// layer 0's, the last the backward produces, so its single all-reduce follows the whole backward of
// the last microbatch (which is not cut) and the step waits for it.
TEST(DdpSync, WarmupReducesOneBucketOfEverythingAfterTheWholeBackward) {
  const ir::Graph g = lower_with({.microbatches = 2}, {.policy = SyncPolicy::kDdp,
                                                       .iteration = Iteration::kWarmup,
                                                       .bucket_size = 440,
                                                       .first_bucket_bytes = 100});
  const RankId r{0};
  const std::vector<TaskId> backward = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, backward), ElementsAre(LayerRange{0, 4}));
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].bytes, 880);
  EXPECT_EQ(all[0].microbatch, 1);
  expect_reduced_right_after(g, r, all, backward);
  EXPECT_EQ(g.issue_position(all[0].id), g.issue_position(backward[0]) + 1);
}

// ---- communication hook -------------------------------------------------------------------------

// §2.7 fp16_compress_hook: the bucket is cast to half precision before the all-reduce, so the
// bytes on the wire halve for fp32 gradients. Buckets are still assigned on the fp32 gradients
// (§2.2 counts numel · element_size of the bucket's dtype): with 4-byte gradients, a = 400 and
// b = 40 bytes, and limits [200, 880] give the partition of the first test:
//   bucket 0: 40, 440 >= 200 -> layer 3 (110 elements); bucket 1: 40, 440, 480, 880 >= 880 ->
//   layers 1-2 (220 elements); bucket 2: layer 0 (110 elements).
// Without the hook: 440, 880, 440 bytes of fp32; with it: 220, 440, 220 bytes of fp16.
TEST(DdpSync, Fp16CompressionHalvesTheBytesOfFp32Gradients) {
  const SyncStepSpec spec{.microbatches = 2, .grad_bytes = 4};
  const SyncOptions plain{
      .policy = SyncPolicy::kDdp, .bucket_size = 880, .first_bucket_bytes = 200};
  SyncOptions hooked = plain;
  hooked.comm_hook = CommHook::kFp16Compress;
  const ir::Graph without = lower_with(spec, plain);
  const ir::Graph with = lower_with(spec, hooked);
  const auto uncompressed = issued_collectives(without, RankId{0});
  const auto compressed = issued_collectives(with, RankId{0});
  EXPECT_THAT(bytes_of(uncompressed), ElementsAre(440, 880, 440));
  EXPECT_THAT(bytes_of(compressed), ElementsAre(220, 440, 220));
  for (const IssuedCollective& c : uncompressed)
    EXPECT_EQ(collective(without, c.id).dtype, ir::DType::kFp32);
  for (const IssuedCollective& c : compressed)
    EXPECT_EQ(collective(with, c.id).dtype, ir::DType::kFp16);
}

// §2.7: only fp32 gradients shrink; 2-byte gradients cast to half precision keep their size. With
// 2-byte gradients and limits [100, 440] the partition is again layer 3 / layers 1-2 / layer 0,
// 220, 440, 220 bytes, with or without the hook.
TEST(DdpSync, Fp16CompressionLeavesSixteenBitGradientsAtTheirSize) {
  const SyncStepSpec spec{.microbatches = 2, .grad_bytes = 2};
  const auto bytes = [&](CommHook hook) {
    return bytes_of(issued_collectives(lower_with(spec, {.policy = SyncPolicy::kDdp,
                                                         .bucket_size = 440,
                                                         .first_bucket_bytes = 100,
                                                         .comm_hook = hook}),
                                       RankId{0}));
  };
  EXPECT_THAT(bytes(CommHook::kNone), ElementsAre(220, 440, 220));
  EXPECT_THAT(bytes(CommHook::kFp16Compress), ElementsAre(220, 440, 220));
}

// ---- pipelining and split backward --------------------------------------------------------------

// pp 2, 4 layers: rank 0 holds layers 0-1, rank 1 layers 2-3, each wrapped in its own DDP module
// on its own data-parallel group ("dp0" for pipeline rank 0, "dp1" for rank 1). Limits [100, 440]
// on each rank's ready order:
//   rank 1: L3.b 20, L3.a 220 >= 100 -> bucket 0 = layer 3 (220 bytes); L2.b 20, L2.a 220 < 440,
//           end -> bucket 1 = layer 2 (220 bytes);
//   rank 0: likewise bucket 0 = layer 1, bucket 1 = layer 0, 220 bytes each.
// Microbatches 4: only microbatch 3's backward reduces; it is cut at the buckets' lowest layers:
// rank 1 [3,4) then [2,3), rank 0 [1,2) then [0,1). Each group numbers its own collectives 0, 1.
TEST(DdpSync, EachPipelineRankReducesItsOwnBucketsOnItsOwnGroup) {
  const ir::Graph g =
      lower_with({.pp = 2, .microbatches = 4},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 440, .first_bucket_bytes = 100});
  const std::vector<std::vector<LayerRange>> expected_pieces{{{1, 2}, {0, 1}}, {{3, 4}, {2, 3}}};
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank{r};
    const std::vector<TaskId> pieces = compute_tasks(g, rank, Phase::kBackward, 3);
    ASSERT_THAT(layers_of(g, pieces),
                ::testing::ElementsAreArray(expected_pieces[static_cast<std::size_t>(r)]))
        << r;
    const auto all = issued_collectives(g, rank);
    ASSERT_EQ(all.size(), 2U) << r;
    EXPECT_THAT(bytes_of(all), ElementsAre(220, 220)) << r;
    EXPECT_THAT(buckets_of(all), ElementsAre(0, 1)) << r;
    expect_reduced_right_after(g, rank, all, pieces);
    for (std::size_t k = 0; k < all.size(); ++k) {
      EXPECT_EQ(all[k].group, r == 0 ? "dp0" : "dp1") << r << " " << k;
      EXPECT_EQ(all[k].microbatch, 3) << r << " " << k;
      EXPECT_EQ(collective(g, all[k].id).seq, static_cast<std::int64_t>(k)) << r << " " << k;
      EXPECT_EQ(g.issue_position(all[k].id), g.issue_position(pieces[k]) + 1) << r << " " << k;
    }
  }
}

// Split backward: I computes the input gradient only, W the weight gradients, so the
// AccumulateGrad hooks fire during W. The buckets are those of the first test (layer 3 / layers
// 1-2 / layer 0); microbatch 1's W is cut into [3,4), [1,3), [0,1) and each all-reduce follows its
// W piece, while I stays whole and carries no collective.
TEST(DdpSync, SplitBackwardReducesAfterTheWeightGradientPieces) {
  const ir::Graph g =
      lower_with({.microbatches = 2, .split_backward = true},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 440, .first_bucket_bytes = 100});
  const RankId r{0};
  EXPECT_THAT(layers_of(g, compute_tasks(g, r, Phase::kBackwardInput, 1)),
              ElementsAre(LayerRange{0, 4}));
  const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackwardWeight, 1);
  ASSERT_THAT(layers_of(g, pieces),
              ElementsAre(LayerRange{3, 4}, LayerRange{1, 3}, LayerRange{0, 1}));
  const auto all = issued_collectives(g, r);
  EXPECT_THAT(bytes_of(all), ElementsAre(220, 440, 220));
  expect_reduced_right_after(g, r, all, pieces);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    EXPECT_EQ(g.issue_position(all[k].id), g.issue_position(pieces[k]) + 1) << k;
  }
}

// ---- full replication ---------------------------------------------------------------------------

// replicas 2 of a pp-2 pipeline: replica k's pipeline rank r is graph rank k·2 + r (Note
// [data-parallel replicas]). One all-reduce instance joins the same bucket on ranks r and 2 + r:
// group "dp<r>" = {r, 2 + r}. §9.3.6: every member issues the group's collectives in the same
// order, so the members of one instance carry the same sequence number and bytes. Buckets per rank
// as in the pp-2 test: two of 220 bytes.
TEST(DdpSync, FullReplicationJoinsRanksOfOnePipelineRankWithAgreeingSequenceNumbers) {
  const ir::Graph g =
      lower_with({.pp = 2, .microbatches = 2, .replicas = 2},
                 {.policy = SyncPolicy::kDdp, .bucket_size = 440, .first_bucket_bytes = 100});
  ASSERT_EQ(g.num_ranks(), 4);
  for (std::int32_t r = 0; r < 2; ++r) {
    const auto name = r == 0 ? "dp0" : "dp1";
    const auto group = g.find_group(name);
    ASSERT_TRUE(group.has_value()) << name;
    EXPECT_THAT(g.group(*group).ranks, UnorderedElementsAre(RankId{r}, RankId{2 + r}));
    const auto mine = issued_collectives(g, RankId{r});
    const auto peer = issued_collectives(g, RankId{2 + r});
    ASSERT_EQ(mine.size(), 2U) << r;
    ASSERT_EQ(peer.size(), 2U) << r;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      EXPECT_EQ(mine[k].group, name);
      EXPECT_EQ(peer[k].group, name);
      EXPECT_EQ(mine[k].bytes, 220);
      EXPECT_EQ(peer[k].bytes, 220);
      EXPECT_EQ(collective(g, mine[k].id).seq, static_cast<std::int64_t>(k));
      EXPECT_EQ(collective(g, peer[k].id).seq, static_cast<std::int64_t>(k));
      const std::int32_t instance = g.comm_instance(mine[k].id);
      ASSERT_GE(instance, 0);
      EXPECT_EQ(g.comm_instance(peer[k].id), instance);
      EXPECT_THAT(g.comm_members(instance), UnorderedElementsAre(mine[k].id, peer[k].id));
    }
  }
}

}  // namespace
}  // namespace metron::sync
