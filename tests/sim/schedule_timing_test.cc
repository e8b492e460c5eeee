// The simulator on lowered pipeline schedules (async p2p, transfers taking no time) against the
// formulas of docs/SCHEDULES.md §5, and against schedules' own unit-time timing of the orders
// (order_checks.h, time_order) on every schedule.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/order_checks.h"
#include "metron/pipeline/registry.h"
#include "metron/sim/simulator.h"
#include "support/schedule_sweep.h"

namespace metron::sim {
namespace {

using pipeline::Order;
using pipeline::ScheduleSpec;

/// Compute durations per phase; communication and host waits take no time.
struct PhaseTimes {
  Time forward = 0;
  Time backward = 0;
  Time backward_input = 0;
  Time backward_weight = 0;

  [[nodiscard]] Time of(ir::Phase phase) const {
    switch (phase) {
      case ir::Phase::kForward:
        return forward;
      case ir::Phase::kBackward:
        return backward;
      case ir::Phase::kBackwardInput:
        return backward_input;
      case ir::Phase::kBackwardWeight:
        return backward_weight;
      default:
        return 0;
    }
  }
};

std::vector<Time> durations(const ir::Graph& g, const PhaseTimes& t) {
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()), 0);
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (const auto* c = std::get_if<ir::Compute>(&g.tasks()[i].op)) {
      // An OVERLAP_F_B unit runs both halves with no overlap gain, as time_order assumes.
      d[i] = t.of(c->phase) + (c->overlapped ? t.of(c->overlapped->phase) : 0);
    }
  }
  return d;
}

ir::Graph lowered(const Order& order, bool split = false) {
  return lowering::lower(
      order, {.p2p = lowering::P2PMode::kAsync, .split_backward = split, .optimizer_step = false});
}

SimResult run(const ScheduleSpec& spec, const PhaseTimes& t, bool split = false) {
  const ir::Graph g = lowered(pipeline::generate_order(spec), split);
  return simulate(g, durations(g, t));
}

constexpr PhaseTimes kFB{.forward = 1000, .backward = 2000};

// GPipe and 1F1B: m(F + B) of work per rank plus a (p − 1)(F + B) bubble on every rank, so the
// bubble fraction is (p − 1) / (m + p − 1).
TEST(ScheduleTiming, GPipeAnd1F1BMakespanIsMPlusPMinus1TimesFPlusB) {
  const Time f_plus_b = kFB.forward + kFB.backward;
  for (const char* name : {"gpipe", "1f1b"}) {
    for (std::int32_t p : {1, 2, 4}) {
      for (std::int32_t m : {p, p + 1, 3 * p}) {
        SCOPED_TRACE(::testing::Message() << name << " p=" << p << " m=" << m);
        const SimResult r = run({.name = name, .pp = p, .microbatches = m}, kFB);
        EXPECT_EQ(r.makespan, m * f_plus_b + (p - 1) * f_plus_b);
        for (const RankMetrics& rank : r.ranks) {
          EXPECT_EQ(rank.idle, (p - 1) * f_plus_b);
          EXPECT_DOUBLE_EQ(static_cast<double>(rank.idle) / static_cast<double>(r.makespan),
                           static_cast<double>(p - 1) / static_cast<double>(m + p - 1));
        }
      }
    }
  }
}

// 1F1B, p = 4, m = 8, F = 1000, B = 2000. Rank 0 never waits for an input of its forwards; all
// its idle time, (p − 1)(F + B) = 9000, is its backwards waiting for gradients. The last rank
// waits (p − 1)F = 3000 for its first activation and ends (p − 1)B = 6000 before the end.
TEST(ScheduleTiming, OneFOneBBubblesHaveTheirCauses) {
  const SimResult r = run({.name = "1f1b", .pp = 4, .microbatches = 8}, kFB);
  const RankMetrics& first = r.ranks.front();
  EXPECT_EQ(first.bubble.at(BubbleCause::kWaitRecv), 9000);
  EXPECT_EQ(first.bubble.at(BubbleCause::kWarmup), 0);
  EXPECT_EQ(first.bubble.at(BubbleCause::kCooldown), 0);
  const RankMetrics& last = r.ranks.back();
  EXPECT_EQ(last.bubble.at(BubbleCause::kWarmup), 3000);
  EXPECT_EQ(last.bubble.at(BubbleCause::kCooldown), 6000);
  EXPECT_EQ(last.bubble.at(BubbleCause::kWaitRecv), 0);
  // The Zero Bubble paper's rate: rank 0 spans the whole makespan (8 + 3)·3000 = 33000 and
  // computes 8·3000 of it.
  EXPECT_DOUBLE_EQ(
      stage_span_bubble_rate(
          lowered(pipeline::generate_order({.name = "1f1b", .pp = 4, .microbatches = 8})), r),
      9000.0 / 33000.0);
}

// Interleaved 1F1B with v chunks of F/v, B/v each: the bubble shrinks to (p − 1)(F + B)/v, so
// the makespan is m(F + B) + (p − 1)(F + B)/v (N = p divides m).
TEST(ScheduleTiming, InterleavedBubbleShrinksByV) {
  for (std::int32_t p : {2, 4}) {
    for (std::int32_t v : {2, 3}) {
      for (std::int32_t m : {p, 2 * p}) {
        SCOPED_TRACE(::testing::Message() << "p=" << p << " v=" << v << " m=" << m);
        // Full-stage F = 600, B = 1200, divisible by v = 2 and 3.
        const Time f = 600;
        const Time b = 1200;
        const SimResult r = run({.name = "interleaved-1f1b", .pp = p, .vp = v, .microbatches = m},
                                {.forward = f / v, .backward = b / v});
        EXPECT_EQ(r.makespan, m * (f + b) + (p - 1) * (f + b) / v);
        for (const RankMetrics& rank : r.ranks) EXPECT_EQ(rank.idle, (p - 1) * (f + b) / v);
      }
    }
  }
}

// ZB-H1 with F = 3, I = 2, W = 1 (µs): the bubble is (p − 1)(F + I − W) = 4(p − 1) µs; p = 4,
// m = 8: 8·6 + 3·4 = 60 µs.
TEST(ScheduleTiming, ZeroBubbleH1BubbleIsPMinus1TimesFPlusIMinusW) {
  const PhaseTimes t{.forward = 3000, .backward_input = 2000, .backward_weight = 1000};
  const SimResult r = run({.name = "zb-h1", .pp = 4, .microbatches = 8}, t);
  EXPECT_EQ(r.makespan, 60'000);
  for (const RankMetrics& rank : r.ranks) EXPECT_EQ(rank.idle, 12'000);  // 3 · (3 + 2 − 1)
  for (std::int32_t p : {2, 3, 5}) {
    for (std::int32_t m : {p, 2 * p + 1}) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
      EXPECT_EQ(run({.name = "zb-h1", .pp = p, .microbatches = m}, t).makespan,
                m * 6000 + (p - 1) * 4000);
    }
  }
}

// ZB-V with F = I = W per chunk: a rank's span equals its compute, m(F + I + W) in full-stage
// times (two chunks of 1000 each: 6000·m), so the stage-span bubble rate is 0. A ZB-V rank
// receives from both neighbours in both directions, on one stream per peer (see
// AReceiveFromOneNeighbourDoesNotWaitForTheOther).
TEST(ScheduleTiming, ZeroBubbleVHasNoBubbleInTheStageSpan) {
  const PhaseTimes t{.forward = 1000, .backward_input = 1000, .backward_weight = 1000};
  for (std::int32_t p : {2, 3, 4}) {
    for (std::int32_t m : {2 * p, 3 * p}) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
      const ScheduleSpec spec{.name = "zb-v", .pp = p, .vp = 2, .microbatches = m};
      const ir::Graph g = lowered(pipeline::generate_order(spec));
      const SimResult r = simulate(g, durations(g, t));
      EXPECT_DOUBLE_EQ(stage_span_bubble_rate(g, r), 0.0);
      for (const RankMetrics& rank : r.ranks) EXPECT_EQ(rank.compute_busy, 6000 * m);
    }
  }
}

/// Calls f(order) for every schedule, p 1..4, v 1..3, m 1..3p+2 where accepted.
int for_every_order(const std::function<void(const Order&)>& f) {
  int visited = 0;
  for (const auto& info : pipeline::all_schedules()) {
    visited += pipeline::testing::sweep(
        info, [&](const ScheduleSpec&, const Order& order) { f(order); }, 4, 3);
  }
  return visited;
}

constexpr PhaseTimes kDistinct{
    .forward = 2, .backward = 4, .backward_input = 3, .backward_weight = 1};
constexpr pipeline::ActionTimes kDistinctActions{
    .forward = 2, .backward_input = 3, .backward_weight = 1, .backward = 4};

// time_order runs each rank's row one action at a time, each as soon as its inputs exist; with
// transfers that take no time and never queue behind each other, that is exactly what the graph
// does, so every compute task must start and end when its action does (F = 2, I = 3, W = 1,
// B = 4), on all 12 schedules.
TEST(ScheduleTiming, AgreesWithTheOrderTimingOfEverySchedule) {
  const int visited = for_every_order([](const Order& order) {
    const pipeline::Timeline expected = pipeline::time_order(order, kDistinctActions);
    const ir::Graph g = lowered(order);
    const SimResult r = simulate(g, durations(g, kDistinct));
    EXPECT_EQ(static_cast<double>(r.makespan), expected.makespan);
    for (std::int32_t rank = 0; rank < g.num_ranks(); ++rank) {
      std::vector<double> starts, ends;
      for (ir::TaskId id : g.issue_order(ir::RankId{rank})) {
        if (g.task(id).kind() != ir::TaskKind::kCompute) continue;
        starts.push_back(static_cast<double>(r.tasks[id.index()].start));
        ends.push_back(static_cast<double>(r.tasks[id.index()].end));
      }
      EXPECT_EQ(starts, expected.start[static_cast<std::size_t>(rank)]) << "rank " << rank;
      EXPECT_EQ(ends, expected.end[static_cast<std::size_t>(rank)]) << "rank " << rank;
    }
  });
  EXPECT_GT(visited, 400);
}

// Interleaved 1F1B, p = 3, v = 2, m = 3 (F = 2, B = 4): rank 1 posts the receive of stage 4's
// gradient for microbatch 0 (from rank 2) before the receive of stage 4's activation for
// microbatch 2 (from rank 0). The activation is sent at 12; the gradient arrives only when rank
// 2's B(5, 0) ends at 16. With one receive FIFO per rank, F(4, 2) waited until 16 (the bug the
// order-timing cross-check found); with one FIFO per peer, as NCCL's per-pair communicators
// give, it runs [12, 14] as time_order says.
TEST(ScheduleTiming, AReceiveFromOneNeighbourDoesNotWaitForTheOther) {
  const Order order =
      pipeline::generate_order({.name = "interleaved-1f1b", .pp = 3, .vp = 2, .microbatches = 3});
  const ir::Graph g = lowered(order);
  const SimResult r = simulate(g, durations(g, kDistinct));
  bool found = false;
  for (std::int32_t i = 0; i < g.num_tasks(); ++i) {
    const ir::Task& t = g.task(ir::TaskId{i});
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase != ir::Phase::kForward) continue;
    if (t.stage == ir::StageId{4} && t.microbatch == ir::MicrobatchId{2}) {
      EXPECT_EQ(r.tasks[static_cast<std::size_t>(i)], (TaskTiming{12, 14}));
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(pipeline::time_order(order, kDistinctActions).start[1][5], 12.0);
}

}  // namespace
}  // namespace metron::sim
