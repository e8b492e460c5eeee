// model_stage_costs (Note [stage costs from the model]) on a machine where memory traffic is free
// and GEMMs reach their peak exactly, so every time is matrix FLOPs / peak and can be written
// down from the FLOP formulas (Narayanan et al. SC'21) by hand.

#include "metron/models/stage_cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"
#include "support/tiny_models.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr double kPeak = 1e12;

HardwareSpec ideal_machine() {
  HardwareSpec hw = hardware_preset("dgx-a100");
  hw.gpu.peak_flops = {{Precision::kBf16, kPeak}};
  hw.gpu.hbm_bandwidth = 1e30;  // element-wise ops cost ~1e-25 s
  hw.gpu.sm_count = 0;          // no tile or wave quantization
  hw.gpu.gemm_efficiency = 1.0;
  hw.gpu.memory_efficiency = 1.0;
  return hw;
}

TEST(ModelStageCosts, StagesAreLayerFlopsOverPeakPlusTheEndsExtras) {
  // tiny_gelu(4): h = 8, a = 2, V = 10; b = 2, s = 4; pp = 2 → 2 layers per stage.
  const ModelSpec model = testing::tiny_gelu(4);
  const ParallelSpec spec{.pp = 2, .microbatch_size = 2, .num_microbatches = 4};
  const HardwareSpec hw = ideal_machine();
  const ComputeModel compute(hw, Precision::kBf16);
  const CommModel comm(hw);
  const StageCosts costs = model_stage_costs(model, spec, compute, comm);
  const double b = 2, s = 4, h = 8, v = 10;
  const double gemm = 24 * b * s * h * h;      // QKV, out, two MLP GEMMs, forward
  const double attention = 4 * b * s * s * h;  // QKᵀ and ·V, forward
  const double head = 2 * b * s * h * v;       // LM head GEMM
  const double tolerance = 1e-12;
  ASSERT_EQ(costs.stages(), 2U);
  EXPECT_NEAR(costs.forward[0], 2 * (gemm + attention) / kPeak, tolerance);
  EXPECT_NEAR(costs.forward[1], (2 * (gemm + attention) + head) / kPeak, tolerance);
  // I: one activation-gradient GEMM per weight GEMM, two per attention product.
  EXPECT_NEAR(costs.backward_input[0], 2 * (gemm + 2 * attention) / kPeak, tolerance);
  EXPECT_NEAR(costs.backward_input[1], (2 * (gemm + 2 * attention) + head) / kPeak, tolerance);
  // W: one weight-gradient GEMM per weight GEMM.
  EXPECT_NEAR(costs.backward_weight[0], 2 * gemm / kPeak, tolerance);
  EXPECT_NEAR(costs.backward_weight[1], (2 * gemm + head) / kPeak, tolerance);
  EXPECT_NEAR(costs.backward[1], costs.backward_input[1] + costs.backward_weight[1], tolerance);
  // Neighbours share a node (2 ranks on 8-GPU nodes): NVLink's 1 µs + b·s·h·2 bytes at NCCL's
  // 232 GB/s times the A100 sweep's fraction for small messages, 109.93 / 234.89.
  EXPECT_DOUBLE_EQ(costs.p2p, 1e-6 + b * s * h * 2 / (232e9 * (109.93 / 234.89)));
}

TEST(ModelStageCosts, FullRecomputeChargesAForwardToEachBackward) {
  const ModelSpec model = testing::tiny_gelu(4);
  const HardwareSpec hw = ideal_machine();
  const ComputeModel compute(hw, Precision::kBf16);
  const CommModel comm(hw);
  const ParallelSpec plain{.pp = 2, .microbatch_size = 2, .num_microbatches = 4};
  ParallelSpec full = plain;
  full.recompute = Recompute::kFull;
  const StageCosts a = model_stage_costs(model, plain, compute, comm);
  const StageCosts r = model_stage_costs(model, full, compute, comm);
  const double layer_forward = (24.0 * 2 * 4 * 8 * 8 + 4.0 * 2 * 4 * 4 * 8) / kPeak;
  EXPECT_NEAR(r.backward_input[0] - a.backward_input[0], 2 * layer_forward, 1e-12);
  EXPECT_NEAR(r.forward[0], a.forward[0], 1e-15);
}

TEST(ModelStageCosts, BoundaryTensorIsSplitBySequenceParallelism) {
  const ModelSpec model = testing::tiny_gelu(4);
  // b·s·h elements of bf16: 2·4·8·2 = 128 bytes; /2 with tp = 2 and sequence parallelism.
  EXPECT_EQ(boundary_bytes(model, {.pp = 2, .microbatch_size = 2}), 128);
  EXPECT_EQ(
      boundary_bytes(model, {.tp = 2, .pp = 2, .sequence_parallel = true, .microbatch_size = 2}),
      64);
}

TEST(ModelStageCosts, ThePipelineScatterGatherSendsOneTensorParallelRanksShare) {
  const ModelSpec model = testing::tiny_gelu(4);
  // 128 bytes whole (above); each of tp = 2 ranks sends half.
  EXPECT_EQ(
      boundary_bytes(model, {.tp = 2, .pp = 2, .microbatch_size = 2, .scatter_gather_p2p = true}),
      64);
  // Not split twice under sequence parallelism, which has split it already (Megatron skips the
  // scatter/gather there); nothing to split at tp = 1.
  EXPECT_EQ(boundary_bytes(model, {.tp = 2,
                                   .pp = 2,
                                   .sequence_parallel = true,
                                   .microbatch_size = 2,
                                   .scatter_gather_p2p = true}),
            64);
  EXPECT_EQ(boundary_bytes(model, {.pp = 2, .microbatch_size = 2, .scatter_gather_p2p = true}),
            128);
  EXPECT_FALSE((ParallelSpec{.tp = 2, .pp = 1, .scatter_gather_p2p = true}.p2p_scatter_gather()));
  EXPECT_TRUE((ParallelSpec{.tp = 2, .pp = 2, .scatter_gather_p2p = true}.p2p_scatter_gather()));
}

// Note [uneven stages] on tiny_gelu(6), pp 2, vp 2, first rank 2 layers, last 4: each rank's
// chunks share its layers, 1 and 2. Interleaved (stage s on rank s mod 2): stages 0..3 hold
// 1, 2, 1, 2 layers; the V placement (ranks 0, 1, 1, 0): 1, 2, 2, 1. Forward times follow the
// counts; the first stage adds nothing here but the (free) embedding, the last the head.
TEST(ModelStageCosts, UnevenStagesFollowTheirRanksLayers) {
  const ModelSpec model = testing::tiny_gelu(6);
  ParallelSpec spec{.pp = 2, .vp = 2, .microbatch_size = 2, .num_microbatches = 4};
  spec.first_stage_layers = 2;
  spec.last_stage_layers = 4;
  EXPECT_EQ(model_stage_layers(model, spec), (std::vector<std::int64_t>{1, 2, 1, 2}));
  const std::vector<std::int32_t> v_ranks{0, 1, 1, 0};
  EXPECT_EQ(model_stage_layers(model, spec, v_ranks), (std::vector<std::int64_t>{1, 2, 2, 1}));
  const HardwareSpec hw = ideal_machine();
  const StageCosts costs =
      model_stage_costs(model, spec, ComputeModel(hw, Precision::kBf16), CommModel(hw), v_ranks);
  const double b = 2, s = 4, h = 8, v = 10;
  const double layer = (24 * b * s * h * h + 4 * b * s * s * h) / kPeak;
  const double head = 2 * b * s * h * v / kPeak;
  const double tolerance = 1e-12;
  ASSERT_EQ(costs.stages(), 4U);
  EXPECT_NEAR(costs.forward[0], layer, tolerance);
  EXPECT_NEAR(costs.forward[1], 2 * layer, tolerance);
  EXPECT_NEAR(costs.forward[2], 2 * layer, tolerance);
  EXPECT_NEAR(costs.forward[3], layer + head, tolerance);
  EXPECT_THAT(
      [&] {
        (void)model_stage_layers(model, spec, std::vector<std::int32_t>{0, 1});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("2 stage ranks; expected pp·vp = 4")));
}

TEST(ModelStageCosts, LayersMustDivideOverTheStages) {
  const HardwareSpec hw = ideal_machine();
  EXPECT_THAT(
      [&] {
        (void)model_stage_costs(testing::tiny_gelu(4), {.pp = 3},
                                ComputeModel(hw, Precision::kBf16), CommModel(hw));
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("layers (4) must be divisible by pp·vp (3)")));
}

}  // namespace
}  // namespace metron::models
