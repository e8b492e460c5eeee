// Golden per-rank orders for no-pipelining, GPipe and Looped BFS, derived by hand from their
// definitions (docs/SCHEDULES.md §1.2, §2.2, §2.4; the derivation sits next to each expectation),
// their error paths, and sweeps through validate_order and time_order.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/order_checks.h"

namespace metron::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(NoPipelining, EachBackwardFollowsItsForward) {
  // forward_backward_no_pipelining: for mb 0..m-1, F(mb) then B(mb), all on stage 0.
  EXPECT_EQ(ir::format_rows(no_pipelining({.pp = 1, .microbatches = 3})),
            "rank 0: 0F0 0B0 0F1 0B1 0F2 0B2\n");
}

TEST(NoPipelining, ForwardOnlyRunsTheForwardsInOrder) {
  EXPECT_EQ(ir::format_rows(no_pipelining({.pp = 1, .microbatches = 3, .forward_only = true})),
            "rank 0: 0F0 0F1 0F2\n");
}

TEST(NoPipelining, RejectsSeveralRanksOrChunks) {
  EXPECT_THAT([] { (void)no_pipelining({.pp = 2, .microbatches = 4}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"none\" (pp=2, vp=1, microbatches=4): needs pp=1 (every microbatch "
                  "runs on one rank); got pp=2; use 1f1b or gpipe to pipeline over several ranks"));
  EXPECT_THAT([] { (void)no_pipelining({.pp = 1, .vp = 2, .microbatches = 4}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"none\" (pp=1, vp=2, microbatches=4): needs exactly 1 chunk per "
                  "rank; got vp=2; use looped-bfs for several chunks"));
}

TEST(GPipe, AllForwardsThenAllBackwardsInForwardOrder) {
  // Rank r holds stage r. Every rank: F0 F1, then B0 B1 (ScheduleGPipe's backward loop runs
  // microbatches 0..m-1, not reversed).
  EXPECT_EQ(ir::format_rows(gpipe({.pp = 3, .microbatches = 2})),
            "rank 0: 0F0 0F1 0B0 0B1\n"
            "rank 1: 1F0 1F1 1B0 1B1\n"
            "rank 2: 2F0 2F1 2B0 2B1\n");
}

TEST(GPipe, ForwardOnlyDropsTheBackwards) {
  EXPECT_EQ(ir::format_rows(gpipe({.pp = 2, .microbatches = 3, .forward_only = true})),
            "rank 0: 0F0 0F1 0F2\n"
            "rank 1: 1F0 1F1 1F2\n");
}

TEST(GPipe, RejectsSeveralChunks) {
  EXPECT_THAT([] { (void)gpipe({.pp = 4, .vp = 2, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"gpipe\" (pp=4, vp=2, microbatches=8): needs exactly 1 chunk per "
                  "rank; got vp=2; use looped-bfs for several chunks"));
}

TEST(LoopedBfs, EachLocalStageRunsEveryMicrobatchBeforeTheNext) {
  // p=2, v=2, m=3, loop placement: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  // Forwards: local stages ascending, mb 0..2 each. Backwards: local stages descending, mb
  // 2 down to 0 each (ScheduleLoopedBFS iterates reversed(range(m))).
  EXPECT_EQ(ir::format_rows(looped_bfs({.pp = 2, .vp = 2, .microbatches = 3})),
            "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0\n"
            "rank 1: 1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0\n");
}

TEST(LoopedBfs, ForwardOnlyKeepsTheBreadthFirstForwards) {
  EXPECT_EQ(
      ir::format_rows(looped_bfs({.pp = 2, .vp = 2, .microbatches = 3, .forward_only = true})),
      "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2\n"
      "rank 1: 1F0 1F1 1F2 3F0 3F1 3F2\n");
}

TEST(ClassicSchedules, RejectNonPositiveSizes) {
  EXPECT_THAT([] { (void)looped_bfs({.pp = 2, .vp = 0, .microbatches = 3}); },
              ThrowsMessage<InvalidConfig>("schedule \"looped-bfs\" (pp=2, vp=0, microbatches=3): "
                                           "pp, vp and microbatches must be at least 1"));
  EXPECT_THAT(
      [] { (void)gpipe({.pp = 0, .microbatches = 3}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("pp, vp and microbatches must be at least 1")));
  EXPECT_THAT(
      [] { (void)no_pipelining({.pp = 1, .microbatches = 0}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("pp, vp and microbatches must be at least 1")));
}

using Generator = std::function<Order(const ScheduleSpec&)>;

// p in 1..8, v in 1..max_vp, m in 1..3p+2, both as training and forward-only.
void sweep(std::int32_t max_pp, std::int32_t max_vp,
           const std::function<void(const ScheduleSpec&)>& check) {
  for (std::int32_t p = 1; p <= max_pp; ++p) {
    for (std::int32_t v = 1; v <= max_vp; ++v) {
      for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
        for (bool forward_only : {false, true}) {
          check({.pp = p, .vp = v, .microbatches = m, .forward_only = forward_only});
        }
      }
    }
  }
}

TEST(ClassicSchedules, EveryOrderValidates) {
  sweep(1, 1, [](const ScheduleSpec& s) { validate_order(no_pipelining(s), s, Placement::kLoop); });
  sweep(8, 1, [](const ScheduleSpec& s) { validate_order(gpipe(s), s, Placement::kLoop); });
  sweep(8, 4, [](const ScheduleSpec& s) { validate_order(looped_bfs(s), s, Placement::kLoop); });
}

TEST(ClassicSchedules, UnitTimeMakespanAndPeakActivationsMatchTheFormulas) {
  const ActionTimes unit{.forward = 1, .backward = 2, .p2p = 0};
  sweep(8, 4, [&](const ScheduleSpec& s) {
    if (s.forward_only) return;
    const std::int32_t p = s.pp, v = s.vp, m = s.microbatches;
    SCOPED_TRACE(testing::Message() << "p=" << p << " v=" << v << " m=" << m);
    if (v == 1) {
      // GPipe (docs/SCHEDULES.md §5): bubble (p-1)(F+B), so makespan (m+p-1)(F+B); peak m.
      const Timeline t = time_order(gpipe(s), unit);
      EXPECT_DOUBLE_EQ(t.makespan, (m + p - 1) * 3.0);
      for (std::int32_t peak : t.peak_activations) EXPECT_EQ(peak, m);
    }
    // Looped BFS: docs/SCHEDULES.md §5 gives the interleaved bubble, (p-1)(F+B) with per-chunk
    // times, once m >= p (by hand for p=2, v=2, m=2: r0 0F0[0,1] 0F1[1,2] 2F0[2,3] 2F1[3,4];
    // r1 1F0[1,2] 1F1[2,3] 3F0[3,4] 3F1[4,5] 3B1[5,7] 3B0[7,9]; r0 2B1[7,9] 2B0[9,11]; r1
    // 1B1[9,11] 1B0[11,13]; r0 0B1[11,13] 0B0[13,15] -> 15 = 3(m·v + p - 1)). Every chunk keeps
    // every microbatch's activation: peak m·v per rank.
    const Timeline t = time_order(looped_bfs(s), unit);
    if (m >= p) {
      EXPECT_DOUBLE_EQ(t.makespan, (m * v + p - 1) * 3.0);
    }
    for (std::int32_t peak : t.peak_activations) EXPECT_EQ(peak, m * v);
  });
}

TEST(LoopedBfs, UnitTimeMakespanOfASmallCase) {
  // p=2, v=2, m=1, F=1, B=2 per chunk: one microbatch leaves no overlap, so the run is
  // sequential: 0F0 1F0 2F0 3F0 end at 4, then 3B0 2B0 1B0 0B0 at 2 each end at 12.
  EXPECT_DOUBLE_EQ(
      time_order(looped_bfs({.pp = 2, .vp = 2, .microbatches = 1}), {.forward = 1, .backward = 2})
          .makespan,
      12.0);
}

}  // namespace
}  // namespace metron::pipeline
