// The CPU backend's libtorch compute payload (Note [torch compute] in
// metron/exec/torch_compute.h). Nothing here is timed (durations belong to bench/): the tests check
// that each operation kind runs, that bad sizes are refused by name before anything is allocated,
// that concurrent callers do not trip over each other, and the payload's arithmetic against its
// formulas.

#include "metron/exec/torch_compute.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/payload_plan.h"

namespace metron::exec {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ir::Operation gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k) {
  return {.name = std::move(name), .kind = ir::OperationKind::kGemm, .m = m, .n = n, .k = k};
}

// One of each kind, small, in the IR's usual bf16: a layer's worth of a tiny transformer.
ir::Compute small_layer() {
  ir::Compute c{.phase = ir::Phase::kForward, .flops = 1e6};
  ir::Operation qkv = gemm("qkv", 64, 96, 32);
  qkv.count = 3;
  c.operations.push_back(qkv);
  c.operations.push_back({.name = "attention-scores",
                          .kind = ir::OperationKind::kBatchedGemm,
                          .m = 16,
                          .n = 16,
                          .k = 8,
                          .batch = 4});
  c.operations.push_back({.name = "softmax",
                          .kind = ir::OperationKind::kElementwise,
                          .m = 1024,
                          .bytes = 4096,
                          .count = 2});
  return c;
}

TEST(TorchCompute, RunsEveryOperationKind) {
  TorchCompute compute(TorchCompute::Options{});
  const ir::Compute c = small_layer();
  EXPECT_NO_THROW(compute.prepare(c));
  EXPECT_NO_THROW(compute.run(c));
  EXPECT_NO_THROW(compute.run(c));  // again, on the cached tensors
}

TEST(TorchCompute, RunsWithoutPrepare) {
  TorchCompute compute(TorchCompute::Options{.intra_op_threads = 2});
  EXPECT_NO_THROW(compute.run(small_layer()));
}

TEST(TorchCompute, TaskWithoutOperationsOrFlopsDoesNothing) {
  TorchCompute compute(TorchCompute::Options{});
  EXPECT_NO_THROW(compute.prepare(ir::Compute{}));
  EXPECT_NO_THROW(compute.run(ir::Compute{}));
}

TEST(TorchCompute, TaskWithOnlyFlopsRunsSquareGemms) {
  TorchCompute compute(TorchCompute::Options{});
  const ir::Compute c{.phase = ir::Phase::kBackward, .flops = 3e7};
  EXPECT_NO_THROW(compute.prepare(c));
  EXPECT_NO_THROW(compute.run(c));
}

TEST(TorchCompute, OperationTooLargeIsRefusedByName) {
  TorchCompute compute(TorchCompute::Options{});
  ir::Compute c = small_layer();
  c.operations.push_back(gemm("mlp-up", 100'000, 100'000, 100'000));  // 3 × 40 GB of fp32
  const auto names_it = ThrowsMessage<InvalidConfig>(AllOf(HasSubstr("mlp-up"), HasSubstr("GiB")));
  EXPECT_THAT([&] { compute.prepare(c); }, names_it);
  EXPECT_THAT([&] { compute.run(c); }, names_it);
}

TEST(TorchCompute, BatchedOperationTooLargeCountsItsBatch) {
  TorchCompute compute(TorchCompute::Options{});
  ir::Compute c;
  // 4 MiB of fp32 tensors per GEMM; 4096 of them are 16 GiB.
  c.operations.push_back({.name = "attention-values",
                          .kind = ir::OperationKind::kBatchedGemm,
                          .m = 512,
                          .n = 512,
                          .k = 512,
                          .batch = 4096});
  EXPECT_THAT([&] { compute.prepare(c); },
              ThrowsMessage<InvalidConfig>(HasSubstr("attention-values")));
}

TEST(TorchCompute, NegativeSizeOrZeroCountIsRefusedByName) {
  TorchCompute compute(TorchCompute::Options{});
  ir::Compute negative;
  negative.operations.push_back(gemm("proj", 8, -1, 8));
  EXPECT_THAT([&] { compute.run(negative); }, ThrowsMessage<InvalidConfig>(HasSubstr("proj")));
  ir::Compute zero_count;
  ir::Operation op = gemm("fc", 8, 8, 8);
  op.count = 0;
  zero_count.operations.push_back(op);
  EXPECT_THAT([&] { compute.run(zero_count); }, ThrowsMessage<InvalidConfig>(HasSubstr("fc")));
}

TEST(TorchCompute, IntraOpThreadsBelowOneIsRefused) {
  EXPECT_THROW(TorchCompute(TorchCompute::Options{.intra_op_threads = 0}), InvalidConfig);
}

TEST(TorchCompute, ConcurrentCallersOfOneTaskAllComplete) {
  TorchCompute compute(TorchCompute::Options{});
  const ir::Compute c = small_layer();
  compute.prepare(c);
  constexpr int kThreads = 4;
  constexpr int kRuns = 50;
  std::vector<int> completed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        compute.run(c);
        ++completed[static_cast<std::size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(completed, std::vector<int>(kThreads, kRuns));
}

TEST(TorchCompute, RunsInFp32) { EXPECT_EQ(TorchCompute::compute_dtype_name(), "fp32"); }

double planned_flops(const std::vector<payload::SquareGemms>& plan) {
  double sum = 0;
  for (const payload::SquareGemms& g : plan) {
    sum += 2.0 * std::pow(static_cast<double>(g.n), 3) * static_cast<double>(g.repeats);
  }
  return sum;
}

TEST(PayloadPlan, SquareGemmsAddUpToTheFlopsWithinOnePercent) {
  for (const double flops :
       {2e4, 1e5, 3.3e6, 1e9, 7.77e10, 2 * std::pow(4096.0, 3), 1e12, 4.2e13, 1e15, 1e18}) {
    const std::vector<payload::SquareGemms> plan = payload::plan_square_gemms(flops);
    EXPECT_NEAR(planned_flops(plan), flops, 0.01 * flops) << flops;
    for (const payload::SquareGemms& g : plan) {
      EXPECT_GE(g.n, 1) << flops;
      EXPECT_LE(g.n, payload::kMaxSquareGemm) << flops;
      EXPECT_GE(g.repeats, 1) << flops;
    }
  }
}

TEST(PayloadPlan, LargeFlopsRepeatTheLargestGemm) {
  // 10 GEMMs of 4096³ (2 · 4096³ flops each) plus a little.
  const double flops = 10 * 2 * std::pow(4096.0, 3) + 1e9;
  const std::vector<payload::SquareGemms> plan = payload::plan_square_gemms(flops);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.front().n, 4096);
  EXPECT_EQ(plan.front().repeats, 10);
}

TEST(PayloadPlan, NoFlopsNoGemms) {
  EXPECT_TRUE(payload::plan_square_gemms(0).empty());
  EXPECT_TRUE(payload::plan_square_gemms(-5).empty());
}

TEST(PayloadPlan, AbsurdFlopsAreRefused) {
  EXPECT_THROW(static_cast<void>(payload::plan_square_gemms(1e40)), InvalidConfig);
}

TEST(PayloadPlan, ElementwiseMovesItsBytesAsAnAdd) {
  // z = x + y: 12 bytes of fp32 per element.
  ir::Operation op{.name = "gelu", .kind = ir::OperationKind::kElementwise, .m = 5, .bytes = 12000};
  EXPECT_EQ(payload::elementwise_elements(op), 1000);
  op.bytes = 13;
  EXPECT_EQ(payload::elementwise_elements(op), 2);  // rounded up
  op.bytes = 0;
  EXPECT_EQ(payload::elementwise_elements(op), 5);  // no bytes: its elements
  EXPECT_EQ(payload::operation_tensor_bytes(op), 3 * 4 * 5);
}

TEST(PayloadPlan, GemmTensorBytesCountInputsAndOutput) {
  EXPECT_EQ(payload::operation_tensor_bytes(gemm("g", 2, 3, 5)), 4 * (2 * 5 + 5 * 3 + 2 * 3));
  ir::Operation batched = gemm("b", 2, 3, 5);
  batched.kind = ir::OperationKind::kBatchedGemm;
  batched.batch = 7;
  EXPECT_EQ(payload::operation_tensor_bytes(batched), 7 * 4 * (2 * 5 + 5 * 3 + 2 * 3));
}

}  // namespace
}  // namespace metron::exec
