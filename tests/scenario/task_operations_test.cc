// What compute tasks compute (Note [task operations]): the matrix FLOPs of a forward against
// Megatron-LM's formula, and the operations, priced one by one, against the task's duration.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <variant>

#include "metron/models/compute_cost.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/step_builder.h"

namespace metron::scenario {
namespace {

Scenario gpt_125m(const std::string& schedule, std::int64_t vp,
                  models::Recompute recompute = models::Recompute::kNone) {
  Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {.pp = 2,
                .vp = vp,
                .microbatch_size = 1,
                .num_microbatches = 4,
                .seq_len = 512,
                .recompute = recompute};
  s.schedule = {.name = schedule};
  return s;
}

/// Matrix FLOPs of the operations: 2·m·n·k per GEMM, times batch and count.
double matrix_flops(const ir::Compute& c) {
  double flops = 0;
  for (const ir::Operation& o : c.operations) {
    if (o.kind == ir::OperationKind::kElementwise) continue;
    flops += 2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k) *
             static_cast<double>(o.batch) * o.count;
  }
  return flops;
}

TEST(TaskOperations, AForwardComputesMegatronsFlopsPerLayer) {
  // Stage 0 of 2 holds 6 of GPT-3 125M's 12 layers (h = 768, b = 1, s = 512, tp = 1), and the
  // embedding, whose lookup has no matrix FLOPs. Megatron-LM's count per layer: 24·b·s·h² for
  // the four weight GEMMs, 4·b·s²·h for attention's two products.
  const Step step = build_step(gpt_125m("1f1b", 1), Replication::kSymmetric, Payload::kOperations);
  const double b = 1;
  const double s = 512;
  const double h = 768;
  const double per_layer = 24 * b * s * h * h + 4 * b * s * s * h;
  int forwards = 0;
  for (const ir::Task& t : step.graph.tasks()) {
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase != ir::Phase::kForward || t.stage.value() != 0) continue;
    ++forwards;
    EXPECT_DOUBLE_EQ(matrix_flops(*c), 6 * per_layer);
    ASSERT_FALSE(c->operations.empty());
    EXPECT_EQ(c->operations.front().count, 1);  // the embedding, once
    EXPECT_EQ(c->operations.back().count, 6);   // a layer op, once per layer
  }
  EXPECT_EQ(forwards, 4);  // one per microbatch
}

/// The op the compute model prices for an operation the executor runs: its shape and bytes, the
/// matrix FLOPs of a GEMM, and FP8 where the operation runs at dtype fp8.
models::OpCost op_cost_of(const ir::Operation& o) {
  models::OpCost op{.name = o.name,
                    .m = o.m,
                    .n = o.n,
                    .k = o.k,
                    .batch = o.batch,
                    .bytes = static_cast<double>(o.bytes),
                    .fp8 = o.dtype == ir::DType::kFp8};
  if (o.kind != ir::OperationKind::kElementwise) {
    op.kind =
        o.kind == ir::OperationKind::kGemm ? models::OpKind::kGemm : models::OpKind::kBatchedGemm;
    op.flops = 2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) *
               static_cast<double>(o.k) * static_cast<double>(o.batch);
  }
  return op;
}

/// Every compute task's operations, priced by the compute model, add up to the duration the
/// step gives the task: what the executor runs is what the simulator charged.
void expect_operations_take_the_durations(const Scenario& s, const std::string& what) {
  const Step step = build_step(s, Replication::kSymmetric, Payload::kOperations);
  const models::ComputeModel compute(s.hardware, s.model->dtype);
  int checked = 0;
  for (std::int32_t i = 0; i < step.graph.num_tasks(); ++i) {
    const auto* c = std::get_if<ir::Compute>(&step.graph.task(ir::TaskId{i}).op);
    if (c == nullptr || c->operations.empty()) continue;
    double seconds = 0;
    for (const ir::Operation& o : c->operations) {
      seconds += o.count * compute.op_time(op_cost_of(o));
    }
    const auto expected = static_cast<double>(step.durations[static_cast<std::size_t>(i)]);
    // Durations are whole nanoseconds; the optimizer's shard is rounded to whole elements.
    EXPECT_NEAR(seconds * 1e9, expected, 1.0 + 1e-6 * expected)
        << what << " task " << i << " phase " << ir::to_string(c->phase);
    ++checked;
  }
  EXPECT_GT(checked, 0) << what;
}

TEST(TaskOperations, PricedOneByOneTheyTakeTheTasksDuration) {
  for (const auto& [schedule, vp, recompute] :
       {std::tuple{"1f1b", 1, models::Recompute::kNone},
        std::tuple{"zb-h1", 1, models::Recompute::kSelective},
        std::tuple{"interleaved-1f1b", 2, models::Recompute::kFull}}) {
    expect_operations_take_the_durations(gpt_125m(schedule, vp, recompute), schedule);
  }
}

TEST(TaskOperations, UnderFp8TheLinearGemmsRunInFp8AndStillAddUpToTheDuration) {
  // FP8 training (Note [fp8 training]) on an H100: the executor gets the layers' linear GEMMs at
  // dtype fp8 (the CUDA backend runs them on the FP8 tensor cores), the casts as element-wise
  // operations, and attention's products and the LM head in bf16; priced one by one at those
  // dtypes they take the task's duration.
  Scenario s = gpt_125m("1f1b", 1);
  s.hardware = models::hardware_preset("dgx-h100");
  s.parallel.fp8 = models::Fp8Recipe::kDelayed;
  expect_operations_take_the_durations(s, "fp8");
  const Step step = build_step(s, Replication::kSymmetric, Payload::kOperations);
  int fp8_gemms = 0;
  int casts = 0;
  for (const ir::Task& t : step.graph.tasks()) {
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr) continue;
    for (const ir::Operation& o : c->operations) {
      const bool linear = o.name.starts_with("qkv") || o.name.starts_with("attention-out") ||
                          o.name.starts_with("mlp-");
      casts += o.name.ends_with("-cast") ? o.count : 0;
      if (o.kind == ir::OperationKind::kGemm && linear) {
        EXPECT_EQ(o.dtype, ir::DType::kFp8) << o.name;
        fp8_gemms += o.count;
      } else {
        EXPECT_EQ(o.dtype, ir::DType::kBf16) << o.name;
      }
    }
  }
  // Each of the 12 layers runs 4 linear GEMMs forward and 8 backward (dgrad and wgrad) per
  // microbatch (4), with 2 casts forward and 1 backward per GEMM.
  EXPECT_EQ(fp8_gemms, 12 * 4 * 3 * 4);
  EXPECT_EQ(casts, 12 * 4 * 3 * 4);
}

/// The key models::OpCost::profile_key() gives an operation, spelt out here from its format.
std::string key_of(const ir::Operation& o) {
  const std::string mnk =
      std::to_string(o.m) + "x" + std::to_string(o.n) + "x" + std::to_string(o.k);
  if (o.kind == ir::OperationKind::kGemm) return "gemm:" + mnk;
  if (o.kind == ir::OperationKind::kBatchedGemm) {
    return "batched-gemm:" + std::to_string(o.batch) + "x" + mnk;
  }
  return "elementwise:" + o.name + ":" + std::to_string(o.m);
}

TEST(TaskOperations, AProfileIsChargedExactlyForTheOperationsItLists) {
  // A profile that says every operation takes 1 µs, whatever it is: each compute task then
  // lasts 1 µs per operation repetition (count), exactly, since nothing is left to the roofline.
  Scenario s = gpt_125m("1f1b", 1);
  const Step plain = build_step(s, Replication::kSymmetric, Payload::kOperations);
  models::CostProfile profile;
  for (const ir::Task& t : plain.graph.tasks()) {
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      for (const ir::Operation& o : c->operations)
        profile.set_compute(key_of(o), s.model->dtype, 1e-6);
    }
  }
  s.profile = profile;
  const Step profiled = build_step(s, Replication::kSymmetric, Payload::kOperations);
  int checked = 0;
  for (std::int32_t i = 0; i < profiled.graph.num_tasks(); ++i) {
    const auto* c = std::get_if<ir::Compute>(&profiled.graph.task(ir::TaskId{i}).op);
    if (c == nullptr || c->operations.empty()) continue;
    std::int64_t repetitions = 0;
    for (const ir::Operation& o : c->operations) repetitions += o.count;
    EXPECT_EQ(profiled.durations[static_cast<std::size_t>(i)], repetitions * 1000)
        << "task " << i << " phase " << ir::to_string(c->phase);
    EXPECT_NE(profiled.durations[static_cast<std::size_t>(i)],
              plain.durations[static_cast<std::size_t>(i)]);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(TaskOperations, OnlyAskedForAndNeverWithExplicitCosts) {
  const Step simulated = build_step(gpt_125m("1f1b", 1));
  for (const ir::Task& t : simulated.graph.tasks()) {
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      EXPECT_TRUE(c->operations.empty());  // the simulator's step leaves them out
    }
  }
  Scenario s;
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {.pp = 2, .num_microbatches = 2};
  s.schedule = {.name = "1f1b"};
  s.costs = models::StageCosts{.forward = {1e-3}, .backward = {2e-3}};
  const Step step = build_step(s, Replication::kSymmetric, Payload::kOperations);
  for (const ir::Task& t : step.graph.tasks()) {
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      EXPECT_TRUE(c->operations.empty());
    }
  }
}

}  // namespace
}  // namespace metron::scenario
