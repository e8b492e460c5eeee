// The handcrafted Zero Bubble schedules: ZB-H1, ZB-H2 (Qi et al., ICLR 2024, §3.1) and ZB-V
// (§6), as per-rank compute orders (docs/SCHEDULES.md §2.4, §3). The automatic scheduler is in
// zb_auto.cc.

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

using ir::ActionType;
using Row = std::vector<std::optional<ir::Action>>;

// Appends `type` for `stage` with the stage's next microbatch of that type, as PyTorch's
// generators do: F, I and W indices advance independently.
void emit(Row& row, ActionType type, std::int32_t stage, std::int32_t& next_mb) {
  row.emplace_back(ir::Action{.type = type, .stage = stage, .microbatch = next_mb++});
}

Order finish(std::vector<Row> rows, bool forward_only) {
  if (forward_only) {
    for (Row& row : rows) {
      std::erase_if(row, [](const auto& a) { return a->type != ActionType::kForward; });
    }
  }
  Order order;
  order.rows = std::move(rows);
  return order;
}

// PyTorch's _get_1f1b_rank_ops with zb=True and one local stage (ScheduleInterleavedZeroBubble):
// warm-up min(p−1−r, m) forwards, then F+I per op, then I per op; a W follows an op once
// op − warm-up ≥ n1f1b = r, so rank r delays its first W by r steady steps; leftover W last.
Row zb_h1_row(std::int32_t p, std::int32_t m, std::int32_t r) {
  const std::int32_t warmup = std::min(p - 1 - r, m);
  std::int32_t f = 0;
  std::int32_t i = 0;
  std::int32_t w = 0;
  Row row;
  for (std::int32_t op = 0; op < m + warmup; ++op) {
    if (op < m) emit(row, ActionType::kForward, r, f);
    if (op < warmup) continue;
    emit(row, ActionType::kBackwardInput, r, i);
    if (op - warmup >= r) emit(row, ActionType::kBackwardWeight, r, w);
  }
  while (w < m) emit(row, ActionType::kBackwardWeight, r, w);
  return row;
}

// Note [zb-h2 definition]. PyTorch has no ZB-H2; this is our reading of the paper's figure 3 and
// Table 2 (parallelogram, per-worker memory (2p−2i+1)·M_B + (2i−2)·M_W for worker i = r+1):
//   warm-up  w_r = min(2(p−r)−1, m) forwards: exactly fills rank r until I(r,0) can start
//            (F0 reaches the last rank after p−1−r hops and I0 comes back in p−1−r more);
//   step j   I_j, then W_j, then the next forward F_{j+w_r} while forwards remain;
//   tail     the last 2p−1 steps (j ≥ m−2p+1) run I-F or I-W at period F+I instead of
//            F+I+W: a step that still has a forward defers its W (2r of them on rank r), a step
//            without one runs the oldest deferred W; what is left runs at the end.
// With F = I = W every rank r is busy without a gap from r to r + m·(F+I+W): per-rank span
// m·(F+I+W) + (p−1)(F+I−2W), global makespan that plus the (p−1)·F start-up offset.
Row zb_h2_row(std::int32_t p, std::int32_t m, std::int32_t r) {
  const std::int32_t warmup = std::min(2 * (p - r) - 1, m);
  const std::int32_t tail_start = m - (2 * p - 1);
  std::int32_t f = 0;
  std::int32_t i = 0;
  std::int32_t w = 0;
  Row row;
  while (f < warmup) emit(row, ActionType::kForward, r, f);
  for (std::int32_t j = 0; j < m; ++j) {
    emit(row, ActionType::kBackwardInput, r, i);
    const bool has_forward = f < m;
    if (!has_forward || j < tail_start) emit(row, ActionType::kBackwardWeight, r, w);
    if (has_forward) emit(row, ActionType::kForward, r, f);
  }
  while (w < m) emit(row, ActionType::kBackwardWeight, r, w);
  return row;
}

// One V chunk of a rank: its global stage and its F, I and W counters.
struct Chunk {
  std::int32_t stage;
  std::int32_t f = 0;
  std::int32_t i = 0;
  std::int32_t w = 0;
};

void forward_backward(Row& row, Chunk& c) {
  emit(row, ActionType::kForward, c.stage, c.f);
  emit(row, ActionType::kBackwardInput, c.stage, c.i);
  emit(row, ActionType::kBackwardWeight, c.stage, c.w);
}

// PyTorch ScheduleZBVZeroBubble._calculate_single_rank_operations over n' = max(2p−1, m)
// microbatches (the caller drops mb ≥ m). Chunk 0 is stage r, chunk 1 is stage 2p−1−r.
Row zb_v_row(std::int32_t p, std::int32_t n, std::int32_t r) {
  Chunk c0{.stage = r};
  Chunk c1{.stage = 2 * p - 1 - r};
  Row row;
  for (std::int32_t k = 0; k < 2 * (p - r) - 1; ++k)
    emit(row, ActionType::kForward, c0.stage, c0.f);
  for (std::int32_t k = 0; k < r; ++k) {
    emit(row, ActionType::kForward, c1.stage, c1.f);
    emit(row, ActionType::kForward, c0.stage, c0.f);
  }
  for (std::int32_t k = 0; k < p - r; ++k) forward_backward(row, c1);
  while (c1.f < c0.f || c0.f < n) {
    if (c0.f < n) emit(row, ActionType::kForward, c0.stage, c0.f);
    emit(row, ActionType::kBackwardInput, c0.stage, c0.i);
    emit(row, ActionType::kBackwardWeight, c0.stage, c0.w);
    forward_backward(row, c1);
  }
  // Cool-down: the W of both chunks wait while the I chain drains.
  for (std::int32_t k = 0; k < r; ++k) {
    emit(row, ActionType::kBackwardInput, c0.stage, c0.i);
    emit(row, ActionType::kBackwardInput, c1.stage, c1.i);
  }
  for (std::int32_t k = 0; k < p - r; ++k) {
    emit(row, ActionType::kBackwardInput, c0.stage, c0.i);
    emit(row, ActionType::kBackwardWeight, c0.stage, c0.w);
  }
  while (c1.w < c1.i) emit(row, ActionType::kBackwardWeight, c1.stage, c1.w);
  while (c0.w < c0.i) emit(row, ActionType::kBackwardWeight, c0.stage, c0.w);
  return row;
}

template <typename RowFn>
std::vector<Row> rows_per_rank(std::int32_t p, RowFn row_fn) {
  std::vector<Row> rows;
  rows.reserve(static_cast<std::size_t>(p));
  for (std::int32_t r = 0; r < p; ++r) rows.push_back(row_fn(r));
  return rows;
}

}  // namespace

Order zb_h1(const ScheduleSpec& spec) {
  detail::require_positive("zb-h1", spec);
  detail::require_chunks("zb-h1", spec, 1);
  return finish(
      rows_per_rank(spec.pp,
                    [&](std::int32_t r) { return zb_h1_row(spec.pp, spec.microbatches, r); }),
      spec.forward_only);
}

Order zb_h2(const ScheduleSpec& spec) {
  detail::require_positive("zb-h2", spec);
  detail::require_chunks("zb-h2", spec, 1);
  return finish(
      rows_per_rank(spec.pp,
                    [&](std::int32_t r) { return zb_h2_row(spec.pp, spec.microbatches, r); }),
      spec.forward_only);
}

Order zb_v(const ScheduleSpec& spec) {
  detail::require_positive("zb-v", spec);
  detail::require_chunks("zb-v", spec, 2);
  const std::int32_t m = spec.microbatches;
  const std::int32_t n = std::max(2 * spec.pp - 1, m);
  auto rows = rows_per_rank(spec.pp, [&](std::int32_t r) { return zb_v_row(spec.pp, n, r); });
  // PyTorch pads to n' ≥ 2p−1 microbatches and drops the padding, so m < 2p−1 is supported.
  for (Row& row : rows) std::erase_if(row, [m](const auto& a) { return a->microbatch >= m; });
  return finish(std::move(rows), spec.forward_only);
}

}  // namespace metron::pipeline
