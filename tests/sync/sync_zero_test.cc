// The DeepSpeed ZeRO lowering (Note [zero lowering] in sync_zero.cc) on make_sync_step's small
// steps. Every expected value is derived by hand in a comment from docs/SYNC_POLICIES.md §5.
//
// The default step: pp 1, 4 layers; layer l holds "layers.l.a" (100 elements) and "layers.l.b"
// (10), registered a then b, so P = 440 elements. Gradient-ready order (zero_ipg_buckets): L3.b,
// L3.a, L2.b, L2.a, L1.b, L1.a, L0.b, L0.a. Bytes per element 2 (bf16) unless said otherwise.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/deadlock.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using testing::buckets_of;
using testing::bytes_of;
using testing::lower_with;
using testing::of_op;
using testing::optimizer_step;

using ir::CollectiveOp;
using ir::RankId;
using ir::TaskId;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::issued_collectives;
using testing::IssuedCollective;
using testing::make_sync_step;
using ::testing::Not;
using testing::SyncStepSpec;
using ::testing::ThrowsMessage;

// The first layer each ZeRO-3 gather holds, from its label ("zero3 AG fwd layer 3 mb 0",
// "zero3 prefetch AG layer 1 2 at ..."): its tag is the plan's id (Note [zero lowering]).
std::vector<std::int32_t> first_layers(const std::vector<testing::IssuedCollective>& all) {
  std::vector<std::int32_t> out;
  for (const testing::IssuedCollective& c : all) {
    const std::size_t at = c.label.find("layer ");
    out.push_back(at == std::string::npos ? -1 : std::stoi(c.label.substr(at + 6)));
  }
  return out;
}

std::vector<IssuedCollective> of_microbatch(const std::vector<IssuedCollective>& all,
                                            std::int32_t mb) {
  std::vector<IssuedCollective> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [&](const IssuedCollective& c) { return c.microbatch == mb; });
  return out;
}

std::int64_t total_bytes(const std::vector<IssuedCollective>& all) {
  std::int64_t sum = 0;
  for (const IssuedCollective& c : all) sum += c.bytes;
  return sum;
}

/// The compute piece of `rank` running `layer` of microbatch `mb` in `phase`.
TaskId piece(const ir::Graph& g, RankId rank, ir::Phase phase, std::int32_t mb,
             std::int32_t layer) {
  for (TaskId t : g.issue_order(rank)) {
    const ir::Task& task = g.task(t);
    const auto* c = std::get_if<ir::Compute>(&task.op);
    if (c != nullptr && c->phase == phase && task.microbatch.value() == mb &&
        task.layers.first <= layer && layer < task.layers.last) {
      return t;
    }
  }
  return {};
}

struct Wait {
  TaskId id;
  TaskId target;
  std::string label;
};

std::vector<Wait> host_waits(const ir::Graph& g, RankId rank) {
  std::vector<Wait> out;
  for (TaskId t : g.issue_order(rank)) {
    if (const auto* w = std::get_if<ir::HostWait>(&g.task(t).op)) {
      out.push_back({t, w->target, g.task(t).label});
    }
  }
  return out;
}

const std::vector<TaskId>& deps(const ir::Graph& g, TaskId t) { return g.task(t).deps; }

// ---- ZeRO-1 and ZeRO-2
// ---------------------------------------------------------------------------

// bucket_size 220: the walk fills L3.b+L3.a+L2.b+L2.a = 220 (not > 220: exactly full), then
// L1.b overflows it: bucket 0 = layers 2-3, bucket 1 = layers 0-1, 220 elements = 440 bytes each.
// ZeRO-2 all-reduces both on every microbatch; after the step one AG of the flat group: 440
// elements, a multiple of 2·d = 4, so 880 bytes.
TEST(ZeroStage12, Zero2AllReducesGradientReadyBucketsOnEveryMicrobatch) {
  const ir::Graph g =
      lower_with({.microbatches = 2}, {.policy = SyncPolicy::kZero2, .bucket_size = 220});
  const auto all = issued_collectives(g, RankId{0});
  ASSERT_EQ(all.size(), 5U);
  const auto ars = of_op(all, CollectiveOp::kAllReduce);
  EXPECT_THAT(bytes_of(ars), ElementsAre(440, 440, 440, 440));
  EXPECT_THAT(buckets_of(ars), ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(ars[0].microbatch, 0);
  EXPECT_EQ(ars[3].microbatch, 1);
  EXPECT_EQ(ars[0].group, "dp0");
  EXPECT_EQ(ars[0].label, "zero2 AR bucket 0 (layers 2-3) hook mb 0");
  EXPECT_EQ(ars[1].label, "zero2 AR bucket 1 (layers 0-1) epilogue mb 0");
  // Bucket 0 completes with L2.a: issued after the backward piece ending at layer 2 ([2, 4));
  // bucket 1 after the last piece ([0, 2)).
  EXPECT_EQ(g.task(ars[0].id).deps.at(0), piece(g, RankId{0}, ir::Phase::kBackward, 0, 2));
  EXPECT_EQ(g.task(ars[1].id).deps.at(0), piece(g, RankId{0}, ir::Phase::kBackward, 0, 0));
  EXPECT_EQ(g.task(ars[0].id).deps.at(0), piece(g, RankId{0}, ir::Phase::kBackward, 0, 3));
  EXPECT_EQ(all[4].op, CollectiveOp::kAllGather);
  EXPECT_EQ(all[4].bytes, 880);
  EXPECT_EQ(all[4].label, "zero2 AG param group after step");
  EXPECT_THAT(deps(g, all[4].id), ElementsAre(optimizer_step(g, RankId{0})));
  // The step waits for the last microbatch's reductions.
  EXPECT_THAT(deps(g, optimizer_step(g, RankId{0})), Contains(ars[2].id));
  EXPECT_THAT(deps(g, optimizer_step(g, RankId{0})), Contains(ars[3].id));
}

// Without overlap_comm, reduce_gradients walks registration order after the backward: L0.a 100,
// L0.b 110, L1.a 210, L1.b 220, then L2.a overflows: bucket 0 = layers 0-1, bucket 1 = layers
// 2-3, both 440 bytes, on the last microbatch, between the last backward and the step. d = 3:
// the AG's 440 elements pad to a multiple of 2·3 = 6: 444 elements = 888 bytes.
TEST(ZeroStage12, Zero1AllReducesInRegistrationOrderBeforeTheStep) {
  const ir::Graph g = lower_with({.microbatches = 2, .data_parallel = 3},
                                 {.policy = SyncPolicy::kZero1, .bucket_size = 220});
  const auto all = issued_collectives(g, RankId{0});
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].label, "zero1 AR bucket 0 (layers 0-1) after backward mb 1");
  EXPECT_EQ(all[1].label, "zero1 AR bucket 1 (layers 2-3) after backward mb 1");
  EXPECT_THAT(bytes_of(all), ElementsAre(440, 440, 888));
  const TaskId step = optimizer_step(g, RankId{0});
  const TaskId last_backward = piece(g, RankId{0}, ir::Phase::kBackward, 1, 0);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_GT(g.issue_position(all[k].id), g.issue_position(last_backward));
    EXPECT_LT(g.issue_position(all[k].id), g.issue_position(step));
    EXPECT_THAT(deps(g, all[k].id), ElementsAre(last_backward));
    EXPECT_THAT(deps(g, step), Contains(all[k].id));
  }
  EXPECT_GT(g.issue_position(all[2].id), g.issue_position(step));
  EXPECT_TRUE(host_waits(g, RankId{0}).empty());  // nothing overlaps, nothing to synchronise
}

// ZeRO-1 reduces P·b once per step, ZeRO-2 once per microbatch: M times as much.
TEST(ZeroStage12, Zero2ReducesMTimesWhatZero1Reduces) {
  for (std::int32_t m : {2, 3, 4}) {
    const SyncStepSpec spec{.microbatches = m};
    const auto one =
        of_op(issued_collectives(lower_with(spec, {.policy = SyncPolicy::kZero1}), RankId{0}),
              CollectiveOp::kAllReduce);
    const auto two =
        of_op(issued_collectives(lower_with(spec, {.policy = SyncPolicy::kZero2}), RankId{0}),
              CollectiveOp::kAllReduce);
    // Default reduce_bucket_size 5e8: one bucket of all 440 elements, 880 bytes.
    EXPECT_EQ(total_bytes(one), 880) << m;
    EXPECT_EQ(total_bytes(two), m * total_bytes(one)) << m;
  }
}

// bucket_size 110: one bucket per layer (L3.b+L3.a = 110 exactly; L2.b overflows), bucket k =
// layer 3-k, 220 bytes. Without overlap_comm the reduction is on the compute stream: the compute
// after bucket k's hook waits for bucket k's AR.
TEST(ZeroStage12, WithoutOverlapCommComputeWaitsForEachReduction) {
  const ir::Graph g =
      lower_with({.microbatches = 2}, {.policy = SyncPolicy::kZero2, .bucket_size = 110});
  const auto ars = of_microbatch(issued_collectives(g, RankId{0}), 0);
  ASSERT_EQ(ars.size(), 4U);
  const RankId r{0};
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kBackward, 0, 2)), Contains(ars[0].id));
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kBackward, 0, 1)), Contains(ars[1].id));
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kBackward, 0, 0)), Contains(ars[2].id));
  // The epilogue's bucket blocks the next microbatch's forward.
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kForward, 1, 0)), Contains(ars[3].id));
  EXPECT_TRUE(host_waits(g, r).empty());
  // One IPG buffer of reduce_bucket_size·b = 110·2 bytes per backward.
  std::int32_t ipg = 0;
  for (const ir::Buffer& b : g.data().buffers) {
    if (b.name.find("IPG") == std::string::npos) continue;
    ++ipg;
    EXPECT_EQ(b.bytes, 220);
  }
  EXPECT_EQ(ipg, 2);
}

// With overlap_comm the compute stream waits on the reduction stream before each bucket's copy:
// the compute after bucket k's hook waits for bucket k-1 only (one reduction in flight), and the
// epilogue synchronises the device (a host wait on the last AR) after every backward.
TEST(ZeroStage12, OverlapCommKeepsOneReductionInFlight) {
  const ir::Graph g =
      lower_with({.microbatches = 2},
                 {.policy = SyncPolicy::kZero2, .bucket_size = 110, .overlap_grad_reduce = true});
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  for (std::int32_t mb = 0; mb < 2; ++mb) {
    const auto ars = of_microbatch(all, mb);
    ASSERT_EQ(ars.size(), 4U);
    const TaskId l2 = piece(g, r, ir::Phase::kBackward, mb, 2);
    const TaskId l1 = piece(g, r, ir::Phase::kBackward, mb, 1);
    const TaskId l0 = piece(g, r, ir::Phase::kBackward, mb, 0);
    EXPECT_THAT(deps(g, l2), Not(Contains(ars[0].id)));  // bucket 0 has no predecessor
    EXPECT_THAT(deps(g, l1), Contains(ars[0].id));
    EXPECT_THAT(deps(g, l1), Not(Contains(ars[1].id)));
    EXPECT_THAT(deps(g, l0), Contains(ars[1].id));
    EXPECT_THAT(deps(g, l0), Not(Contains(ars[2].id)));
  }
  const auto waits = host_waits(g, r);
  ASSERT_EQ(waits.size(), 2U);
  EXPECT_EQ(waits[0].target, of_microbatch(all, 0)[3].id);
  EXPECT_EQ(waits[1].target, of_microbatch(all, 1)[3].id);
  EXPECT_EQ(waits[0].label, "zero2 epilogue synchronize mb 0");
  EXPECT_EQ(g.issue_position(waits[0].id), g.issue_position(of_microbatch(all, 0)[3].id) + 1);
  // overlap_comm double-buffers the IPG bucket: 2·110·2 bytes.
  for (const ir::Buffer& b : g.data().buffers) {
    if (b.name.find("IPG") != std::string::npos) {
      EXPECT_EQ(b.bytes, 440);
    }
  }
}

// ZeRO-1 with overlap_comm: hooks during the last backward only, epilogue synchronize once.
TEST(ZeroStage12, Zero1WithOverlapCommReducesDuringTheLastBackward) {
  const ir::Graph g =
      lower_with({.microbatches = 3},
                 {.policy = SyncPolicy::kZero1, .bucket_size = 110, .overlap_grad_reduce = true});
  const auto ars = of_op(issued_collectives(g, RankId{0}), CollectiveOp::kAllReduce);
  ASSERT_EQ(ars.size(), 4U);
  for (const IssuedCollective& c : ars) EXPECT_EQ(c.microbatch, 2);
  EXPECT_EQ(g.task(ars[1].id).deps.at(0), piece(g, RankId{0}, ir::Phase::kBackward, 2, 2));
  EXPECT_EQ(host_waits(g, RankId{0}).size(), 1U);
}

// Expert tensors are a param group of their own, reduced and gathered over edp; fp32 gradients
// double the AR bytes. Layer 3's tensors are experts here; one bucket (default size) of 330
// dense elements (1320 bytes) and 110 expert ones (440 bytes).
TEST(ZeroStage12, ExpertTensorsUseTheExpertDataParallelGroup) {
  auto step = make_sync_step({.microbatches = 2, .grad_bytes = 4});
  for (ParamTensor& t : step.input.params[0][0].tensors) t.expert = t.layer == 3;
  add_sync_policy(step.builder, step.input, {.policy = SyncPolicy::kZero2});
  const ir::Graph g = std::move(step.builder).build();
  const auto mb0 = of_microbatch(issued_collectives(g, RankId{0}), 0);
  ASSERT_EQ(mb0.size(), 2U);
  EXPECT_EQ(mb0[0].group, "dp0");
  EXPECT_EQ(mb0[0].bytes, 1320);
  EXPECT_EQ(mb0[1].group, "edp0");
  EXPECT_EQ(mb0[1].bytes, 440);
  // After the step: 330 dense elements pad to 332 (2·d = 4) = 664 bytes; 110 expert ones to 112
  // = 224 bytes.
  const auto gathers = of_op(issued_collectives(g, RankId{0}), CollectiveOp::kAllGather);
  ASSERT_EQ(gathers.size(), 2U);
  EXPECT_EQ(gathers[0].bytes, 664);
  EXPECT_EQ(gathers[1].bytes, 224);
  EXPECT_EQ(gathers[1].group, "edp0");
}

// ---- ZeRO-3 ------------------------------------------------------------------------------------

// Nothing persists (threshold 0), nothing is kept (reuse distance 0), no prefetch, one RS bucket
// per layer (110). Per microbatch: forward AGs of layers 0..3 and backward AGs of 3..0, 110
// elements = 220 bytes each (100 and 10 are multiples of d = 2), i.e. 2·P·b_p = 1760 bytes; four
// RS of 220 bytes, P·b_g = 880.
const SyncOptions kNoReuse{.policy = SyncPolicy::kZero3,
                           .bucket_size = 110,
                           .zero_prefetch_bucket_size = 0,
                           .zero_param_persistence_threshold = 0,
                           .zero_max_reuse_distance = 0};

TEST(ZeroStage3, GathersEachLayerBeforeForwardAndBackwardWithoutReuse) {
  const ir::Graph g = lower_with({.microbatches = 2}, kNoReuse);
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  for (std::int32_t mb = 0; mb < 2; ++mb) {
    const auto c = of_microbatch(all, mb);
    const auto ags = of_op(c, CollectiveOp::kAllGather);
    const auto rss = of_op(c, CollectiveOp::kReduceScatter);
    EXPECT_THAT(first_layers(ags), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
    EXPECT_EQ(total_bytes(ags), 2 * 440 * 2);
    EXPECT_THAT(bytes_of(rss), ElementsAre(220, 220, 220, 220));
    EXPECT_EQ(total_bytes(rss), 440 * 2);
    EXPECT_EQ(ags[0].label, "zero3 AG fwd layer 0 mb " + std::to_string(mb));
    EXPECT_EQ(ags[4].label, "zero3 AG bwd layer 3 mb " + std::to_string(mb));
    EXPECT_EQ(rss[0].label, "zero3 RS bucket 0 (layer 3) hook mb " + std::to_string(mb));
    // Each piece waits for its layer's gather, issued right before it.
    for (std::int32_t l = 0; l < 4; ++l) {
      const TaskId f = piece(g, r, ir::Phase::kForward, mb, l);
      const TaskId b = piece(g, r, ir::Phase::kBackward, mb, l);
      EXPECT_THAT(deps(g, f), Contains(ags[static_cast<std::size_t>(l)].id));
      EXPECT_THAT(deps(g, b), Contains(ags[static_cast<std::size_t>(7 - l)].id));
      EXPECT_LT(g.issue_position(ags[static_cast<std::size_t>(l)].id), g.issue_position(f));
    }
  }
  // The wire: ring AG and RS move (d-1)/d of their bytes, AR 2(d-1)/d. Against a DDP-style AR
  // of the same gradients (ZeRO-2's, 880 bytes per microbatch) ZeRO-3 moves
  // (1760 + 880) / (2·880) = 1.5 times as much.
  const auto zero2 = of_microbatch(
      issued_collectives(lower_with({.microbatches = 2}, {.policy = SyncPolicy::kZero2}), r), 0);
  const double d = 2;
  const double zero3_wire = (d - 1) / d * static_cast<double>(total_bytes(of_microbatch(all, 0)));
  const double ar_wire = 2 * (d - 1) / d * static_cast<double>(total_bytes(zero2));
  EXPECT_DOUBLE_EQ(zero3_wire / ar_wire, 1.5);
}

// DeepSpeed's throttles with at most 2 events outstanding: before recording the third fetch
// event the host waits on the oldest (the AG two fetches back), and before the third RS of a
// backward on the RS two buckets back; the epilogue then waits on the last RS. In the first
// microbatch fetches 0 and 1 pass free, then every fetch waits: 6 waits; the deque carries over,
// so all 8 of the second microbatch wait. Reduce waits: before buckets 2 and 3, plus the epilogue.
TEST(ZeroStage3, HostThrottlesFetchesAndReductions) {
  const ir::Graph g = lower_with({.microbatches = 2}, kNoReuse);
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  std::vector<Wait> fetch;
  std::vector<Wait> reduce;
  std::vector<Wait> epilogue;
  for (const Wait& w : host_waits(g, r)) {
    if (w.label.find("fetch throttle") != std::string::npos) fetch.push_back(w);
    if (w.label.find("reduce throttle") != std::string::npos) reduce.push_back(w);
    if (w.label.find("epilogue") != std::string::npos) epilogue.push_back(w);
  }
  EXPECT_EQ(fetch.size(), 6U + 8U);
  const auto ags = of_op(all, CollectiveOp::kAllGather);  // issue order: fetch order
  for (std::size_t i = 0; i < fetch.size(); ++i) {
    // The i-th wait precedes fetch i+2 and targets fetch i.
    EXPECT_EQ(fetch[i].target, ags[i].id) << i;
    EXPECT_LT(g.issue_position(ags[i + 2].id), g.issue_position(fetch[i].id)) << i;
  }
  ASSERT_EQ(reduce.size(), 4U);
  ASSERT_EQ(epilogue.size(), 2U);
  for (std::int32_t mb = 0; mb < 2; ++mb) {
    const auto rss = of_op(of_microbatch(all, mb), CollectiveOp::kReduceScatter);
    const std::size_t k = 2 * static_cast<std::size_t>(mb);
    EXPECT_EQ(reduce[k].target, rss[0].id);
    EXPECT_EQ(g.issue_position(reduce[k].id) + 1, g.issue_position(rss[2].id));
    EXPECT_EQ(reduce[k + 1].target, rss[1].id);
    EXPECT_EQ(g.issue_position(reduce[k + 1].id) + 1, g.issue_position(rss[3].id));
    EXPECT_EQ(epilogue[static_cast<std::size_t>(mb)].target, rss[3].id);
    EXPECT_EQ(g.issue_position(epilogue[static_cast<std::size_t>(mb)].id),
              g.issue_position(rss[3].id) + 1);
  }
  // The step waits for the last microbatch's reduce-scatters.
  for (const auto& c : of_op(of_microbatch(all, 1), CollectiveOp::kReduceScatter)) {
    EXPECT_THAT(deps(g, optimizer_step(g, r)), Contains(c.id));
  }
}

// Reuse distance 250 (elements of the modules in between, 110 each): after the forward of layer
// 3 its backward comes next (0 in between: kept); layer 2 sees L3 fwd, L3 bwd (220 < 250) before
// its backward: kept; layer 1 has traversed 330 >= 250 before reaching its backward: released,
// as is layer 0. So the backward gathers layers 1 and 0 only. The default (1e9) keeps all.
TEST(ZeroStage3, ReuseDistanceKeepsLayersForTheirBackward) {
  SyncOptions options = kNoReuse;
  options.zero_max_reuse_distance = 250;
  const RankId r{0};
  auto ags = of_op(issued_collectives(lower_with({.microbatches = 1}, options), r),
                   CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(ags), ElementsAre(0, 1, 2, 3, 1, 0));
  options.zero_max_reuse_distance = SyncOptions{}.zero_max_reuse_distance;
  const ir::Graph g = lower_with({.microbatches = 1}, options);
  ags = of_op(issued_collectives(g, r), CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(ags), ElementsAre(0, 1, 2, 3));
  // A kept layer's copy is one buffer used by its forward and its backward piece (freed after
  // the backward), and the backward piece still waits for the gather.
  for (std::int32_t l = 0; l < 4; ++l) {
    const ir::Task& f = g.task(piece(g, r, ir::Phase::kForward, 0, l));
    const ir::Task& b = g.task(piece(g, r, ir::Phase::kBackward, 0, l));
    ASSERT_EQ(f.uses.size(), 1U);
    EXPECT_THAT(b.uses, Contains(f.uses[0]));
    EXPECT_EQ(g.buffer(f.uses[0]).bytes, 220);
    EXPECT_THAT(g.task(ags[static_cast<std::size_t>(l)].id).allocates, Contains(f.uses[0]));
    EXPECT_THAT(b.deps, Contains(ags[static_cast<std::size_t>(l)].id));
  }
}

// Persistence threshold 50 with d = 3: the b tensors (10) persist, the a tensors (100) are
// gathered per layer, round_up(100, 3) = 102 elements = 204 bytes. After the step the persistent
// tensors are gathered: 4 · round_up(10, 3) = 48 elements = 96 bytes. The RS of a layer's bucket
// covers both tensors, each padded: (102 + 12) · 2 = 228 bytes.
TEST(ZeroStage3, PersistentTensorsAreGatheredOnlyAfterTheStep) {
  SyncOptions options = kNoReuse;
  options.zero_param_persistence_threshold = 50;
  const ir::Graph g = lower_with({.microbatches = 1, .data_parallel = 3}, options);
  const RankId r{0};
  const auto all = issued_collectives(g, r);
  const auto ags = of_op(all, CollectiveOp::kAllGather);
  ASSERT_EQ(ags.size(), 9U);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(ags[i].bytes, 204);
  EXPECT_EQ(ags[8].bytes, 96);
  EXPECT_EQ(ags[8].label, "zero3 AG persistent params after step");
  EXPECT_THAT(deps(g, ags[8].id), ElementsAre(optimizer_step(g, r)));
  EXPECT_THAT(bytes_of(of_op(all, CollectiveOp::kReduceScatter)), ElementsAre(228, 228, 228, 228));
  // The default threshold (1e5) makes every tensor persistent: no per-layer gathers, and after
  // the step all 440 elements (multiples of d = 2) = 880 bytes.
  const auto defaults =
      of_op(issued_collectives(lower_with({.microbatches = 2}, {.policy = SyncPolicy::kZero3}), r),
            CollectiveOp::kAllGather);
  ASSERT_EQ(defaults.size(), 1U);
  EXPECT_EQ(defaults[0].bytes, 880);
  // A tensor of exactly the threshold persists (ds_numel <= threshold): at 100 both tensors do.
  options.zero_param_persistence_threshold = 100;
  const auto at_threshold = of_op(issued_collectives(lower_with({.microbatches = 1}, options), r),
                                  CollectiveOp::kAllGather);
  ASSERT_EQ(at_threshold.size(), 1U);
  EXPECT_EQ(at_threshold[0].label, "zero3 AG persistent params after step");
}

// zero_per_tensor_collectives (DeepSpeed through v0.5.x, Note [zero per-tensor collectives]):
// each collective stands for one call per tensor it holds, with the same bytes.
//   threshold 5: a (100) and b (10) are both partitioned: each layer's gather holds 2 tensors;
//     the RS buckets (as above, one layer each) 2; nothing persists, so no post-step gather.
//   threshold 50: only a is gathered per layer (1 call); the RS buckets still hold a and b (2);
//     the post-step gather re-gathers the 4 persistent b tensors (4 calls).
TEST(ZeroStage3, PerTensorCollectivesCountACallPerTensor) {
  const auto counts = [](const ir::Graph& g, const std::vector<IssuedCollective>& all) {
    std::vector<std::int32_t> out;
    for (const IssuedCollective& c : all)
      out.push_back(std::get<ir::Collective>(g.task(c.id).op).count);
    return out;
  };
  SyncOptions options = kNoReuse;
  options.zero_param_persistence_threshold = 5;
  options.zero_per_tensor_collectives = true;
  const RankId r{0};
  const ir::Graph all_partitioned = lower_with({.microbatches = 1, .data_parallel = 3}, options);
  const auto c5 = issued_collectives(all_partitioned, r);
  EXPECT_THAT(counts(all_partitioned, of_op(c5, CollectiveOp::kAllGather)),
              ElementsAre(2, 2, 2, 2, 2, 2, 2, 2));
  EXPECT_THAT(counts(all_partitioned, of_op(c5, CollectiveOp::kReduceScatter)),
              ElementsAre(2, 2, 2, 2));
  options.zero_param_persistence_threshold = 50;
  const ir::Graph some_persist = lower_with({.microbatches = 1, .data_parallel = 3}, options);
  const auto c50 = issued_collectives(some_persist, r);
  EXPECT_THAT(counts(some_persist, of_op(c50, CollectiveOp::kAllGather)),
              ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 4));
  EXPECT_THAT(counts(some_persist, of_op(c50, CollectiveOp::kReduceScatter)),
              ElementsAre(2, 2, 2, 2));
  // The bytes are those of the coalesced collectives
  // (PersistentTensorsAreGatheredOnlyAfterTheStep).
  EXPECT_THAT(bytes_of(of_op(c50, CollectiveOp::kReduceScatter)), ElementsAre(228, 228, 228, 228));
  // Without the option every collective is one call.
  options.zero_per_tensor_collectives = false;
  const ir::Graph coalesced = lower_with({.microbatches = 1, .data_parallel = 3}, options);
  for (std::int32_t n : counts(coalesced, issued_collectives(coalesced, r))) EXPECT_EQ(n, 1);
}

// Only ZeRO-3 has DeepSpeed 2021's fetch and collectives.
TEST(ZeroErrors, DeepSpeed2021OptionsAreZero3Only) {
  SyncOptions options{.policy = SyncPolicy::kZero2, .zero_per_tensor_collectives = true};
  EXPECT_THAT([&] { (void)lower_with({.microbatches = 1}, options); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "sync policy zero2: zero_per_tensor_collectives applies to zero3 only")));
  options = {.policy = SyncPolicy::kZero1, .zero_synchronous_fetch = true};
  EXPECT_THAT([&] { (void)lower_with({.microbatches = 1}, options); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("sync policy zero1: zero_synchronous_fetch applies to zero3 only")));
}

// Prefetch by element budget, reuse distance 0. With a budget of one layer (110), each fetch
// prefetches the next trace step's layer when it is not resident:
//   fwd L0: own AG L0, prefetch L1;  fwd L1: prefetch L2;  fwd L2: prefetch L3;
//   fwd L3: step 4 is L3 (still resident: skipped), step 5 is L2 (released): prefetch L2;
//   bwd L3: L3 was released after its forward: own AG L3, prefetch L1 (step 6);
//   bwd L2: prefetch L0;  bwd L1, bwd L0: nothing left.
// max_live_parameters 220 with an unlimited prefetch budget gives the same: after a fetch 110
// elements are resident, leaving room for one more layer (none at bwd L3, where the own gather
// makes 220 resident, so L1 waits for bwd L2 and L0 for bwd L1).
TEST(ZeroStage3, PrefetchesUpcomingLayersWithinTheBudget) {
  SyncOptions budget = kNoReuse;
  budget.zero_prefetch_bucket_size = 110;
  SyncOptions live = kNoReuse;
  live.zero_prefetch_bucket_size = 50'000'000;
  live.zero_max_live_parameters = 220;
  const RankId r{0};
  const auto ags = of_op(issued_collectives(lower_with({.microbatches = 1}, budget), r),
                         CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(ags), ElementsAre(0, 1, 2, 3, 2, 3, 1, 0));
  EXPECT_EQ(ags[1].label, "zero3 prefetch AG layer 1 at fwd layer 0 mb 0");
  EXPECT_EQ(ags[4].label, "zero3 prefetch AG layer 2 at fwd layer 3 mb 0");
  EXPECT_EQ(ags[5].label, "zero3 AG bwd layer 3 mb 0");
  EXPECT_EQ(ags[6].label, "zero3 prefetch AG layer 1 at bwd layer 3 mb 0");
  const auto limited =
      of_op(issued_collectives(lower_with({.microbatches = 1}, live), r), CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(limited), ElementsAre(0, 1, 2, 3, 2, 3, 1, 0));
  EXPECT_EQ(limited[6].label, "zero3 prefetch AG layer 1 at bwd layer 2 mb 0");
  EXPECT_EQ(limited[7].label, "zero3 prefetch AG layer 0 at bwd layer 1 mb 0");
  // A budget of two layers (220) coalesces: fwd L0 prefetches L1 and L2 in one AG (the count is
  // below 220 after L1), fwd L1 then finds L2 resident and pops L3: 110 < 220, then steps 4 (L3,
  // resident) and 5 (L2, resident) and 6 (L1, resident), 7 (L0, released): L3 and L0 in one AG.
  SyncOptions two = kNoReuse;
  two.zero_prefetch_bucket_size = 220;
  const auto coalesced =
      of_op(issued_collectives(lower_with({.microbatches = 1}, two), r), CollectiveOp::kAllGather);
  ASSERT_GE(coalesced.size(), 3U);
  EXPECT_EQ(coalesced[1].label, "zero3 prefetch AG layer 1 2 at fwd layer 0 mb 0");
  EXPECT_EQ(coalesced[1].bytes, 440);
  EXPECT_EQ(coalesced[2].label, "zero3 prefetch AG layer 3 0 at fwd layer 1 mb 0");
}

// The plan add_sync_policy returns names what each gather carries (the model payload packs by
// it): the coalesced gather of layers 3 and 0 above holds L3.a, L3.b, L0.a, L0.b (module by
// module, registration order within), each padded to d = 2 and split in per-tensor partitions;
// tags are unique on the rank, and the other replica's rank walks alike and gets the same ones.
TEST(ZeroStage3, ThePlanNamesTheTensorsOfEachGather) {
  SyncOptions two = kNoReuse;
  two.zero_prefetch_bucket_size = 220;
  testing::SyncStep step = testing::make_sync_step({.microbatches = 1, .replicas = 2});
  const SyncPlan plan = add_sync_policy(step.builder, step.input, two);
  const ir::Graph g = std::move(step.builder).build();
  const auto ags = of_op(issued_collectives(g, RankId{0}), CollectiveOp::kAllGather);
  const auto replica = of_op(issued_collectives(g, RankId{1}), CollectiveOp::kAllGather);
  ASSERT_GE(ags.size(), 3U);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(buckets_of(ags), buckets_of(replica));
  std::vector<std::int32_t> tags = buckets_of(ags);
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(std::unique(tags.begin(), tags.end()), tags.end());
  const auto planned = std::find_if(plan[0].begin(), plan[0].end(),
                                    [&](const PlannedBucket& b) { return b.id == ags[2].bucket; });
  ASSERT_NE(planned, plan[0].end());
  std::vector<std::string> names;
  for (const std::int32_t t : planned->bucket.tensors) {
    names.push_back(step.input.params[0][0].tensors[static_cast<std::size_t>(t)].name);
  }
  EXPECT_THAT(names, ElementsAre("layers.3.a", "layers.3.b", "layers.0.a", "layers.0.b"));
  EXPECT_EQ(planned->bucket.padded_numel, 100 + 10 + 100 + 10);
  EXPECT_EQ(ags[2].bytes, planned->bucket.padded_numel * 2);
  EXPECT_TRUE(planned->per_tensor_partitions);
}

// zero_synchronous_fetch (DeepSpeed 2021: torch.cuda.synchronize() before each parameter
// gather and after each fetch). With prefetch (budget 110, one layer ahead) and every layer
// released, every piece's fetch is a first wait, so: no fetch-event throttle; before each piece the
// host waits for its layer's gather and for the piece before it; and no collective is left in
// flight for more than one piece: each is waited for before the second compute task issued
// after it (a prefetch runs under one piece; a hook's reduce-scatter under none, since the next
// fetch waits for it).
TEST(ZeroStage3, SynchronousFetchKeepsTheHostAtMostOnePieceAhead) {
  SyncOptions options = kNoReuse;
  options.zero_prefetch_bucket_size = 110;
  options.zero_synchronous_fetch = true;
  const ir::Graph g = lower_with({.microbatches = 2}, options);
  const RankId r{0};
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  const std::span<const TaskId> order = g.issue_order(r);
  std::vector<std::size_t> computes;  // positions of compute tasks
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (std::holds_alternative<ir::Compute>(g.task(order[i]).op)) computes.push_back(i);
  }
  std::vector<std::size_t> waited_at(order.size(), order.size());  // by target position
  for (const Wait& w : host_waits(g, r)) {
    EXPECT_EQ(w.label.find("fetch throttle"), std::string::npos) << w.label;
    const auto target = static_cast<std::size_t>(g.issue_position(w.target));
    waited_at[target] =
        std::min(waited_at[target], static_cast<std::size_t>(g.issue_position(w.id)));
  }
  int checked = 0;
  for (std::size_t k = 1; k < computes.size(); ++k) {
    const ir::Task& p = g.task(order[computes[k]]);
    const auto* c = std::get_if<ir::Compute>(&p.op);
    if (c->phase != ir::Phase::kForward && c->phase != ir::Phase::kBackward) continue;
    // Its layer's gather and the piece before it are waited for before it is issued.
    EXPECT_LT(waited_at[computes[k - 1]], computes[k]) << p.label;
    bool gathered = false;
    for (TaskId d : p.deps) {
      const auto* ag = std::get_if<ir::Collective>(&g.task(d).op);
      if (ag == nullptr || ag->op != CollectiveOp::kAllGather) continue;
      gathered = true;
      EXPECT_LT(waited_at[static_cast<std::size_t>(g.issue_position(d))], computes[k]) << p.label;
    }
    EXPECT_TRUE(gathered) << p.label;
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 8 - 1);  // every layer piece of both microbatches but the first
  int collectives = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!std::holds_alternative<ir::Collective>(g.task(order[i]).op)) continue;
    const auto after = std::upper_bound(computes.begin(), computes.end(), i);
    if (after == computes.end() || after + 1 == computes.end()) continue;
    EXPECT_LT(waited_at[i], *(after + 1)) << g.task(order[i]).label;
    ++collectives;
  }
  // Per microbatch 8 gathers and 4 reduce-scatters, but the last one, after the last piece
  // (the epilogue waits for it).
  EXPECT_EQ(collectives, 2 * (8 + 4) - 1);
}

// A layer kept for its backward (the default reuse distance keeps all four) is AVAILABLE when its
// backward fetches it: DeepSpeed neither waits for its gather again nor synchronises, so only
// the four forward fetches end in a wait on their gather.
TEST(ZeroStage3, SynchronousFetchOfAKeptLayerWaitsForNothing) {
  SyncOptions options = kNoReuse;
  options.zero_prefetch_bucket_size = 110;
  options.zero_max_reuse_distance = SyncOptions{}.zero_max_reuse_distance;
  options.zero_synchronous_fetch = true;
  const ir::Graph g = lower_with({.microbatches = 1}, options);
  std::vector<std::string> fetch_waits;
  for (const Wait& w : host_waits(g, RankId{0})) {
    if (w.label.starts_with("zero3 fetch ")) fetch_waits.push_back(w.label);
  }
  EXPECT_THAT(fetch_waits,
              ElementsAre("zero3 fetch fwd layer 0 mb 0", "zero3 fetch fwd layer 1 mb 0",
                          "zero3 fetch fwd layer 2 mb 0", "zero3 fetch fwd layer 3 mb 0"));
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
}

// Iteration 1 records the trace during the first forward and backward: no prefetch and every
// module released after use (no reuse distance without a trace), so mb 0 gathers 8 times. The
// trace is complete for mb 1, which (default reuse distance, budget 110) gathers L0 and
// prefetches L1, L2, L3 one step ahead and keeps them all for the backward. Steady state does
// the same from mb 0 on.
TEST(ZeroStage3, WarmupRecordsTheTraceBeforePrefetching) {
  SyncOptions options{.policy = SyncPolicy::kZero3,
                      .iteration = Iteration::kWarmup,
                      .zero_prefetch_bucket_size = 110,
                      .zero_param_persistence_threshold = 0};
  const RankId r{0};
  const auto warm = issued_collectives(lower_with({.microbatches = 2}, options), r);
  const auto mb0 = of_op(of_microbatch(warm, 0), CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(mb0), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
  for (const auto& c : mb0) EXPECT_THAT(c.label, Not(HasSubstr("prefetch")));
  const auto mb1 = of_op(of_microbatch(warm, 1), CollectiveOp::kAllGather);
  EXPECT_THAT(first_layers(mb1), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(mb1[1].label, HasSubstr("prefetch"));
  options.iteration = Iteration::kSteady;
  const auto steady = issued_collectives(lower_with({.microbatches = 2}, options), r);
  EXPECT_THAT(first_layers(of_op(of_microbatch(steady, 0), CollectiveOp::kAllGather)),
              ElementsAre(0, 1, 2, 3));
}

// Without overlap_comm the gathers and reductions run on the compute stream: the piece after an
// RS's hook waits for it.
TEST(ZeroStage3, WithoutOverlapCommComputeWaitsForReductions) {
  SyncOptions options = kNoReuse;
  options.overlap_grad_reduce = false;
  const ir::Graph g = lower_with({.microbatches = 1}, options);
  const RankId r{0};
  const auto rss = of_op(issued_collectives(g, r), CollectiveOp::kReduceScatter);
  ASSERT_EQ(rss.size(), 4U);
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kBackward, 0, 2)), Contains(rss[0].id));
  EXPECT_THAT(deps(g, piece(g, r, ir::Phase::kBackward, 0, 0)), Contains(rss[2].id));
  // With overlap_comm (the stage-3 default) they do not.
  const ir::Graph overlapped = lower_with({.microbatches = 1}, kNoReuse);
  const auto rs0 = of_op(issued_collectives(overlapped, r), CollectiveOp::kReduceScatter)[0];
  EXPECT_THAT(deps(overlapped, piece(overlapped, r, ir::Phase::kBackward, 0, 2)),
              Not(Contains(rs0.id)));
}

// ---- Every stage on pipelined steps ------------------------------------------------------------

// pp 2, 4 layers: each rank holds 2 layers = 220 elements, one IPG bucket at the default size.
// Per rank ZeRO-1 reduces once (1 AR), ZeRO-2 on each of the M microbatches; ZeRO-3 (defaults:
// everything persistent) reduce-scatters the bucket M times. The graphs validate with replicas
// (every collective matched across the data-parallel group) and run to the end in the unit-cost
// dry run, also with one hardware queue.
TEST(ZeroPipelined, EveryStageValidatesAndCountsPerRank) {
  for (const SyncPolicy policy : {SyncPolicy::kZero1, SyncPolicy::kZero2, SyncPolicy::kZero3}) {
    for (const std::int32_t replicas : {1, 2}) {
      for (const std::int32_t queues : {8, 1}) {
        const SyncStepSpec spec{
            .pp = 2, .microbatches = 4, .replicas = replicas, .hardware_queues = queues};
        const ir::Graph g = lower_with(spec, {.policy = policy});
        EXPECT_FALSE(ir::find_deadlock(g).deadlocked) << to_string(policy);
        for (std::int32_t rank = 0; rank < 2 * replicas; ++rank) {
          const auto all = issued_collectives(g, RankId{rank});
          const auto reductions =
              of_op(all, policy == SyncPolicy::kZero3 ? CollectiveOp::kReduceScatter
                                                      : CollectiveOp::kAllReduce);
          const std::size_t expected = policy == SyncPolicy::kZero1 ? 1 : 4;
          EXPECT_EQ(reductions.size(), expected) << to_string(policy) << " rank " << rank;
          for (const auto& c : reductions) EXPECT_EQ(c.bytes, 440);
          const auto gathers = of_op(all, CollectiveOp::kAllGather);
          ASSERT_EQ(gathers.size(), 1U);  // the param group / the persistent tensors
          EXPECT_EQ(gathers[0].bytes, 440);
        }
      }
    }
  }
}

// Pipelined ZeRO-3 with gathers: the graph validates for the schedules of every shape (split
// backward, interleaved chunks, V placement, replicas) and runs without deadlock on one hardware
// queue, where every stream dispatches in issue order. 8 layers over 2 ranks: each holds 4, and
// its forwards gather each of them (own or prefetched; one layer per AG with a budget of 110,
// so the AG's bucket tag names it).
TEST(ZeroPipelined, Zero3ValidatesAcrossSchedules) {
  struct Case {
    std::string schedule;
    std::int32_t vp;
    bool split_backward;
  };
  for (const Case& c :
       {Case{"1f1b", 1, false}, Case{"gpipe", 1, false}, Case{"interleaved-1f1b", 2, false},
        Case{"zb-h1", 1, true}, Case{"zb-v", 2, true}, Case{"dualpipe-v", 2, false},
        Case{"dualpipe", 2, false}}) {
    for (const SyncPolicy policy : {SyncPolicy::kZero1, SyncPolicy::kZero2, SyncPolicy::kZero3}) {
      SyncOptions options = kNoReuse;
      options.policy = policy;
      options.zero_prefetch_bucket_size = 110;
      options.zero_max_reuse_distance = 300;
      const SyncStepSpec spec{.schedule = c.schedule,
                              .pp = 2,
                              .vp = c.vp,
                              .microbatches = 4,
                              .layers = 8,
                              .replicas = 2,
                              .split_backward = c.split_backward,
                              .hardware_queues = 1};
      SCOPED_TRACE(c.schedule + " " + std::string(to_string(policy)));
      const ir::Graph g = lower_with(spec, options);  // throws InvalidGraph when invalid
      EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
      if (policy != SyncPolicy::kZero3) continue;
      for (std::int32_t rank = 0; rank < 4; ++rank) {
        std::vector<std::int32_t> layers;
        for (const auto& x : of_op(issued_collectives(g, RankId{rank}), CollectiveOp::kAllGather)) {
          if (x.label.find("fwd") != std::string::npos) layers.push_back(first_layers({x}).front());
        }
        std::sort(layers.begin(), layers.end());
        layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
        EXPECT_EQ(layers.size(), 4U) << c.schedule << " rank " << rank;
      }
    }
  }
}

// ---- Errors ------------------------------------------------------------------------------------

TEST(ZeroErrors, Zero3RejectsExpertTensorsAndNegativeKnobs) {
  auto step = make_sync_step({});
  step.input.params[0][0].tensors[0].expert = true;
  EXPECT_THAT([&] { add_sync_policy(step.builder, step.input, {.policy = SyncPolicy::kZero3}); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("zero3: stage 0 tensor \"layers.0.a\" is an expert weight")));
  auto other = make_sync_step({});
  EXPECT_THAT(
      [&] {
        add_sync_policy(other.builder, other.input,
                        {.policy = SyncPolicy::kZero3, .zero_max_reuse_distance = -1});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("max reuse distance -1; expected element counts")));
}

}  // namespace
}  // namespace metron::sync
