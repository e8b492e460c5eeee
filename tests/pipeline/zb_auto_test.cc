// zb-auto: the Zero Bubble automatic scheduler's heuristic (Note [zb-auto heuristic]): valid
// orders, the memory limit, and its span against the handcrafted ZB-H1 and zero bubble.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/order_checks.h"

namespace metron::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ScheduleSpec spec(std::int32_t pp, std::int32_t m, std::optional<std::int32_t> limit = {}) {
  return {.name = "zb-auto", .pp = pp, .microbatches = m, .memory_limit = limit};
}

double max_span(const Order& order, const ActionTimes& times = {}) {
  const auto span = time_order(order, times).span;
  return *std::max_element(span.begin(), span.end());
}

// The most memory a rank holds, in halves of one activation (F +2, I −1, W −1).
int peak_half_memory(const std::vector<std::optional<ir::Action>>& row) {
  int now = 0;
  int peak = 0;
  for (const auto& a : row) {
    now += a->type == ir::ActionType::kForward ? 2 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

TEST(ZbAuto, EveryOrderIsValidAndWithinItsMemoryLimit) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
      for (std::int32_t k : {1, p, 2 * p}) {
        SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m << " K=" << k);
        const Order order = zb_auto(spec(p, m, k));
        ASSERT_NO_THROW(validate_order(order, spec(p, m), Placement::kLoop));
        const Timeline t = time_order(order, {});
        for (std::size_t r = 0; r < order.rows.size(); ++r) {
          EXPECT_LE(peak_half_memory(order.rows[r]), 2 * k) << "rank " << r;
          EXPECT_LE(t.peak_activations[r], k) << "rank " << r;
        }
      }
    }
  }
}

// Memory limit K = p is ZB-1p: the heuristic must do at least as well as the handcrafted ZB-H1.
TEST(ZbAuto, WithOneFOneBMemoryIsNoWorseThanZbH1) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = p; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      const ScheduleSpec s = spec(p, m);
      EXPECT_LE(max_span(zb_auto(s)), max_span(zb_h1(s)));
    }
  }
}

// Memory limit K = 2p is ZB-2p: with unit times the bubble vanishes (span m·(F+I+W)).
TEST(ZbAuto, WithTwiceTheMemoryTheBubbleVanishes) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p - 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      EXPECT_DOUBLE_EQ(max_span(zb_auto(spec(p, m, 2 * p))), 3 * m);
    }
  }
}

// Per-stage times and p2p are the planner's input; its order must stay valid and no stage can
// beat its own work.
TEST(ZbAuto, UnevenStageTimesGiveAValidOrder) {
  ScheduleSpec s = spec(4, 8);
  s.times = {.forward = {1, 1.2, 1, 1.5},
             .backward_input = {1.1, 1.3, 1, 1.6},
             .backward_weight = {0.5, 0.6, 0.4, 0.8},
             .p2p = 0.1};
  const Order order = zb_auto(s);
  ASSERT_NO_THROW(validate_order(order, spec(4, 8), Placement::kLoop));
  EXPECT_EQ(order.rows.size(), 4U);
}

// With K = p and unit times the heuristic lands on ZB-H1 itself once m > p.
TEST(ZbAuto, WithOneFOneBMemoryAndUnitTimesReproducesZbH1) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = p + 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      EXPECT_EQ(ir::format_rows(zb_auto(spec(p, m))), ir::format_rows(zb_h1(spec(p, m))));
    }
  }
}

// With T_I > T_F > T_W and a p2p cost the planner sees the real times; under them it is no
// worse than the handcrafted schedule of the same memory (ZB-H1 for K = p, ZB-H2 for K = 2p).
TEST(ZbAuto, WithUnequalTimesIsNoWorseThanTheHandcraftedSchedules) {
  const ActionTimes times{.forward = 1, .backward_input = 1.2, .backward_weight = 0.6, .p2p = 0.05};
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      ScheduleSpec s = spec(p, m);
      const auto per_stage = [p](double t) { return std::vector<double>(std::size_t(p), t); };
      s.times = {.forward = per_stage(1),
                 .backward_input = per_stage(1.2),
                 .backward_weight = per_stage(0.6),
                 .p2p = 0.05};
      EXPECT_LE(max_span(zb_auto(s), times), max_span(zb_h1(spec(p, m)), times) + 1e-9);
      s.memory_limit = 2 * p;
      EXPECT_LE(max_span(zb_auto(s), times), max_span(zb_h2(spec(p, m)), times) + 1e-9);
    }
  }
}

TEST(ZbAuto, ForwardOnlyKeepsOnlyTheForwards) {
  ScheduleSpec s = spec(2, 3);
  s.forward_only = true;
  EXPECT_EQ(ir::format_rows(zb_auto(s)), "rank 0: 0F0 0F1 0F2\nrank 1: 1F0 1F1 1F2\n");
}

TEST(ZbAuto, ImpossibleSpecsAreRejected) {
  EXPECT_THAT([] { zb_auto({.pp = 4, .vp = 2, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"zb-auto\" (pp=4, vp=2, microbatches=8): needs exactly 1 chunk "
                  "per rank; got vp=2")));
  EXPECT_THAT([] { zb_auto(spec(4, 8, 0)); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("memory limit must hold at least one microbatch's activation; "
                            "expected >= 1, got 0")));
  ScheduleSpec s = spec(4, 8);
  s.times.forward = {1, 1};
  EXPECT_THAT([&] { zb_auto(s); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("forward times must have one entry per stage; expected 4, got 2")));
  s = spec(4, 8);
  s.times.backward_weight = {1, 1, -1, 1};
  EXPECT_THAT([&] { zb_auto(s); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("backward-weight time of stage 2 must be finite and >= 0; got -1")));
  s = spec(4, 8);
  s.times.p2p = -0.5;
  EXPECT_THAT([&] { zb_auto(s); }, ThrowsMessage<InvalidConfig>(
                                       HasSubstr("p2p time must be finite and >= 0; got -0.5")));
}

}  // namespace
}  // namespace metron::pipeline
