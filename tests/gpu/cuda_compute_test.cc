// The CUDA payload's throughput against the datasheet of the GPU it runs on (the hardware
// presets, models/src/hardware_presets.cc): large GEMMs, attention's batched products and the
// streaming kernel must reach a sane fraction of the peak they are priced at, or the executor
// would measure something other than what the cost model describes. Needs a GPU whose preset
// metron knows (A100, H100, H200); skips visibly otherwise.

#include "metron/exec/cuda/cuda_compute.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "metron/base/error.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/models/hardware_presets.h"

namespace metron::exec::cuda {
namespace {

/// The preset of the visible GPU, or nullopt when there is none or metron has no preset for it.
std::optional<models::HardwareSpec> preset_of_this_gpu(std::string& name) {
  if (query_cuda().device_count == 0) return std::nullopt;
  name = CudaCompute({}).device_description();
  return models::hardware_preset_for_gpu(name);
}

double gemm_flops(const ir::Operation& op) {
  return 2.0 * static_cast<double>(op.batch) * static_cast<double>(op.m) *
         static_cast<double>(op.n) * static_cast<double>(op.k);
}

TEST(CudaCompute, LargeGemmsReachHalfTheDatasheetPeak) {
  std::string name;
  const std::optional<models::HardwareSpec> spec = preset_of_this_gpu(name);
  if (!spec) GTEST_SKIP() << "needs an A100, H100 or H200; found \"" << name << "\"";
  for (const ir::DType dtype : {ir::DType::kBf16, ir::DType::kFp16, ir::DType::kFp8}) {
    const std::optional<double> peak =
        spec->gpu.peak(dtype == ir::DType::kFp8    ? models::Precision::kFp8
                       : dtype == ir::DType::kFp16 ? models::Precision::kFp16
                                                   : models::Precision::kBf16);
    if (!peak) continue;  // an A100 has no fp8
    const ir::Operation op{.name = "gemm",
                           .kind = ir::OperationKind::kGemm,
                           .m = 8192,
                           .n = 8192,
                           .k = 8192,
                           .count = 10,
                           .dtype = dtype};
    const double achieved = gemm_flops(op) / measure_operation_seconds(op, {.iterations = 5});
    RecordProperty(std::string(ir::to_string(dtype)) + "_tflops", std::to_string(achieved / 1e12));
    EXPECT_GT(achieved, 0.5 * *peak) << name << " " << ir::to_string(dtype) << ": "
                                     << achieved / 1e12 << " TFLOP/s of " << *peak / 1e12;
    EXPECT_LT(achieved, 1.05 * *peak) << "faster than the datasheet: the timing is wrong";
  }
}

TEST(CudaCompute, AttentionProductsReachAThirdOfTheirRoofline) {
  std::string name;
  const std::optional<models::HardwareSpec> spec = preset_of_this_gpu(name);
  if (!spec) GTEST_SKIP() << "needs an A100, H100 or H200; found \"" << name << "\"";
  // QKᵀ of a GPT layer: 32 heads × 4 sequences, 2048 tokens, head size 128.
  const ir::Operation op{.name = "attention-scores",
                         .kind = ir::OperationKind::kBatchedGemm,
                         .m = 2048,
                         .n = 2048,
                         .k = 128,
                         .batch = 128,
                         .count = 10,
                         .dtype = ir::DType::kBf16};
  const double bytes = 2.0 * static_cast<double>(op.batch) *
                       static_cast<double>(op.m * op.k + op.k * op.n + op.m * op.n);
  const double roofline = std::min(*spec->gpu.peak(models::Precision::kBf16),
                                   gemm_flops(op) / bytes * spec->gpu.hbm_bandwidth);
  const double achieved = gemm_flops(op) / measure_operation_seconds(op, {.iterations = 5});
  EXPECT_GT(achieved, roofline / 3)
      << name << ": " << achieved / 1e12 << " TFLOP/s, roofline " << roofline / 1e12;
}

TEST(CudaCompute, TheStreamingKernelReachesHalfTheHbmBandwidth) {
  std::string name;
  const std::optional<models::HardwareSpec> spec = preset_of_this_gpu(name);
  if (!spec) GTEST_SKIP() << "needs an A100, H100 or H200; found \"" << name << "\"";
  const ir::Operation op{.name = "add",
                         .kind = ir::OperationKind::kElementwise,
                         .m = 1,
                         .bytes = std::int64_t{3} << 30,
                         .count = 10};
  const double achieved =
      static_cast<double>(op.bytes) / measure_operation_seconds(op, {.iterations = 5});
  EXPECT_GT(achieved, 0.5 * spec->gpu.hbm_bandwidth)
      << name << ": " << achieved / 1e9 << " GB/s of " << spec->gpu.hbm_bandwidth / 1e9;
  EXPECT_LT(achieved, 1.05 * spec->gpu.hbm_bandwidth) << "faster than the datasheet";
}

// What cuBLASLt cannot run fails naming the operation (fp8 needs sizes that are multiples of 16
// on every GPU), and a GEMM with a zero size is no work rather than an error.
TEST(CudaCompute, AGemmCublasCannotRunIsNamedAndAnEmptyOneIsNoWork) {
  if (query_cuda().device_count == 0) GTEST_SKIP() << "needs a GPU";
  const ir::Operation odd{.name = "odd-fp8",
                          .kind = ir::OperationKind::kGemm,
                          .m = 100,
                          .n = 100,
                          .k = 100,
                          .dtype = ir::DType::kFp8};
  try {
    (void)measure_operation_seconds(odd, {.iterations = 1, .warmup = 0});
    ADD_FAILURE() << "expected fp8 100x100x100 to be refused";
  } catch (const BackendError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("odd-fp8 gemm 100x100x100 fp8")) << e.what();
  }
  const ir::Operation empty{
      .name = "empty", .kind = ir::OperationKind::kGemm, .m = 0, .n = 64, .k = 64, .count = 3};
  EXPECT_LT(measure_operation_seconds(empty, {.iterations = 1, .warmup = 0}), 1e-4);
}

}  // namespace
}  // namespace metron::exec::cuda
