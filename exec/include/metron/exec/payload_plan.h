#pragma once
// The arithmetic of the compute payloads, kept free of libtorch and CUDA so that tests can check
// it without either and without running it: the torch payload's sizes (Note [torch compute] in
// metron/exec/torch_compute.h) and the square GEMMs that stand for a task without operations,
// which the CUDA payload plans the same way (Note [cuda compute] in
// metron/exec/cuda/cuda_compute.h).

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/task.h"

namespace metron::exec::payload {

/// fp32: what every operation of the torch payload runs in (see its Note for why).
inline constexpr double kElementBytes = 4;
/// One operation's tensors may not exceed this: refused with InvalidConfig instead of bad_alloc.
inline constexpr double kMaxOperationBytes = 8.0 * 1024 * 1024 * 1024;
/// The largest square GEMM a task without operations runs (3 × 64 MiB of fp32 tensors).
inline constexpr std::int64_t kMaxSquareGemm = 4096;

/// `repeats` square fp32 GEMMs of n×n×n, 2·n³ flops each.
struct SquareGemms {
  std::int64_t n = 0;
  std::int64_t repeats = 0;
};

/// Square GEMMs whose 2·n³ add up to `flops` within 1 % once flops is above ~1e4 (below that the
/// integer sizes are too coarse, and such a task takes no measurable time anyway): as many
/// max_n GEMMs as fit, then greedily the largest n whose 2·n³ still fits the remainder. Each
/// greedy step leaves less than 2·((n+1)³ − n³) ≈ 6·n², so a few steps suffice.
inline std::vector<SquareGemms> plan_square_gemms(double flops,
                                                  std::int64_t max_n = kMaxSquareGemm) {
  std::vector<SquareGemms> plan;
  if (!(flops > 0)) return plan;
  const auto cube = [](std::int64_t n) { return 2.0 * static_cast<double>(n * n * n); };
  // A repeat count past 2^53 is not representable anyway, and would take years on any CPU.
  if (flops / cube(max_n) > 9.0e15) {
    std::ostringstream what;
    what << "torch compute: a compute task of " << flops
         << " flops is too large to run; expected at most " << 9.0e15 * cube(max_n);
    throw InvalidConfig(what.str());
  }
  const auto full = static_cast<std::int64_t>(std::floor(flops / cube(max_n)));
  if (full > 0) plan.push_back({max_n, full});
  double rest = flops - static_cast<double>(full) * cube(max_n);
  constexpr int kMaxSteps = 8;
  for (int step = 0; step < kMaxSteps && rest > 0.005 * flops; ++step) {
    auto n = static_cast<std::int64_t>(std::cbrt(rest / 2));
    while (n > 0 && cube(n) > rest) --n;  // cbrt may round up
    while (n + 1 < max_n && cube(n + 1) <= rest) ++n;
    if (n < 1) break;
    plan.push_back({n, 1});
    rest -= cube(n);
  }
  return plan;
}

/// Elements of each of the three fp32 tensors of an element-wise operation: an out-of-place add
/// moves 3 × 4 bytes per element, so ceil(bytes / 12) of them move the op's bytes; m without
/// bytes.
inline std::int64_t elementwise_elements(const ir::Operation& op) {
  constexpr std::int64_t kAddBytesPerElement = 12;  // read x and y, write z: 3 × 4 bytes
  if (op.bytes <= 0) return op.m;
  return (op.bytes + kAddBytesPerElement - 1) / kAddBytesPerElement;
}

/// Bytes of all tensors one repetition of `op` touches (inputs and output), in double so that
/// absurd sizes compare instead of overflowing.
inline double operation_tensor_bytes(const ir::Operation& op) {
  const auto m = static_cast<double>(op.m);
  const auto n = static_cast<double>(op.n);
  const auto k = static_cast<double>(op.k);
  switch (op.kind) {
    case ir::OperationKind::kGemm:
      return kElementBytes * (m * k + k * n + m * n);
    case ir::OperationKind::kBatchedGemm:
      return kElementBytes * static_cast<double>(op.batch) * (m * k + k * n + m * n);
    case ir::OperationKind::kElementwise:
      return kElementBytes * 3 * static_cast<double>(elementwise_elements(op));
  }
  return 0;
}

}  // namespace metron::exec::payload
