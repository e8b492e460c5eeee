// The sync policies in simulated steps: what the overlap options, the hardware queues and the
// policies' sharding do to exposed communication, bytes on the wire and memory, against the
// behaviour docs/SYNC_POLICIES.md describes and the textbook volumes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "metron/lowering/comm_groups.h"
#include "metron/models/comm_cost.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_presets.h"
#include "metron/models/parameter_count.h"
#include "metron/scenario/evaluation.h"

namespace metron::scenario {
namespace {

using sync::SyncOptions;
using sync::SyncPolicy;

/// GPT-3 125M (12 layers, 125M parameters) on DGX A100s, no tensor parallelism: the only
/// collectives are the data-parallel ones.
Scenario gpt_125m(std::int64_t pp, std::int64_t dp, const SyncOptions& sync,
                  std::int64_t microbatches = 4) {
  Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {
      .pp = pp, .dp = dp, .microbatch_size = 1, .num_microbatches = microbatches, .seq_len = 2048};
  s.schedule = {.name = "1f1b"};
  s.sync = sync;
  return s;
}

/// The parameters the only pipeline rank holds: the model's, its word embeddings over the
/// vocabulary as Megatron pads it (50,257 to 50,304).
double rank_parameters(const Scenario& s) {
  const models::RankParameters held = models::rank_parameters(*s.model, s.parallel, 0);
  return static_cast<double>(held.dense + held.expert);
}

/// Data-parallel communication of rank 0 that ran with no compute beside it, in seconds.
double exposed_dp_seconds(const Evaluation& e) {
  return static_cast<double>(e.result.ranks[0].comm_exposed) * 1e-9;
}

/// Bytes each rank puts on the wire for its data-parallel collectives in one step (ring
/// algorithms, models::wire_bytes), from the collectives in the graph.
double wire_bytes_of_rank(const Evaluation& e, ir::RankId rank, std::int64_t group_size) {
  double total = 0;
  for (ir::TaskId t : e.step.graph.issue_order(rank)) {
    const auto* c = std::get_if<ir::Collective>(&e.step.graph.task(t).op);
    if (c == nullptr) continue;
    const auto kind = lowering::group_kind(e.step.graph.group(c->group).name);
    if (kind != lowering::GroupKind::kData) continue;
    const models::CommOp op = c->op == ir::CollectiveOp::kAllReduce ? models::CommOp::kAllReduce
                              : c->op == ir::CollectiveOp::kReduceScatter
                                  ? models::CommOp::kReduceScatter
                                  : models::CommOp::kAllGather;
    total += models::wire_bytes(op, c->bytes, group_size);
  }
  return total;
}

TEST(SyncEvaluation, OverlapOptionsHideMoreOfMegatronsCommunication) {
  // PP = 1 so that nothing but the data-parallel collectives communicates.
  const Evaluation none = evaluate(gpt_125m(1, 8, {.policy = SyncPolicy::kMegatronDistopt}));
  const Evaluation grads = evaluate(
      gpt_125m(1, 8, {.policy = SyncPolicy::kMegatronDistopt, .overlap_grad_reduce = true}));
  const Evaluation both = evaluate(gpt_125m(1, 8,
                                            {.policy = SyncPolicy::kMegatronDistopt,
                                             .overlap_grad_reduce = true,
                                             .overlap_param_gather = true}));
  // Without overlap every collective runs after the backward or after the step, alone.
  EXPECT_EQ(none.result.ranks[0].comm_overlapped, 0);
  EXPECT_GT(none.result.ranks[0].comm_exposed, 0);
  // Each option hides more: reduce-scatters behind the backward, all-gathers behind the forward.
  EXPECT_GT(grads.result.ranks[0].comm_overlapped, 0);
  EXPECT_LT(exposed_dp_seconds(grads), exposed_dp_seconds(none));
  EXPECT_LT(exposed_dp_seconds(both), exposed_dp_seconds(grads));
  EXPECT_LT(both.iteration_time_s, none.iteration_time_s);
}

TEST(SyncEvaluation, DdpOverlapsItsBucketsWithTheBackwardButNotItsLastOne) {
  const Evaluation ddp = evaluate(gpt_125m(1, 8, {.policy = SyncPolicy::kDdp}));
  const Evaluation warmup =
      evaluate(gpt_125m(1, 8, {.policy = SyncPolicy::kDdp, .iteration = sync::Iteration::kWarmup}));
  EXPECT_GT(ddp.result.ranks[0].comm_overlapped, 0);
  EXPECT_GT(ddp.result.ranks[0].comm_exposed, 0);  // the last bucket (first layers) is exposed
  // Iteration 1 has one bucket, reduced after the whole backward: nothing overlaps.
  EXPECT_EQ(warmup.result.ranks[0].comm_overlapped, 0);
  EXPECT_GT(warmup.iteration_time_s, ddp.iteration_time_s);
}

TEST(SyncEvaluation, OneHardwareQueueTakesAwayOverlap) {
  SyncOptions ddp{.policy = SyncPolicy::kDdp, .bucket_size = 4 << 20};
  Scenario s = gpt_125m(1, 8, ddp);
  const Evaluation eight = evaluate(s);
  s.hardware.hardware_queues = 1;
  const Evaluation one = evaluate(s);
  EXPECT_LT(one.result.ranks[0].comm_overlapped, eight.result.ranks[0].comm_overlapped);
  EXPECT_GT(one.iteration_time_s, eight.iteration_time_s);
}

TEST(SyncEvaluation, DistributedOptimizersFirstGatherIsExposedUnlessOverlappedWithTheStep) {
  // Interleaved (Megatron requires it for overlap_param_gather_with_optimizer_step).
  const auto scenario = [](bool with_step) {
    Scenario s = gpt_125m(2, 8,
                          {.policy = SyncPolicy::kMegatronDistopt,
                           .overlap_grad_reduce = true,
                           .overlap_param_gather = true,
                           .overlap_param_gather_with_optimizer_step = with_step},
                          4);
    s.parallel.vp = 2;
    s.schedule = {.name = "interleaved-1f1b"};
    return s;
  };
  for (const bool with_step : {false, true}) {
    const Evaluation e = evaluate(scenario(with_step));
    // Rank 0's first forward: does it wait for a gather?
    ir::TaskId first_forward;
    for (ir::TaskId t : e.step.graph.issue_order(ir::RankId{0})) {
      const auto* c = std::get_if<ir::Compute>(&e.step.graph.task(t).op);
      if (c != nullptr && c->phase == ir::Phase::kForward) {
        first_forward = t;
        break;
      }
    }
    ASSERT_TRUE(first_forward.valid());
    const sim::Time start = e.result.tasks[first_forward.index()].start;
    if (with_step) {
      EXPECT_EQ(start, 0) << "chunk 0 was gathered after its optimizer step";
    } else {
      EXPECT_GT(start, 0) << "the first all-gather is exposed";
    }
  }
}

TEST(SyncEvaluation, BytesOnTheWireMatchTheTextbookVolumes) {
  const std::int64_t d = 8;
  const double p = rank_parameters(gpt_125m(1, d, {}));
  const double ring = 2.0 * static_cast<double>(d - 1) / static_cast<double>(d);
  // DDP: one ring all-reduce of every gradient (bf16), 2(d−1)/d · P · 2 bytes.
  const Evaluation ddp = evaluate(gpt_125m(1, d, {.policy = SyncPolicy::kDdp}));
  EXPECT_NEAR(wire_bytes_of_rank(ddp, ir::RankId{0}, d), ring * p * 2, 1e-9 * p);
  // Megatron's distributed optimizer with bf16 gradients: a reduce-scatter plus an all-gather
  // move what one all-reduce moves (up to the buffer padding, < 0.1% here).
  const Evaluation distopt = evaluate(
      gpt_125m(1, d, {.policy = SyncPolicy::kMegatronDistopt, .grad_reduce_in_fp32 = false}));
  EXPECT_NEAR(wire_bytes_of_rank(distopt, ir::RankId{0}, d), ring * p * 2, 1e-3 * ring * p * 2);
  // ZeRO-3 with nothing kept: an all-gather for forward and one for backward, plus a
  // reduce-scatter, per microbatch: 1.5× DDP's volume per microbatch.
  const SyncOptions zero3{.policy = SyncPolicy::kZero3,
                          .zero_param_persistence_threshold = 0,
                          .zero_max_reuse_distance = 0};
  const Evaluation z3 = evaluate(gpt_125m(1, d, zero3, 1));
  const Evaluation ddp1 = evaluate(gpt_125m(1, d, {.policy = SyncPolicy::kDdp}, 1));
  EXPECT_NEAR(wire_bytes_of_rank(z3, ir::RankId{0}, d) / wire_bytes_of_rank(ddp1, ir::RankId{0}, d),
              1.5, 0.01);
  // ZeRO-2 reduces every microbatch: four microbatches move four times one microbatch's bytes;
  // ZeRO-1 reduces once whatever the microbatch count.
  for (const SyncPolicy policy : {SyncPolicy::kZero1, SyncPolicy::kZero2}) {
    const double one =
        wire_bytes_of_rank(evaluate(gpt_125m(1, d, {.policy = policy}, 1)), ir::RankId{0}, d);
    const double four =
        wire_bytes_of_rank(evaluate(gpt_125m(1, d, {.policy = policy}, 4)), ir::RankId{0}, d);
    // The all-gather after the step is once per step for both.
    const double gather = static_cast<double>(d - 1) / static_cast<double>(d) * p * 2;
    if (policy == SyncPolicy::kZero2) {
      EXPECT_NEAR(four - gather, 4 * (one - gather), 1e-3 * four);
    } else {
      EXPECT_NEAR(four, one, 1e-9 * four);
    }
  }
}

TEST(SyncEvaluation, ModelStatePerPolicyFollowsTheFormulas) {
  const std::int64_t d = 8;
  const auto state = [&](SyncPolicy policy) {
    return build_step(gpt_125m(1, d, {.policy = policy})).state_bytes.at(0);
  };
  const double p = rank_parameters(gpt_125m(1, d, {}));
  // Mixed-precision Adam, bf16 weights (Note [model state bytes]): DDP 16 B per parameter;
  // ZeRO-1 4 + 12/d; ZeRO-2 2 + 14/d; ZeRO-3 and FSDP 16/d; Megatron's distributed optimizer with
  // fp32 gradients 6 + 12/d.
  const double dd = static_cast<double>(d);
  EXPECT_NEAR(state(SyncPolicy::kDdp), 16 * p, 1e-6 * p);
  EXPECT_NEAR(state(SyncPolicy::kZero1), (4 + 12 / dd) * p, 1e-6 * p);
  EXPECT_NEAR(state(SyncPolicy::kZero2), (2 + 14 / dd) * p, 1e-6 * p);
  EXPECT_NEAR(state(SyncPolicy::kZero3), 16 / dd * p, 1e-6 * p);
  EXPECT_NEAR(state(SyncPolicy::kFsdp1), 16 / dd * p, 1e-6 * p);
  EXPECT_NEAR(state(SyncPolicy::kMegatronDistopt), (6 + 12 / dd) * p, 1e-6 * p);
}

TEST(SyncEvaluation, GatheredParametersShowInTheSimulatedMemory) {
  // ZeRO-3 gathers each layer before use and frees it after; DDP allocates nothing during the
  // step beyond the activations both have. So ZeRO-3's simulated peak lies above DDP's by at
  // least one gathered layer (bf16 weights).
  const Evaluation z3 = evaluate(gpt_125m(1, 8, {.policy = SyncPolicy::kZero3}, 1));
  const Evaluation ddp = evaluate(gpt_125m(1, 8, {.policy = SyncPolicy::kDdp}, 1));
  const auto layer_bytes = 2 * models::layer_parameter_count(*gpt_125m(1, 8, {}).model);
  EXPECT_GE(z3.result.ranks[0].peak_memory_bytes,
            ddp.result.ranks[0].peak_memory_bytes + layer_bytes);
}

TEST(SyncEvaluation, EveryPolicyGivesTheSameStepWithOneReplicaOrAll) {
  // The replicas are copies, so the symmetric graph must predict exactly what the full one does
  // — a rendezvous mismatch between replicas would also deadlock the full graph.
  for (const char* name : {"ddp", "megatron-ddp", "megatron-distopt", "fairscale-sdp", "zero1",
                           "zero2", "zero3", "fsdp1", "fsdp2"}) {
    Scenario s = gpt_125m(2, 2, {.policy = *sync::parse_sync_policy(name)});
    s.parallel.tp = 2;
    const Evaluation sym = evaluate(s, Replication::kSymmetric);
    const Evaluation full = evaluate(s, Replication::kFull);
    EXPECT_EQ(sym.result.makespan, full.result.makespan) << name;
    EXPECT_EQ(sym.result.ranks[0].comm_exposed, full.result.ranks[0].comm_exposed) << name;
  }
}

}  // namespace
}  // namespace metron::scenario
