// The Megatron-LM DDP and distributed-optimizer lowering (Note [megatron sync] in
// sync_megatron.cc) on make_sync_step's small steps. Every expected value is derived by hand in a
// comment from docs/SYNC_POLICIES.md §1 and §3 (and docs/SCHEDULES.md §1.3–1.4, §1.7 for the
// schedules).
//
// The default step: pp 1, 4 layers; layer l holds "layers.l.a" (100 elements) and "layers.l.b"
// (10), registered a then b; bf16 weights (2 bytes), 2-byte gradients, data_parallel 2.
// Megatron lays a buffer out in reverse registration order (§3.2): L3.b L3.a L2.b L2.a ... L0.a,
// closing a bucket once end − bucket_start >= bucket_size (in elements). With the distributed
// optimizer every tensor starts at a multiple of 64 and every bucket ends at a multiple of
// lcm(d, 128). Bucket g[0] holds the last layers; its collective goes first.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using testing::buckets_of;
using testing::bytes_of;
using testing::collective;
using testing::compute_tasks;
using testing::layers_of;
using testing::lower_with;
using testing::of_op;

using ir::CollectiveOp;
using ir::LayerRange;
using ir::Phase;
using ir::RankId;
using ir::TaskId;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::issued_collectives;
using testing::IssuedCollective;
using testing::make_sync_step;
using ::testing::Not;
using testing::SyncStep;
using testing::SyncStepSpec;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

ir::Graph build_with(SyncStep step, const SyncOptions& options) {
  add_sync_policy(step.builder, step.input, options);
  return std::move(step.builder).build();  // validates
}

/// `rank`'s compute tasks of `phase` satisfying `keep`, in issue order.
std::vector<TaskId> compute_tasks(const ir::Graph& g, RankId rank, Phase phase,
                                  const std::function<bool(const ir::Task&)>& keep) {
  std::vector<TaskId> out;
  for (TaskId t : g.issue_order(rank)) {
    const auto* c = std::get_if<ir::Compute>(&g.task(t).op);
    if (c != nullptr && c->phase == phase && keep(g.task(t))) out.push_back(t);
  }
  return out;
}

std::vector<TaskId> optimizer_steps(const ir::Graph& g, RankId rank) {
  return compute_tasks(g, rank, Phase::kOptimizer, [](const ir::Task&) { return true; });
}

/// Issue position of the rank's last send or receive (-1 when it has none).
std::int32_t last_transfer_position(const ir::Graph& g, RankId rank) {
  std::int32_t last = -1;
  for (TaskId t : g.issue_order(rank)) {
    const ir::TaskKind kind = g.task(t).kind();
    if (kind == ir::TaskKind::kSend || kind == ir::TaskKind::kRecv) last = g.issue_position(t);
  }
  return last;
}

std::vector<std::int32_t> chunks_of(const ir::Graph& g, const std::vector<IssuedCollective>& all) {
  std::vector<std::int32_t> out;
  for (const IssuedCollective& c : all) out.push_back(g.task(c.id).chunk.value());
  return out;
}

/// Each collective depends on `anchors[k]` and is issued right after it (several after one anchor
/// back to back, in the given order); the (first) optimizer step waits for each.
void expect_issued_right_after(const ir::Graph& g, RankId rank,
                               const std::vector<IssuedCollective>& all,
                               const std::vector<TaskId>& anchors) {
  ASSERT_EQ(all.size(), anchors.size());
  const TaskId step = optimizer_steps(g, rank).front();
  std::int32_t expected = -1;
  for (std::size_t k = 0; k < all.size(); ++k) {
    const std::int32_t anchor = g.issue_position(anchors[k]);
    expected = (k > 0 && anchors[k] == anchors[k - 1]) ? expected + 1 : anchor + 1;
    EXPECT_EQ(g.issue_position(all[k].id), expected) << k;
    EXPECT_THAT(g.task(all[k].id).deps, Contains(anchors[k])) << k;
    EXPECT_THAT(g.task(step).deps, Contains(all[k].id)) << k;
  }
}

// ---- megatron-ddp: gradient all-reduce ----------------------------------------------------------

// §3.1: without overlap_grad_reduce the bucket size is forced to None (one bucket per buffer,
// whatever --ddp-bucket-size says) and the collective runs synchronously in finish_grad_sync,
// which finalize_model_grads calls after the last backward (§3.4.4). One dense buffer of
// 4·(100 + 10) = 440 elements, no padding without the distributed optimizer (§3.2): one all-reduce
// of 880 bytes on "dp0", after microbatch 1's backward (not cut: no hook fires), before the step,
// which waits for it.
TEST(MegatronDdpSync, WithoutOverlapOneAllReducePerBufferAtFinishGradSync) {
  const ir::Graph g =
      lower_with({.microbatches = 2}, {.policy = SyncPolicy::kMegatronDdp, .bucket_size = 110});
  const RankId r{0};
  const std::vector<TaskId> backward = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, backward), ElementsAre(LayerRange{0, 4}));
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(all[0].group, "dp0");
  EXPECT_EQ(all[0].bytes, 880);
  EXPECT_EQ(all[0].microbatch, 1);
  expect_issued_right_after(g, r, all, backward);
}

// §3.8: expert parameters live in their own buffer, reduced over the expert-data-parallel group,
// which has its own NCCL stream (§1.3). Flagging every "layers.l.b" as an expert weight gives a
// dense buffer of 4·100 = 400 elements (800 bytes on "dp0") and an expert buffer of 4·10 = 40
// elements (80 bytes on "edp0"): one all-reduce per buffer, both after the last backward.
TEST(MegatronDdpSync, ExpertParametersAreReducedAsTheirOwnBufferOnTheirOwnGroup) {
  SyncStep step = make_sync_step({.microbatches = 2});
  for (ParamTensor& t : step.input.params[0][0].tensors) t.expert = t.name.ends_with(".b");
  const ir::Graph g = build_with(std::move(step), {.policy = SyncPolicy::kMegatronDdp});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 2U);
  const IssuedCollective& dense = all[0].group == "dp0" ? all[0] : all[1];
  const IssuedCollective& expert = all[0].group == "dp0" ? all[1] : all[0];
  EXPECT_EQ(dense.group, "dp0");
  EXPECT_EQ(dense.bytes, 800);
  EXPECT_EQ(expert.group, "edp0");
  EXPECT_EQ(expert.bytes, 80);
  EXPECT_NE(g.task(dense.id).stream, g.task(expert.id).stream);
  const TaskId backward = compute_tasks(g, r, Phase::kBackward, 1).back();
  for (const IssuedCollective& c : all) {
    EXPECT_EQ(c.op, CollectiveOp::kAllReduce);
    EXPECT_THAT(g.task(c.id).deps, Contains(backward));
    EXPECT_GT(g.issue_position(c.id), g.issue_position(backward));
  }
}

// pp 2, 4 layers, 4 microbatches, no overlap: each rank's one buffer (layers 0-1 on rank 0, 2-3 on
// rank 1; 220 elements = 440 bytes) is all-reduced on its group "dp<r>" in finish_grad_sync.
// finalize_model_grads runs after the pipeline schedule returns (docs/SCHEDULES.md §1.3 "finally":
// after the cooldown, including its last send_backward), so the all-reduce depends on the rank's
// last backward (B of microbatch 3) and is issued after every transfer of the rank, before the
// step.
TEST(MegatronDdpSync, WithoutOverlapEachRankReducesAfterItsPipelineSchedule) {
  const ir::Graph g =
      lower_with({.pp = 2, .microbatches = 4}, {.policy = SyncPolicy::kMegatronDdp});
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank{r};
    const auto all = issued_collectives(g, rank);
    ASSERT_EQ(all.size(), 1U) << r;
    EXPECT_EQ(all[0].group, r == 0 ? "dp0" : "dp1");
    EXPECT_EQ(all[0].bytes, 440);
    const TaskId last_backward = compute_tasks(g, rank, Phase::kBackward, 3).back();
    EXPECT_THAT(g.task(all[0].id).deps, Contains(last_backward)) << r;
    EXPECT_GT(g.issue_position(all[0].id), last_transfer_position(g, rank)) << r;
    const TaskId step = optimizer_steps(g, rank).front();
    EXPECT_LT(g.issue_position(all[0].id), g.issue_position(step)) << r;
    EXPECT_THAT(g.task(step).deps, Contains(all[0].id)) << r;
  }
}

// pp 2, 8 layers (rank 0: layers 0-3, rank 1: 4-7), 4 microbatches, overlap_grad_reduce,
// bucket_size 150 elements. §3.1: bucketing only on pipeline rank 0.
//   rank 0: L3.b end 10, L3.a 110, L2.b 120, L2.a 220 >= 150 -> bucket 0 = layers 2-3 (220
//           elements, 440 bytes); L1.b, L1.a, L0.b, L0.a: 220 >= 150 -> bucket 1 = layers 0-1;
//   rank 1: one bucket of 4·110 = 440 elements, 880 bytes.
// Rank 0 is the first stage: its last backward (B of microbatch 3) runs with sync enabled and the
// hooks fire per bucket (§3.9): the backward is cut at 2 into [2,4) and [0,2), each all-reduce
// right after its piece.
void expect_first_stage_hooks(const ir::Graph& g) {
  const RankId r{0};
  const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackward, 3);
  ASSERT_THAT(layers_of(g, pieces), ElementsAre(LayerRange{2, 4}, LayerRange{0, 2}));
  const auto all = issued_collectives(g, r);
  EXPECT_THAT(bytes_of(all), ElementsAre(440, 440));
  expect_issued_right_after(g, r, all, pieces);
}

// Without align_grad_reduce there is no grad_sync_func, so the last backward runs with sync enabled
// on every stage (docs/SCHEDULES.md §1.7): rank 1's single bucket is launched by its hook inside
// the backward, right after it and before that backward's gradient is sent.
TEST(MegatronDdpSync, OverlapWithoutAlignmentFiresHooksOnEveryStage) {
  const ir::Graph g =
      lower_with({.pp = 2, .microbatches = 4, .layers = 8}, {.policy = SyncPolicy::kMegatronDdp,
                                                             .bucket_size = 150,
                                                             .overlap_grad_reduce = true,
                                                             .align_grad_reduce = false});
  expect_first_stage_hooks(g);
  const RankId r{1};
  const std::vector<TaskId> backward = compute_tasks(g, r, Phase::kBackward, 3);
  ASSERT_THAT(layers_of(g, backward), ElementsAre(LayerRange{4, 8}));
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].bytes, 880);
  expect_issued_right_after(g, r, all, backward);
}

// With align_grad_reduce (the default), only the first stage reduces by hooks; the other stages
// (one bucket each) launch their sync through grad_sync_func after the cooldown (§3.9,
// docs/SCHEDULES.md §1.3: after the last send_backward): rank 1's all-reduce depends on its last
// backward but is issued after every transfer of the rank, before the step.
TEST(MegatronDdpSync, AlignedGradReduceLaunchesLaterStagesAfterTheCooldown) {
  const ir::Graph g = lower_with(
      {.pp = 2, .microbatches = 4, .layers = 8},
      {.policy = SyncPolicy::kMegatronDdp, .bucket_size = 150, .overlap_grad_reduce = true});
  expect_first_stage_hooks(g);
  const RankId r{1};
  const std::vector<TaskId> backward = compute_tasks(g, r, Phase::kBackward, 3);
  ASSERT_THAT(layers_of(g, backward), ElementsAre(LayerRange{4, 8}));
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].bytes, 880);
  EXPECT_THAT(g.task(all[0].id).deps, Contains(backward[0]));
  EXPECT_GT(g.issue_position(all[0].id), last_transfer_position(g, r));
  const TaskId step = optimizer_steps(g, r).front();
  EXPECT_LT(g.issue_position(all[0].id), g.issue_position(step));
  EXPECT_THAT(g.task(step).deps, Contains(all[0].id));
}

// Interleaved 1F1B, pp 2, vp 2, 4 microbatches, 8 layers: stage s holds layers 2s, 2s+1; rank 0
// holds stages 0 and 2 (chunks 0, 1), rank 1 stages 1 and 3 (looped placement).
// Schedule (docs/SCHEDULES.md §1.4, N = p = 2): virtual step k -> (microbatch, chunk) =
//   0 (0,0) 1 (1,0) 2 (0,1) 3 (1,1) 4 (2,0) 5 (3,0) 6 (2,1) 7 (3,1);
// backward step k runs chunk 1 − chunk_k:
//   B0 (0,c1) B1 (1,c1) B2 (0,c0) B3 (1,c0) B4 (2,c1) B5 (3,c1) B6 (2,c0) B7 (3,c0).
// A rank runs its backwards in step order (F[0..w), then F/B pairs, then the rest), so its n-th
// backward task is step n. Chunk 1's last microbatch is backward step 5, chunk 0's step 7.
// align_grad_reduce (§3.9, docs/SCHEDULES.md §1.7): after backward step k, rank r launches the sync
// of the chunk whose last microbatch was step k − r; chunks left over are flushed after the
// cooldown:
//   rank 0: chunk 1 after step 5, chunk 0 after step 7;
//   rank 1: chunk 1 after step 6 (k − 1 = 5), chunk 0 at k = 8 > 7: flushed after the cooldown.
// Buckets (overlap_grad_reduce, bucket_size 110; §3.1 buckets only pp rank 0's chunk 0):
//   rank 0 chunk 0: L1.b end 10, L1.a end 110 >= 110 -> {L1}; then {L0}: 110 elements, 220 bytes
//   each; rank 0 chunk 1 and both chunks of rank 1: one bucket of 220 elements, 440 bytes.
// start_grad_sync dispatches a chunk's groups together, each depending on what the compute stream
// has done up to the launch point (§1.1): the backward it follows.
TEST(MegatronDdpSync, InterleavedAlignedGradReduceLaunchesChunksAtShiftedBackwardSteps) {
  const ir::Graph g = lower_with(
      {.schedule = "interleaved-1f1b", .pp = 2, .vp = 2, .microbatches = 4, .layers = 8},
      {.policy = SyncPolicy::kMegatronDdp, .bucket_size = 110, .overlap_grad_reduce = true});
  const auto backwards = [&](RankId rank) {
    return compute_tasks(g, rank, Phase::kBackward, [](const ir::Task&) { return true; });
  };
  {
    const RankId r{0};
    const std::vector<TaskId> b = backwards(r);
    ASSERT_EQ(b.size(), 8U);
    const auto all = issued_collectives(g, r);
    EXPECT_THAT(bytes_of(all), ElementsAre(440, 220, 220));
    EXPECT_THAT(chunks_of(g, all), ElementsAre(1, 0, 0));
    expect_issued_right_after(g, r, all, {b[5], b[7], b[7]});
  }
  {
    const RankId r{1};
    const std::vector<TaskId> b = backwards(r);
    ASSERT_EQ(b.size(), 8U);
    const auto all = issued_collectives(g, r);
    ASSERT_EQ(all.size(), 2U);
    EXPECT_THAT(bytes_of(all), ElementsAre(440, 440));
    EXPECT_THAT(chunks_of(g, all), ElementsAre(1, 0));
    // Chunk 1: right after backward step 6 (B of microbatch 2, chunk 0 = stage 1).
    EXPECT_EQ(g.task(b[6]).stage.value(), 1);
    EXPECT_EQ(g.task(b[6]).microbatch.value(), 2);
    EXPECT_EQ(g.issue_position(all[0].id), g.issue_position(b[6]) + 1);
    EXPECT_THAT(g.task(all[0].id).deps, Contains(b[6]));
    // Chunk 0: after the cooldown, i.e. after the rank's last transfer.
    EXPECT_THAT(g.task(all[1].id).deps, Contains(b[7]));
    EXPECT_GT(g.issue_position(all[1].id), last_transfer_position(g, r));
    const TaskId step = optimizer_steps(g, r).front();
    EXPECT_THAT(g.task(step).deps, Contains(all[0].id));
    EXPECT_THAT(g.task(step).deps, Contains(all[1].id));
  }
}

// ---- megatron-distopt: reduce-scatter and all-gather --------------------------------------------

// d = 3: buckets end at multiples of lcm(3, 128) = 384. overlap_grad_reduce, bucket_size 150:
//   bucket 0: L3.b [0,10), L3.a starts at 64: [64,164), 164 − 0 >= 150 -> close, end padded to 384;
//   bucket 1: L2.b [384,394), L2.a [448,548), 548 − 384 = 164 -> close at 768;
//   bucket 2: L1.b [768,778), L1.a [832,932) -> 1152;  bucket 3: L0.b, L0.a -> 1536.
// One bucket per layer (bucket k = layer 3 − k), 384 padded elements each: reduce-scatter of
// 384·2 = 768 bytes (§3.4.3: the whole grad_data of the bucket) by hook after the piece of
// microbatch 1's backward that holds the bucket's layer (pieces [3,4) [2,3) [1,2) [0,1)).
// Without overlap_param_gather (§3.5): after the step, a synchronous all-gather of every bucket's
// param_data, 384·2 = 768 bytes, each depending on the step; none elsewhere, and the forward is not
// cut.
TEST(MegatronDistoptSync, ReduceScattersPaddedBucketsAndGathersAfterTheStep) {
  const ir::Graph g = lower_with(
      {.microbatches = 2, .data_parallel = 3},
      {.policy = SyncPolicy::kMegatronDistopt, .bucket_size = 150, .overlap_grad_reduce = true});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  const auto rs = of_op(all, CollectiveOp::kReduceScatter);
  const auto ag = of_op(all, CollectiveOp::kAllGather);
  ASSERT_EQ(all.size(), 8U);
  const std::vector<TaskId> pieces = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, pieces),
              ElementsAre(LayerRange{3, 4}, LayerRange{2, 3}, LayerRange{1, 2}, LayerRange{0, 1}));
  EXPECT_THAT(bytes_of(rs), ElementsAre(768, 768, 768, 768));
  EXPECT_THAT(buckets_of(rs), ElementsAre(0, 1, 2, 3));
  expect_issued_right_after(g, r, rs, pieces);
  EXPECT_THAT(bytes_of(ag), ElementsAre(768, 768, 768, 768));
  EXPECT_THAT(buckets_of(ag), UnorderedElementsAre(0, 1, 2, 3));
  const TaskId step = optimizer_steps(g, r).front();
  for (const IssuedCollective& c : ag) {
    EXPECT_EQ(c.group, "dp0");
    EXPECT_THAT(g.task(c.id).deps, ElementsAre(step));
    EXPECT_GT(g.issue_position(c.id), g.issue_position(step));
  }
  EXPECT_THAT(layers_of(g, compute_tasks(g, r, Phase::kForward, 0)), ElementsAre(LayerRange{0, 4}));
}

// d = 2 (lcm(2, 128) = 128), no overlap: one bucket (§3.1). Tensor starts at multiples of 64:
// L3.b [0,10), L3.a [64,164), L2.b [192,202), L2.a [256,356), L1.b [384,394), L1.a [448,548),
// L0.b [576,586), L0.a [640,740); the bucket ends at round_up(740, 128) = 768 elements (the 440
// unpadded elements alone would round to 512). The reduce-scatter carries 768 elements of the grad
// buffer's dtype (§3.1 grad_reduce_in_fp32: fp32, else the param dtype); the all-gather 768
// elements of the bf16 param_data = 1536 bytes whatever the gradients. SyncInput says 4-byte
// gradients, so unset means fp32:
//   true: 768·4 = 3072 bytes fp32; false: 768·2 = 1536 bytes bf16; unset: 3072 fp32.
TEST(MegatronDistoptSync, GradReduceInFp32SetsTheReduceScatterBytes) {
  const SyncStepSpec spec{.microbatches = 2, .data_parallel = 2, .grad_bytes = 4};
  const auto lower = [&](std::optional<bool> fp32) {
    return lower_with(spec, {.policy = SyncPolicy::kMegatronDistopt, .grad_reduce_in_fp32 = fp32});
  };
  const struct {
    std::optional<bool> fp32;
    std::int64_t rs_bytes;
    ir::DType dtype;
  } cases[] = {{true, 3072, ir::DType::kFp32},
               {false, 1536, ir::DType::kBf16},
               {std::nullopt, 3072, ir::DType::kFp32}};
  for (const auto& c : cases) {
    const ir::Graph g = lower(c.fp32);
    const auto all = issued_collectives(g, RankId{0});
    const auto rs = of_op(all, CollectiveOp::kReduceScatter);
    const auto ag = of_op(all, CollectiveOp::kAllGather);
    ASSERT_EQ(rs.size(), 1U);
    ASSERT_EQ(ag.size(), 1U);
    EXPECT_EQ(rs[0].bytes, c.rs_bytes) << c.rs_bytes;
    EXPECT_EQ(collective(g, rs[0].id).dtype, c.dtype) << c.rs_bytes;
    EXPECT_EQ(ag[0].bytes, 1536);
    EXPECT_EQ(collective(g, ag[0].id).dtype, ir::DType::kBf16);
  }
}

// megatron-ddp, no padding: one bucket of 440 elements; grad_reduce_in_fp32 true -> 440·4 = 1760
// bytes, false -> 440·2 (bf16 weights) = 880 bytes.
TEST(MegatronDdpSync, GradReduceInFp32SetsTheAllReduceBytes) {
  const SyncStepSpec spec{.microbatches = 2, .grad_bytes = 4};
  const auto bytes = [&](bool fp32) {
    return bytes_of(issued_collectives(
        lower_with(spec, {.policy = SyncPolicy::kMegatronDdp, .grad_reduce_in_fp32 = fp32}),
        RankId{0}));
  };
  EXPECT_THAT(bytes(true), ElementsAre(1760));
  EXPECT_THAT(bytes(false), ElementsAre(880));
}

// d = 2, overlap_grad_reduce and overlap_param_gather, bucket_size 150: one bucket per layer as in
// the d = 3 test but ending at multiples of 128: [0,164) -> 256, [256,420) -> 512, ... so each
// bucket has 256 padded elements: 512 bytes to reduce-scatter and to gather.
// §3.3: the gather chain runs g[3] (layer 0) -> g[2] -> g[1] -> g[0] (forward order). §3.6 step 2
// and the §9.8 example, in microbatch 0's forward, cut at 1, 2, 3 into [0,1) [1,2) [2,3) [3,4):
//   the first pre-hook dispatches AG(g3), waits for it and dispatches AG(g2), then layer 0 runs;
//   the pre-hook of layer 1 waits for AG(g2) and dispatches AG(g1), then layer 1 runs; and so on:
//   AG(3) AG(2) F[0,1) AG(1) F[1,2) AG(0) F[2,3) F[3,4),
// each forward piece depending on the gather of its bucket. Later microbatches find everything
// gathered (microbatch 1's forward stays whole) and nothing is gathered in the step (§3.5).
TEST(MegatronDistoptSync, OverlapParamGatherChainsOneDeepInTheFirstForward) {
  const ir::Graph g = lower_with({.microbatches = 2}, {.policy = SyncPolicy::kMegatronDistopt,
                                                       .bucket_size = 150,
                                                       .overlap_grad_reduce = true,
                                                       .overlap_param_gather = true});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  const auto ag = of_op(all, CollectiveOp::kAllGather);
  const auto rs = of_op(all, CollectiveOp::kReduceScatter);
  ASSERT_EQ(ag.size(), 4U);
  EXPECT_THAT(buckets_of(ag), ElementsAre(3, 2, 1, 0));
  EXPECT_THAT(bytes_of(ag), ElementsAre(512, 512, 512, 512));
  EXPECT_THAT(bytes_of(rs), ElementsAre(512, 512, 512, 512));
  const std::vector<TaskId> f = compute_tasks(g, r, Phase::kForward, 0);
  ASSERT_THAT(layers_of(g, f),
              ElementsAre(LayerRange{0, 1}, LayerRange{1, 2}, LayerRange{2, 3}, LayerRange{3, 4}));
  const auto pos = [&](TaskId t) { return g.issue_position(t); };
  EXPECT_LT(pos(ag[0].id), pos(ag[1].id));
  EXPECT_LT(pos(ag[1].id), pos(f[0]));
  EXPECT_LT(pos(f[0]), pos(ag[2].id));
  EXPECT_LT(pos(ag[2].id), pos(f[1]));
  EXPECT_LT(pos(f[1]), pos(ag[3].id));
  EXPECT_LT(pos(ag[3].id), pos(f[2]));
  for (std::size_t k = 0; k < 4; ++k) EXPECT_THAT(g.task(f[k]).deps, Contains(ag[k].id)) << k;
  EXPECT_THAT(layers_of(g, compute_tasks(g, r, Phase::kForward, 1)), ElementsAre(LayerRange{0, 4}));
  EXPECT_LT(pos(ag[3].id), pos(compute_tasks(g, r, Phase::kBackward, 0).front()));
}

// Warm-up (§3.6 last bullet, §3.4.2): the pre-hooks are disabled in iteration 1, so no all-gather
// at all (none in the step either: overlap_param_gather launches nothing there); and the 2026 code
// launches no gradient collective during the first backward: all groups at finish_grad_sync, after
// microbatch 1's whole backward, in group order g[0]..g[3] (buckets as in the chain test, 512
// bytes each). Nothing is cut.
TEST(MegatronDistoptSync, WarmupWithOverlapParamGatherGathersNothingAndReducesAtFinish) {
  const ir::Graph g = lower_with({.microbatches = 2}, {.policy = SyncPolicy::kMegatronDistopt,
                                                       .iteration = Iteration::kWarmup,
                                                       .bucket_size = 150,
                                                       .overlap_grad_reduce = true,
                                                       .overlap_param_gather = true});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  EXPECT_THAT(of_op(all, CollectiveOp::kAllGather), IsEmpty());
  const auto rs = of_op(all, CollectiveOp::kReduceScatter);
  EXPECT_THAT(buckets_of(rs), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(bytes_of(rs), ElementsAre(512, 512, 512, 512));
  const std::vector<TaskId> backward = compute_tasks(g, r, Phase::kBackward, 1);
  ASSERT_THAT(layers_of(g, backward), ElementsAre(LayerRange{0, 4}));
  expect_issued_right_after(g, r, rs, std::vector<TaskId>(4, backward[0]));
  EXPECT_THAT(layers_of(g, compute_tasks(g, r, Phase::kForward, 0)), ElementsAre(LayerRange{0, 4}));
}

// Interleaved (pp 2, vp 2, 4 microbatches, 8 layers; placement as in the aligned grad test),
// overlap_param_gather with align_param_gather (default with the interleaved schedule, §3.1).
// §3.6: the schedule calls start_param_sync for chunks 0 and 1 before the first forward; it
// dispatches all groups of the chunk, and the pre-hooks only wait. Buckets (d = 2, bucket_size 150,
// pp rank 0's chunk 0 only):
//   rank 0 chunk 0: L1.b [0,10), L1.a [64,164) -> 164 >= 150, end 256 -> {L1} 256 padded;
//                   L0.b [256,266), L0.a [320,420) -> 512 -> {L0} 256 padded: 512 bytes each;
//   every other chunk (two layers, one bucket): L.b [0,10), L.a [64,164), L'.b [192,202),
//                   L'.a [256,356) -> 384 padded: 768 bytes.
// Rank 0's first forward (microbatch 0, chunk 0) is cut at layer 1 into [0,1) and [1,2), each
// waiting for its bucket's gather; chunk 1's forward of microbatch 0 waits for chunk 1's gather.
TEST(MegatronDistoptSync, AlignedParamGatherDispatchesChunksZeroAndOneBeforeTheFirstForward) {
  const ir::Graph g =
      lower_with({.schedule = "interleaved-1f1b", .pp = 2, .vp = 2, .microbatches = 4, .layers = 8},
                 {.policy = SyncPolicy::kMegatronDistopt,
                  .bucket_size = 150,
                  .overlap_grad_reduce = true,
                  .overlap_param_gather = true});
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank{r};
    const auto ag = of_op(issued_collectives(g, rank), CollectiveOp::kAllGather);
    const TaskId first_forward =
        compute_tasks(g, rank, Phase::kForward, [](const ir::Task&) { return true; }).front();
    for (const IssuedCollective& c : ag) {
      EXPECT_LT(g.issue_position(c.id), g.issue_position(first_forward)) << r;
    }
    const std::vector<TaskId> chunk1 = compute_tasks(g, rank, Phase::kForward, 0, 1);
    ASSERT_EQ(chunk1.size(), 1U);
    EXPECT_THAT(g.task(chunk1[0]).deps, Contains(ag.back().id)) << r;
    if (r == 0) {
      ASSERT_EQ(ag.size(), 3U);
      EXPECT_THAT(bytes_of(ag), ElementsAre(512, 512, 768));
      EXPECT_THAT(chunks_of(g, ag), ElementsAre(0, 0, 1));
      const std::vector<TaskId> chunk0 = compute_tasks(g, rank, Phase::kForward, 0, 0);
      ASSERT_THAT(layers_of(g, chunk0), ElementsAre(LayerRange{0, 1}, LayerRange{1, 2}));
      // g[0] = {L1} is ag[0] and g[1] = {L0} is ag[1] (start_param_sync walks from g[0]).
      EXPECT_THAT(g.task(chunk0[0]).deps, Contains(ag[1].id));
      EXPECT_THAT(g.task(chunk0[1]).deps, Contains(ag[0].id));
    } else {
      ASSERT_EQ(ag.size(), 2U);
      EXPECT_THAT(bytes_of(ag), ElementsAre(768, 768));
      EXPECT_THAT(chunks_of(g, ag), ElementsAre(0, 1));
      EXPECT_THAT(g.task(compute_tasks(g, rank, Phase::kForward, 0, 0).front()).deps,
                  Contains(ag[0].id));
    }
  }
}

// overlap_param_gather_with_optimizer_step (§3.6): the chained optimizer steps chunk 0 first, and
// right after that step chunk 0's gather is dispatched (for the next iteration's forward), so it
// overlaps chunk 1's step; chunk 0's forward waits on no gather. Chunk 1 is still gathered by
// start_param_sync before the first forward. §3.1: no bucketing on any chunk, so each chunk is one
// bucket of 384 padded elements (as in the aligned test): 768 bytes. finalize_model_grads precedes
// every optimizer step, so chunk 0's step waits for every reduce-scatter.
TEST(MegatronDistoptSync, OverlapWithOptimizerStepGathersChunkZeroAfterItsStep) {
  const ir::Graph g =
      lower_with({.schedule = "interleaved-1f1b", .pp = 2, .vp = 2, .microbatches = 4, .layers = 8},
                 {.policy = SyncPolicy::kMegatronDistopt,
                  .bucket_size = 150,
                  .overlap_grad_reduce = true,
                  .overlap_param_gather = true,
                  .overlap_param_gather_with_optimizer_step = true});
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank{r};
    const std::vector<TaskId> steps = optimizer_steps(g, rank);
    ASSERT_EQ(steps.size(), 2U) << r;
    EXPECT_EQ(g.task(steps[0]).chunk.value(), 0) << r;
    EXPECT_EQ(g.task(steps[1]).chunk.value(), 1) << r;
    const auto all = issued_collectives(g, rank);
    const auto ag = of_op(all, CollectiveOp::kAllGather);
    ASSERT_EQ(ag.size(), 2U) << r;
    EXPECT_THAT(bytes_of(ag), ElementsAre(768, 768));
    EXPECT_THAT(chunks_of(g, ag), ElementsAre(1, 0));
    const TaskId first_forward =
        compute_tasks(g, rank, Phase::kForward, [](const ir::Task&) { return true; }).front();
    EXPECT_LT(g.issue_position(ag[0].id), g.issue_position(first_forward)) << r;
    EXPECT_THAT(g.task(ag[1].id).deps, ElementsAre(steps[0])) << r;
    EXPECT_EQ(g.issue_position(ag[1].id), g.issue_position(steps[0]) + 1) << r;
    EXPECT_LT(g.issue_position(ag[1].id), g.issue_position(steps[1])) << r;
    EXPECT_THAT(g.task(compute_tasks(g, rank, Phase::kForward, 0, 0).front()).deps,
                Not(Contains(ag[1].id)));
    for (const IssuedCollective& c : of_op(all, CollectiveOp::kReduceScatter)) {
      EXPECT_THAT(g.task(steps[0]).deps, Contains(c.id)) << r;
    }
  }
}

// ---- distributed-optimizer instances ------------------------------------------------------------

// §3.7 with d = 4 and 2 instances: buckets are padded and sharded for d/I = 2 (lcm(2, 128) = 128),
// so the single bucket (no overlap) has 768 padded elements as in the fp32 test. Per bucket: a
// reduce-scatter over the intra-instance group (768·2 = 1536 bytes), then an all-reduce of this
// rank's shard, 768/2 = 384 elements = 768 bytes, over the inter-instance group; the all-gather
// after the step runs over the intra group only (1536 bytes).
TEST(MegatronDistoptSync, InstancesReduceScatterWithinThenAllReduceTheShardAcross) {
  const ir::Graph g =
      lower_with({.microbatches = 2, .data_parallel = 4},
                 {.policy = SyncPolicy::kMegatronDistopt, .distributed_optimizer_instances = 2});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(all[0].group, "dp-intra0");
  EXPECT_EQ(all[0].bytes, 1536);
  EXPECT_EQ(all[1].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(all[1].group, "dp-inter0");
  EXPECT_EQ(all[1].bytes, 768);
  EXPECT_THAT(g.task(all[1].id).deps, Contains(all[0].id));
  EXPECT_EQ(all[2].op, CollectiveOp::kAllGather);
  EXPECT_EQ(all[2].group, "dp-intra0");
  EXPECT_EQ(all[2].bytes, 1536);
  const TaskId step = optimizer_steps(g, r).front();
  EXPECT_THAT(g.task(step).deps, Contains(all[1].id));
  EXPECT_THAT(g.task(all[2].id).deps, ElementsAre(step));
}

// §3.7: both collectives of every group are issued with async_op=False inside one dedicated
// communication stream, so on that stream each bucket's reduce-scatter waits for the previous
// bucket's all-reduce. With overlap_grad_reduce and bucket_size 150 (one bucket per layer, 256
// padded elements as in the chain test): RS 512 bytes, AR 256 bytes, in the order RS0 AR0 RS1 AR1
// ..., all on the same stream, which is not the compute stream.
TEST(MegatronDistoptSync, InstancesIssueBothCollectivesOnOneDedicatedStream) {
  const ir::Graph g =
      lower_with({.microbatches = 2, .data_parallel = 4}, {.policy = SyncPolicy::kMegatronDistopt,
                                                           .bucket_size = 150,
                                                           .overlap_grad_reduce = true,
                                                           .distributed_optimizer_instances = 2});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  ASSERT_EQ(all.size(), 12U);  // 4 × (RS, AR), then 4 AGs after the step
  const auto stream_of = [&](const IssuedCollective& c) {
    return g.stream(g.task(c.id).stream).name;
  };
  const std::string comm = stream_of(all[0]);
  EXPECT_NE(comm, g.stream(g.task(optimizer_steps(g, r).front()).stream).name);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(all[2 * k].op, CollectiveOp::kReduceScatter) << k;
    EXPECT_EQ(all[2 * k].bytes, 512) << k;
    EXPECT_EQ(all[2 * k + 1].op, CollectiveOp::kAllReduce) << k;
    EXPECT_EQ(all[2 * k + 1].bytes, 256) << k;
    EXPECT_EQ(stream_of(all[2 * k]), comm) << k;
    EXPECT_EQ(stream_of(all[2 * k + 1]), comm) << k;
  }
}

// Full replication, d = 4 replicas, 2 instances: the intra-instance groups have d/I = 2 members,
// the inter-instance groups I = 2, and a rank's intra and inter groups share only the rank itself
// (§3.7: the data-parallel group split both ways). Both groups' members agree on the bytes.
TEST(MegatronDistoptSync, InstanceGroupsSplitTheReplicasBothWays) {
  const ir::Graph g =
      lower_with({.microbatches = 2, .data_parallel = 4, .replicas = 4},
                 {.policy = SyncPolicy::kMegatronDistopt, .distributed_optimizer_instances = 2});
  ASSERT_EQ(g.num_ranks(), 4);
  for (std::int32_t r = 0; r < 4; ++r) {
    const auto all = issued_collectives(g, RankId{r});
    ASSERT_EQ(all.size(), 3U) << r;
    const auto& intra = g.group(collective(g, all[0].id).group).ranks;
    const auto& inter = g.group(collective(g, all[1].id).group).ranks;
    EXPECT_EQ(intra.size(), 2U) << r;
    EXPECT_EQ(inter.size(), 2U) << r;
    EXPECT_THAT(intra, Contains(RankId{r}));
    EXPECT_THAT(inter, Contains(RankId{r}));
    std::vector<RankId> both;
    std::copy_if(intra.begin(), intra.end(), std::back_inserter(both),
                 [&](RankId x) { return std::find(inter.begin(), inter.end(), x) != inter.end(); });
    EXPECT_THAT(both, ElementsAre(RankId{r})) << r;
    EXPECT_EQ(all[0].bytes, 1536) << r;
    EXPECT_EQ(all[1].bytes, 768) << r;
  }
}

// ---- invalid options ----------------------------------------------------------------------------

// §3.1: overlap_param_gather requires the distributed optimizer and overlap_grad_reduce; §3.7:
// the instances split the data-parallel group, so their number must divide it.
TEST(MegatronSyncOptions, InvalidCombinationsThrowInvalidConfig) {
  const auto lower = [](std::int32_t dp, const SyncOptions& options) {
    return [dp, options] { (void)lower_with({.data_parallel = dp}, options); };
  };
  EXPECT_THAT(
      lower(2, {.policy = SyncPolicy::kMegatronDistopt, .overlap_param_gather = true}),
      ThrowsMessage<InvalidConfig>(HasSubstr("overlap_param_gather needs overlap_grad_reduce")));
  EXPECT_THAT(lower(2, {.policy = SyncPolicy::kMegatronDdp,
                        .overlap_grad_reduce = true,
                        .overlap_param_gather = true}),
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("overlap_param_gather applies to megatron-distopt only")));
  EXPECT_THAT(
      lower(4, {.policy = SyncPolicy::kMegatronDistopt, .distributed_optimizer_instances = 3}),
      ThrowsMessage<InvalidConfig>(
          HasSubstr("distributed_optimizer_instances 3 must divide the data-parallel size 4")));
}

}  // namespace
}  // namespace metron::sync
