// Property sweeps over every schedule (issue 3): p in 1..8, v in 1..4, m in 1..3p+2, wherever
// the schedule accepts the combination. Every order validates (one F and one B, or one I and
// one W, per stage and microbatch; F before I before W; it completes when run), round-trips
// through the text and CSV forms, and lowers to a graph that validates and cannot deadlock.
// With unit times, makespan and peak in-flight activations match docs/SCHEDULES.md §5.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <ostream>
#include <string>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/order_checks.h"
#include "metron/pipeline/placement.h"
#include "metron/pipeline/registry.h"
#include "support/schedule_sweep.h"

// gtest prints parameters with this instead of dumping their bytes; argument-dependent lookup
// finds it in the parameter's own namespace, and only outside an anonymous one.
// The name is gtest's customisation point, hence not snake_case.
namespace metron::pipeline {
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const ScheduleInfo& info, std::ostream* os);
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const ScheduleInfo& info, std::ostream* os) { *os << info.name; }
}  // namespace metron::pipeline

namespace metron::lowering {

namespace {

using pipeline::testing::sweep;

class EverySchedule : public ::testing::TestWithParam<pipeline::ScheduleInfo> {};

TEST_P(EverySchedule, OrdersValidateAndRoundTripThroughTextAndCsv) {
  int accepted = 0;
  sweep(GetParam(), [&](const pipeline::ScheduleSpec& spec, const pipeline::Order& order) {
    ++accepted;
    ASSERT_NO_THROW(pipeline::validate_order(order, spec, GetParam().placement));
    // Every action sits on the rank its schedule's placement gives its stage.
    const std::int32_t stages =
        GetParam().placement == pipeline::Placement::kLoop ? spec.pp * spec.vp : 2 * spec.pp;
    const auto ranks = pipeline::stage_ranks(GetParam().placement, spec.pp, stages);
    for (std::size_t r = 0; r < order.rows.size(); ++r) {
      for (const auto& action : order.rows[r]) {
        const auto& first = action->sub.empty() ? *action : action->sub.front();
        EXPECT_EQ(ranks[static_cast<std::size_t>(first.stage)], static_cast<std::int32_t>(r))
            << ir::to_string(*action);
      }
    }
    EXPECT_EQ(ir::parse_rows(ir::format_rows(order)), order);
    EXPECT_EQ(ir::parse_csv(ir::format_csv(order)), order);
  });
  EXPECT_GT(accepted, 0) << "the sweep accepted no combination of " << GetParam().name;
}

TEST_P(EverySchedule, ForwardOnlyOrdersHoldOnlyForwardsOrAreRefused) {
  sweep(
      GetParam(),
      [&](pipeline::ScheduleSpec spec, const pipeline::Order&) {
        spec.forward_only = true;
        if (!GetParam().forward_only_meaningful) {
          EXPECT_THAT([&] { (void)pipeline::generate_order(spec); },
                      ::testing::ThrowsMessage<InvalidConfig>(
                          ::testing::HasSubstr("has no forward-only form")));
          return;
        }
        const pipeline::Order order = pipeline::generate_order(spec);
        ASSERT_NO_THROW(pipeline::validate_order(order, spec, GetParam().placement));
      },
      8, 4);
}

TEST_P(EverySchedule, LoweredGraphsValidateAndCannotDeadlock) {
  // Each lowering builds and dry-runs a whole graph, in both p2p modes.
  for (P2PMode mode : {P2PMode::kAsync, P2PMode::kBatched}) {
    sweep(
        GetParam(),
        [&](const pipeline::ScheduleSpec&, const pipeline::Order& order) {
          ir::Graph g = [&] {
            try {
              return lower(order, {.p2p = mode});
            } catch (const InvalidConfig& e) {
              // Batched exchanges may be limited to some placements; the reason must say so.
              EXPECT_EQ(mode, P2PMode::kBatched) << e.what();
              EXPECT_THAT(e.what(), ::testing::HasSubstr("kAsync"));
              return ir::Graph(lower(order, {.p2p = P2PMode::kAsync}));
            }
          }();
          const ir::DeadlockReport report = ir::find_deadlock(g);
          ASSERT_FALSE(report.deadlocked) << report.blocked.front();
          EXPECT_EQ(report.completed, g.num_tasks());
        },
        8, 4);
  }
}

std::vector<pipeline::ScheduleInfo> schedules_to_sweep() {
  return {pipeline::all_schedules().begin(), pipeline::all_schedules().end()};
}

INSTANTIATE_TEST_SUITE_P(Schedules, EverySchedule, ::testing::ValuesIn(schedules_to_sweep()),
                         [](const auto& test) {
                           std::string name(test.param.name);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// --- §5 formulas, unit times ----------------------------------------------------------

constexpr pipeline::ActionTimes kFandB{.forward = 1, .backward = 2};  // F = 1, B = 2F
constexpr pipeline::ActionTimes kFIW{.forward = 1, .backward_input = 1, .backward_weight = 1};

TEST(ScheduleFormulas, GPipeAnd1F1BTake_m_plus_p_minus_1_times_F_plus_B) {
  for (const char* name : {"gpipe", "1f1b"}) {
    sweep(pipeline::find_schedule(name),
          [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
            const pipeline::Timeline t = pipeline::time_order(order, kFandB);
            EXPECT_EQ(t.makespan, (s.microbatches + s.pp - 1) * 3.0);
          });
  }
}

TEST(ScheduleFormulas, PeakActivationsAreMForGPipeAndPMinusRFor1F1B) {
  sweep(pipeline::find_schedule("gpipe"),
        [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
          for (std::int32_t peak : pipeline::time_order(order, kFandB).peak_activations) {
            EXPECT_EQ(peak, s.microbatches);
          }
        });
  sweep(pipeline::find_schedule("1f1b"),
        [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
          const pipeline::Timeline t = pipeline::time_order(order, kFandB);
          for (std::int32_t r = 0; r < s.pp; ++r) {
            EXPECT_EQ(t.peak_activations[static_cast<std::size_t>(r)],
                      std::min(s.pp - r, s.microbatches));
          }
        });
}

TEST(ScheduleFormulas, InterleavedBubbleShrinksByV) {
  // Chunk times F = 1, B = 2: m·v chunk pairs plus a (p − 1)(F + B) bubble, when N = p divides m.
  // Peak chunk activations on rank r: warm-up 2(p − r − 1) + (v − 1)p, plus one, at most m·v.
  sweep(pipeline::find_schedule("interleaved-1f1b"),
        [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
          if (s.microbatches % s.pp != 0 || s.vp < 2) return;
          const pipeline::Timeline t = pipeline::time_order(order, kFandB);
          EXPECT_EQ(t.makespan, (s.microbatches * s.vp + s.pp - 1) * 3.0);
          for (std::int32_t r = 0; r < s.pp; ++r) {
            const std::int32_t warmup = 2 * (s.pp - r - 1) + (s.vp - 1) * s.pp;
            EXPECT_EQ(t.peak_activations[static_cast<std::size_t>(r)],
                      std::min(warmup + 1, s.microbatches * s.vp));
          }
        });
}

TEST(ScheduleFormulas, ZeroBubbleH1BubbleIsPMinus1TimesFPlusIMinusW) {
  sweep(pipeline::find_schedule("zb-h1"),
        [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
          if (s.microbatches < s.pp) return;
          const pipeline::Timeline t = pipeline::time_order(order, kFIW);
          // (p − 1)(F + I − W) + m(F + I + W) with F = I = W = 1.
          EXPECT_EQ(t.makespan, (s.pp - 1) * 1.0 + s.microbatches * 3.0);
          EXPECT_EQ(t.peak_activations.front(), std::min(s.pp, s.microbatches));
        });
}

TEST(ScheduleFormulas, ZeroBubbleVHasNoBubbleInTheStageSpan) {
  sweep(pipeline::find_schedule("zb-v"),
        [&](const pipeline::ScheduleSpec& s, const pipeline::Order& order) {
          if (s.microbatches < 2 * s.pp) return;
          const pipeline::Timeline t = pipeline::time_order(order, kFIW);
          // Two chunks per rank, each F = I = W = 1: a rank's busy time is 2m(F + I + W); with
          // ZB-V's V placement the longest per-rank span equals it (docs/SCHEDULES.md §3.3).
          EXPECT_EQ(*std::max_element(t.span.begin(), t.span.end()), 2.0 * s.microbatches * 3.0);
        });
}

}  // namespace
}  // namespace metron::lowering
