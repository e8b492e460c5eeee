// ZB-H1, ZB-H2 and ZB-V: golden orders derived by hand from the definitions (docs/SCHEDULES.md
// §2.4, §3; Note [zb-h2 definition] in zero_bubble_schedules.cc), error paths, and sweeps that
// validate every order and time it against the paper's formulas.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/order_checks.h"

namespace metron::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ScheduleSpec spec(std::int32_t pp, std::int32_t m, std::int32_t vp = 1) {
  return {.name = "zb", .pp = pp, .vp = vp, .microbatches = m};
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Every (stage, mb) has exactly one F, one I and one W, and on its rank I comes before W.
void expect_complete(const Order& order, std::int32_t stages, std::int32_t m) {
  std::map<std::tuple<std::int32_t, std::int32_t, ir::ActionType>, int> seen;
  for (const auto& row : order.rows) {
    for (const auto& a : row) {
      ASSERT_TRUE(a.has_value());
      if (a->type == ir::ActionType::kBackwardWeight) {
        const auto input = std::tuple(a->stage, a->microbatch, ir::ActionType::kBackwardInput);
        EXPECT_EQ(seen[input], 1) << "W before I at stage " << a->stage << " mb " << a->microbatch;
      }
      ++seen[{a->stage, a->microbatch, a->type}];
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(3 * stages * m));
  for (const auto& [key, count] : seen) EXPECT_EQ(count, 1);
}

// ZB-H1, p=3 m=4 (PyTorch _get_1f1b_rank_ops, zb=True, n1f1b = r; ops = m + warm-up):
//   r0: warm-up min(2,4)=2: F0 F1; ops 2,3: F I W (op−2 ≥ 0); ops 4,5 (cool-down): I W.
//   r1: warm-up 1: F0; op1: F1 I0 (op−1 = 0 < 1, no W); ops 2,3: F I W; op4: I W; left: W3.
//   r2: warm-up 0; ops 0,1: F I; ops 2,3: F I W (W0, W1); left: W2 W3.
TEST(ZbH1, GoldenOrderForThreeRanksFourMicrobatches) {
  EXPECT_EQ(ir::format_rows(zb_h1(spec(3, 4))),
            "rank 0: 0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3\n"
            "rank 1: 1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3\n"
            "rank 2: 2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3\n");
}

// ZB-H2, p=3 m=6: warm-up 2(p−r)−1 = 5, 3, 1; tail steps j ≥ m−(2p−1) = 1.
//   r0: F0..F4; j=0: I0 W0 F5; j=1..5 (no F left): I_j W_j.
//   r1: F0 F1 F2; j=0: I0 W0 F3; j=1,2 (tail, F left): I1 F4, I2 F5 (W1, W2 deferred);
//       j=3..5: I_j + oldest W (W1 W2 W3); left: W4 W5.
//   r2: F0; j=0: I0 W0 F1; j=1..4: I_j F_{j+1} (W1..W4 deferred); j=5: I5 W1; left: W2..W5.
TEST(ZbH2, GoldenOrderForThreeRanksSixMicrobatches) {
  EXPECT_EQ(ir::format_rows(zb_h2(spec(3, 6))),
            "rank 0: 0F0 0F1 0F2 0F3 0F4 0I0 0W0 0F5 0I1 0W1 0I2 0W2 0I3 0W3 0I4 0W4 0I5 0W5\n"
            "rank 1: 1F0 1F1 1F2 1I0 1W0 1F3 1I1 1F4 1I2 1F5 1I3 1W1 1I4 1W2 1I5 1W3 1W4 1W5\n"
            "rank 2: 2F0 2I0 2W0 2F1 2I1 2F2 2I2 2F3 2I3 2F4 2I4 2F5 2I5 2W1 2W2 2W3 2W4 2W5\n");
}

// ZB-V, p=2 m=4: n' = max(3, 4) = 4; rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
//   r0: 2(p−r)−1 = 3 × F(0); 0 × (F1,F0); 2 × F(3) I(3) W(3);
//       stable: F(0)3 I(0)0 W(0)0 F(3)2 I(3)2 W(3)2 | I(0)1 W(0)1 F(3)3 I(3)3 W(3)3;
//       cool-down: 0 × (I0,I1); 2 × I(0) W(0).
//   r1: 1 × F(1); 1 × F(2) F(1); 1 × F(2) I(2) W(2);
//       stable: F(1)2 I(1)0 W(1)0 F(2)2 I(2)1 W(2)1 | F(1)3 I(1)1 W(1)1 F(2)3 I(2)2 W(2)2;
//       cool-down: I(1)2 I(2)3; I(1)3 W(1)2; left W(2)3, then W(1)3.
TEST(ZbV, GoldenOrderForTwoRanksFourMicrobatches) {
  EXPECT_EQ(ir::format_rows(zb_v(spec(2, 4, 2))),
            "rank 0: 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 "
            "3W3 0I2 0W2 0I3 0W3\n"
            "rank 1: 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 "
            "2I3 1I3 1W2 2W3 1W3\n");
}

// ZB-V, p=3 m=6: n' = max(5, 6) = 6; stages (0,5), (1,4), (2,3).
//   r0: 5 × F(0); 3 × F I W(5); stable: F(0)5 IW(0)0 FIW(5)3 | IW(0)1 FIW(5)4 | IW(0)2 FIW(5)5;
//       cool-down 3 × I W(0).
//   r1: 3 × F(1); F(4)0 F(1)3; 2 × F I W(4); stable: F(1)4 IW(1)0 FIW(4)3 | F(1)5 IW(1)1
//       FIW(4)4 | IW(1)2 FIW(4)5 (F(4) counts 6 = F(1)); cool-down: I(1)3 I(4)5; I(1)4 W(1)3
//       I(1)5 W(1)4; left W(4)5, W(1)5.
//   r2: F(2)0; 2 × F(3) F(2); F I W(3); stable: F(2)3 IW(2)0 FIW(3)3 | F(2)4 IW(2)1 FIW(3)4
//       | F(2)5 IW(2)2 FIW(3)5; cool-down: I(2)3 I(3)4 I(2)4 I(3)5; I(2)5 W(2)3; left W(3)4
//       W(3)5, W(2)4 W(2)5.
TEST(ZbV, GoldenOrderForThreeRanksSixMicrobatches) {
  EXPECT_EQ(ir::format_rows(zb_v(spec(3, 6, 2))),
            "rank 0: 0F0 0F1 0F2 0F3 0F4 5F0 5I0 5W0 5F1 5I1 5W1 5F2 5I2 5W2 0F5 0I0 0W0 5F3 5I3 "
            "5W3 0I1 0W1 5F4 5I4 5W4 0I2 0W2 5F5 5I5 5W5 0I3 0W3 0I4 0W4 0I5 0W5\n"
            "rank 1: 1F0 1F1 1F2 4F0 1F3 4F1 4I0 4W0 4F2 4I1 4W1 1F4 1I0 1W0 4F3 4I2 4W2 1F5 1I1 "
            "1W1 4F4 4I3 4W3 1I2 1W2 4F5 4I4 4W4 1I3 4I5 1I4 1W3 1I5 1W4 4W5 1W5\n"
            "rank 2: 2F0 3F0 2F1 3F1 2F2 3F2 3I0 3W0 2F3 2I0 2W0 3F3 3I1 3W1 2F4 2I1 2W1 3F4 3I2 "
            "3W2 2F5 2I2 2W2 3F5 3I3 3W3 2I3 3I4 2I4 3I5 2I5 2W3 3W4 3W5 2W4 2W5\n");
}

// PyTorch pads to n' = 2p−1 microbatches and drops the padding: p=2 m=1 keeps only mb 0.
TEST(ZbV, FewerMicrobatchesThanTheWarmUpDropsThePadding) {
  EXPECT_EQ(ir::format_rows(zb_v(spec(2, 1, 2))),
            "rank 0: 0F0 3F0 3I0 3W0 0I0 0W0\n"
            "rank 1: 1F0 2F0 2I0 2W0 1I0 1W0\n");
}

TEST(ZeroBubble, ForwardOnlyKeepsTheForwardsInScheduleOrder) {
  ScheduleSpec s = spec(2, 2, 2);
  s.forward_only = true;
  EXPECT_EQ(ir::format_rows(zb_v(s)), "rank 0: 0F0 0F1 3F0 3F1\nrank 1: 1F0 2F0 1F1 2F1\n");
  s = spec(2, 3);
  s.forward_only = true;
  EXPECT_EQ(ir::format_rows(zb_h1(s)), "rank 0: 0F0 0F1 0F2\nrank 1: 1F0 1F1 1F2\n");
  EXPECT_EQ(ir::format_rows(zb_h2(s)), "rank 0: 0F0 0F1 0F2\nrank 1: 1F0 1F1 1F2\n");
}

TEST(ZeroBubble, WrongChunkCountIsRejected) {
  EXPECT_THAT([] { zb_h1(spec(4, 8, 2)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"zb-h1\" (pp=4, vp=2, microbatches=8): needs exactly 1 chunk per "
                  "rank; got vp=2")));
  EXPECT_THAT([] { zb_h2(spec(4, 8, 3)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"zb-h2\" (pp=4, vp=3, microbatches=8): needs exactly 1 chunk per "
                  "rank; got vp=3")));
  EXPECT_THAT([] { zb_v(spec(4, 8, 1)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"zb-v\" (pp=4, vp=1, microbatches=8): needs exactly 2 chunks per "
                  "rank; got vp=1")));
}

TEST(ZeroBubble, NonPositiveSizesAreRejected) {
  EXPECT_THAT([] { zb_h1(spec(0, 8)); }, ThrowsMessage<InvalidConfig>(HasSubstr(
                                             "schedule \"zb-h1\" (pp=0, vp=1, microbatches=8): pp, "
                                             "vp and microbatches must be at least 1")));
  EXPECT_THAT([] { zb_v(spec(2, 0, 2)); },
              ThrowsMessage<InvalidConfig>(HasSubstr("microbatches must be at least 1")));
}

TEST(ZeroBubble, EveryOrderIsCompleteAndValidForUpToEightRanks) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      expect_complete(zb_h1(spec(p, m)), p, m);
      expect_complete(zb_h2(spec(p, m)), p, m);
      expect_complete(zb_v(spec(p, m, 2)), 2 * p, m);
      EXPECT_NO_THROW(validate_order(zb_h1(spec(p, m)), spec(p, m), Placement::kLoop));
      EXPECT_NO_THROW(validate_order(zb_h2(spec(p, m)), spec(p, m), Placement::kLoop));
      EXPECT_NO_THROW(validate_order(zb_v(spec(p, m, 2)), spec(p, m, 2), Placement::kV));
    }
  }
}

// Paper Table 2 with F = I = W = 1: bubble (p−1)(F+I−W) on rank 0, peak p−r activations.
TEST(ZbH1, UnitTimesMatchThePaperBubbleAndMemory) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = p; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      const Timeline t = time_order(zb_h1(spec(p, m)), {});
      EXPECT_DOUBLE_EQ(t.makespan, (p - 1) * (1 + 1 - 1) + m * 3);
      for (std::int32_t r = 0; r < p; ++r) EXPECT_EQ(t.peak_activations[std::size_t(r)], p - r);
    }
  }
}

// Paper Table 2 with F = I = W = 1: per-rank span m(F+I+W) + (p−1)(F+I−2W) = 3m (the
// parallelogram), makespan that plus the (p−1)F start-up offset, peak 2p−2r−1 activations.
TEST(ZbH2, UnitTimesGiveAParallelogramWithoutBubbles) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p - 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      const Timeline t = time_order(zb_h2(spec(p, m)), {});
      EXPECT_DOUBLE_EQ(max_of(t.span), 3 * m + (p - 1) * (1 + 1 - 2));
      EXPECT_DOUBLE_EQ(t.makespan, 3 * m + (p - 1));
      for (std::int32_t r = 0; r < p; ++r) {
        EXPECT_EQ(t.peak_activations[std::size_t(r)], 2 * p - 2 * r - 1);
      }
    }
  }
}

// §3.3: with F = I = W (per chunk) every rank is busy from its first to its last action.
TEST(ZbV, UnitTimesLeaveNoBubbleInsideAnyRank) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p - 1; m <= 3 * p + 2; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      const Timeline t = time_order(zb_v(spec(p, m, 2)), {});
      for (std::size_t r = 0; r < t.span.size(); ++r) {
        EXPECT_DOUBLE_EQ(t.span[r], 2 * 3 * m) << "rank " << r;
        EXPECT_EQ(t.peak_activations[r], 2 * p) << "rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace metron::pipeline
