#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/order_checks.h"

namespace metron::pipeline {
namespace {

using ir::Action;
using ir::ActionType;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ScheduleSpec v_spec(std::int32_t pp, std::int32_t microbatches) {
  return {.name = "dualpipe-v", .pp = pp, .vp = 2, .microbatches = microbatches};
}
ScheduleSpec spec(std::int32_t pp, std::int32_t microbatches) {
  return {.name = "dualpipe", .pp = pp, .vp = 2, .microbatches = microbatches};
}

// Goldens, derived by hand from the eight steps of docs/SCHEDULES.md §2.4 (DualPipeV) and §4.2
// (DualPipe). Notation: s0/s1 the stages of phase 0/1; (xFa;yBb) an OVERLAP_F_B pair; W pops
// the oldest pending I.
//
// dualpipe-v p=2 m=4. Rank 0 (r=0, s0=0, s1=3):
//   1. 2(p-r-1)=2 x F(s0)              0F0 0F1
//   2. r+1=1 x [F(s0) F(s1)]           0F2 3F0
//   3. p-r-1=1 x [I(s1) W F(s1)]       3I0 3W0 3F1
//   4. m-2p+r+1=1 x [(F s0;B s1) (F s1;B s0)]   (0F3;3B1) (3F2;0B0)
//   5. p-r-1=1 x [B(s1) (F s1;B s0)]   3B2 (3F3;0B1)
//   6. r+1=1 x [X(s1) X(s0)], switch at i=(r+1)/2=0, r even so after s1's op: 3B3 0I2
//   7. p-r-1=1 x [W I(s0)]             0W2 0I3
//   8. r+1=1 x W                       0W3
// Rank 1 (r=1 = last rank, s0=1, s1=2):
//   1. 0   2. 2 x [F(s0) F(s1)]        1F0 2F0 1F1 2F1
//   3. 0   4. m-2p+r+1=2: i=0 last rank plain F(s0) B(s1): 1F2 2B0, then (2F2;1B0);
//          i=1: (1F3;2B1) (2F3;1B1)
//   5. 0   6. 2 x, switch at i=1, r odd so before s1's op: 2B2 1B2 | 2I3 1I3
//   7. 0   8. 2 x W                    2W3 1W3
constexpr const char* kDualPipeVP2M4 =
    "rank 0: 0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
    "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3\n"
    "rank 1: 1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
    "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3\n";

// dualpipe-v p=2 m=6: as m=4 with step 4 running two more iterations on each rank.
// Rank 0: 1-3 as above; 4. 3 x: (0F3;3B1) (3F2;0B0) | (0F4;3B2) (3F3;0B1) | (0F5;3B3) (3F4;0B2);
//   5. 3B4 (3F5;0B3); 6. 3B5 0I4; 7. 0W4 0I5; 8. 0W5.
// Rank 1: 2. 1F0 2F0 1F1 2F1; 4. 4 x: 1F2 2B0 (2F2;1B0) | (1F3;2B1) (2F3;1B1) |
//   (1F4;2B2) (2F4;1B2) | (1F5;2B3) (2F5;1B3); 6. 2B4 1B4 | 2I5 1I5; 8. 2W5 1W5.
constexpr const char* kDualPipeVP2M6 =
    "rank 0: 0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B "
    "(0F4;3B2)OVERLAP_F_B (3F3;0B1)OVERLAP_F_B (0F5;3B3)OVERLAP_F_B (3F4;0B2)OVERLAP_F_B 3B4 "
    "(3F5;0B3)OVERLAP_F_B 3B5 0I4 0W4 0I5 0W5\n"
    "rank 1: 1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
    "(2F3;1B1)OVERLAP_F_B (1F4;2B2)OVERLAP_F_B (2F4;1B2)OVERLAP_F_B (1F5;2B3)OVERLAP_F_B "
    "(2F5;1B3)OVERLAP_F_B 2B4 1B4 2I5 1I5 2W5 1W5\n";

// dualpipe p=2 m=4: half=1, M=2, both ranks have hr=0 and are middle ranks. Direction a runs
// mbs 0-1 on stages 0 (rank 0), 1 (rank 1); direction b runs mbs 2-3 on stages 2 (rank 1),
// 3 (rank 0). Rank 0: ph0 = stage 0, ph1 = stage 3; rank 1 (second half): ph0 = 2, ph1 = 1.
//   1. 2(half-hr-1)=0   2. hr+1=1 x [F(ph0) F(ph1)]       r0: 0F0 3F2    r1: 2F2 1F0
//   3. 0                4. M-P+hr+1=1: i=0 middle, plain F(ph0) B(ph1), then (F ph1;B ph0)
//                          r0: 0F1 3B2 (3F3;0B0)    r1: 2F3 1B0 (1F1;2B2)
//   5. 0                6. 1 x, switch at 0, hr even so after ph1's op
//                          r0: 3B3 0I1              r1: 1B1 2I3
//   7. 0                8. 1 x W                  r0: 0W1   r1: 2W3
constexpr const char* kDualPipeP2M4 =
    "rank 0: 0F0 3F2 0F1 3B2 (3F3;0B0)OVERLAP_F_B 3B3 0I1 0W1\n"
    "rank 1: 2F2 1F0 2F3 1B0 (1F1;2B2)OVERLAP_F_B 1B1 2I3 2W3\n";

// dualpipe p=4 m=8: half=2, M=4; middle ranks 1 and 2. Stages per rank (ph0, ph1):
// r0 (0, 7) hr=0; r1 (1, 6) hr=1; r2 (5, 2) hr=1; r3 (4, 3) hr=0. Direction a: mbs 0-3 on
// stages 0-3; direction b: mbs 4-7 on stages 4-7.
// Rank 0: 1. 2 x F(ph0) 0F0 0F1; 2. 0F2 7F4; 3. 1 x 7I4 7W4 7F5; 4. M-P+hr+1=1:
//   (0F3;7B5) (7F6;0B0); 5. 1 x 7B6 (7F7;0B1); 6. switch at 0 after ph1: 7B7 0I2;
//   7. 1 x 0W2 0I3; 8. 0W3.
// Rank 1: 1. 0; 2. 2 x 1F0 6F4 1F1 6F5; 3. 0; 4. 2 x, i=0 middle: 1F2 6B4 (6F6;1B0) |
//   (1F3;6B5) (6F7;1B1); 5. 0; 6. 2 x, switch at 1, hr odd so before ph1: 6B6 1B2 | 6I7 1I3;
//   7. 0; 8. 6W7 1W3.
// Rank 2: as rank 1 with ph0 = 5 (mbs 4-7), ph1 = 2 (mbs 0-3).
// Rank 3: as rank 0 with ph0 = 4 (mbs 4-7), ph1 = 3 (mbs 0-3).
constexpr const char* kDualPipeP4M8 =
    "rank 0: 0F0 0F1 0F2 7F4 7I4 7W4 7F5 (0F3;7B5)OVERLAP_F_B (7F6;0B0)OVERLAP_F_B 7B6 "
    "(7F7;0B1)OVERLAP_F_B 7B7 0I2 0W2 0I3 0W3\n"
    "rank 1: 1F0 6F4 1F1 6F5 1F2 6B4 (6F6;1B0)OVERLAP_F_B (1F3;6B5)OVERLAP_F_B "
    "(6F7;1B1)OVERLAP_F_B 6B6 1B2 6I7 1I3 6W7 1W3\n"
    "rank 2: 5F4 2F0 5F5 2F1 5F6 2B0 (2F2;5B4)OVERLAP_F_B (5F7;2B1)OVERLAP_F_B "
    "(2F3;5B5)OVERLAP_F_B 2B2 5B6 2I3 5I7 2W3 5W7\n"
    "rank 3: 4F4 4F5 4F6 3F0 3I0 3W0 3F1 (4F7;3B1)OVERLAP_F_B (3F2;4B4)OVERLAP_F_B 3B2 "
    "(3F3;4B5)OVERLAP_F_B 3B3 4I6 4W6 4I7 4W7\n";

TEST(DualPipeV, MatchesTheHandDerivedStepsForTwoRanks) {
  EXPECT_EQ(ir::format_rows(dualpipe_v(v_spec(2, 4))), kDualPipeVP2M4);
  EXPECT_EQ(ir::format_rows(dualpipe_v(v_spec(2, 6))), kDualPipeVP2M6);
}

TEST(DualPipe, MatchesTheHandDerivedSteps) {
  EXPECT_EQ(ir::format_rows(dualpipe(spec(2, 4))), kDualPipeP2M4);
  EXPECT_EQ(ir::format_rows(dualpipe(spec(4, 8))), kDualPipeP4M8);
}

// --- Structural properties over a sweep ----------------------------------------------------

using Key = std::pair<std::int32_t, std::int32_t>;  // (stage, microbatch)

/// One rank's compute actions with overlap pairs split, in issue order.
std::vector<Action> flatten(const std::vector<std::optional<Action>>& row) {
  std::vector<Action> out;
  for (const auto& a : row) {
    if (!a) continue;
    if (a->type == ActionType::kOverlapForwardBackward) {
      out.insert(out.end(), a->sub.begin(), a->sub.end());
    } else {
      out.push_back(*a);
    }
  }
  return out;
}

std::int32_t num_overlaps(const std::vector<std::optional<Action>>& row) {
  return static_cast<std::int32_t>(std::count_if(row.begin(), row.end(), [](const auto& a) {
    return a && a->type == ActionType::kOverlapForwardBackward;
  }));
}

// Each overlap is (F; full B) of the rank's two different stages.
void expect_well_formed_overlaps(const std::vector<std::optional<Action>>& row) {
  for (const auto& a : row) {
    if (!a || a->type != ActionType::kOverlapForwardBackward) continue;
    ASSERT_EQ(a->sub.size(), 2U);
    EXPECT_EQ(a->sub[0].type, ActionType::kForward);
    EXPECT_EQ(a->sub[1].type, ActionType::kBackward);
    EXPECT_NE(a->sub[0].stage, a->sub[1].stage);
  }
}

// On one rank: F before I/B; I before W; W in the order of their I (a FIFO queue).
void expect_rank_ordering(const std::vector<Action>& actions) {
  std::map<Key, std::size_t> forward_at;
  std::deque<Key> pending;
  for (std::size_t k = 0; k < actions.size(); ++k) {
    const Action& a = actions[k];
    const Key key{a.stage, a.microbatch};
    if (a.type == ActionType::kForward) forward_at[key] = k;
    if (a.type == ActionType::kBackward || a.type == ActionType::kBackwardInput) {
      EXPECT_TRUE(forward_at.contains(key)) << "backward before forward: " << ir::to_string(a);
    }
    if (a.type == ActionType::kBackwardInput) pending.push_back(key);
    if (a.type == ActionType::kBackwardWeight) {
      ASSERT_FALSE(pending.empty()) << "W before any I: " << ir::to_string(a);
      EXPECT_EQ(pending.front(), key) << "W out of FIFO order: " << ir::to_string(a);
      pending.pop_front();
    }
  }
  EXPECT_TRUE(pending.empty());
}

// Every (stage, mb) the placement runs: one F, and one B or one I and one W, on the stage's
// rank (stage s on rank s for s < p, else 2p-1-s).
void expect_complete(const Order& order, Placement placement, std::int32_t p, std::int32_t m) {
  std::map<std::tuple<std::int32_t, std::int32_t, ActionType>, std::int32_t> count;
  for (std::int32_t r = 0; r < p; ++r) {
    for (const Action& a : flatten(order.rows[static_cast<std::size_t>(r)])) {
      EXPECT_EQ(a.stage < p ? a.stage : 2 * p - 1 - a.stage, r) << ir::to_string(a);
      ++count[{a.stage, a.microbatch, a.type}];
    }
  }
  std::size_t expected_entries = 0;
  for (std::int32_t s = 0; s < 2 * p; ++s) {
    const StageMicrobatches mbs = stage_microbatches(placement, p, s, m);
    for (std::int32_t mb = mbs.first; mb < mbs.first + mbs.count; ++mb) {
      SCOPED_TRACE(testing::Message() << "stage " << s << " mb " << mb);
      const auto n = [&](ActionType t) {
        const auto it = count.find({s, mb, t});
        return it == count.end() ? 0 : it->second;
      };
      EXPECT_EQ(n(ActionType::kForward), 1);
      const bool full = n(ActionType::kBackward) == 1;
      EXPECT_EQ(n(ActionType::kBackwardInput), full ? 0 : 1);
      EXPECT_EQ(n(ActionType::kBackwardWeight), full ? 0 : 1);
      expected_entries += full ? 2 : 3;
    }
  }
  EXPECT_EQ(count.size(), expected_entries) << "actions outside the placement's (stage, mb)";
}

// Step 4 runs 2(M - 2*half + hr + 1) pairs, one of them plain on the turning rank
// (hr == half-1); step 5 adds half-hr-1.
std::int32_t expected_overlaps(std::int32_t half, std::int32_t hr, std::int32_t per_phase) {
  const std::int32_t step4 = 2 * (per_phase - 2 * half + hr + 1);
  return step4 - (hr == half - 1 ? 1 : 0) + (half - hr - 1);
}

void expect_structure(const Order& order, Placement placement, std::int32_t p, std::int32_t m) {
  SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m << "\n" << ir::format_rows(order));
  ASSERT_EQ(order.rows.size(), static_cast<std::size_t>(p));
  expect_complete(order, placement, p, m);
  const bool is_v = placement == Placement::kV;
  for (std::int32_t r = 0; r < p; ++r) {
    const auto& row = order.rows[static_cast<std::size_t>(r)];
    expect_well_formed_overlaps(row);
    expect_rank_ordering(flatten(row));
    const std::int32_t half = is_v ? p : p / 2;
    const std::int32_t hr = is_v ? r : std::min(r, p - 1 - r);
    EXPECT_EQ(num_overlaps(row), expected_overlaps(half, hr, is_v ? m : m / 2)) << "rank " << r;
  }
}

TEST(DualPipeV, EveryValidShapeHasCompleteFifoOrderedRows) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; ++m) {
      expect_structure(dualpipe_v(v_spec(p, m)), Placement::kV, p, m);
    }
  }
}

TEST(DualPipe, EveryValidShapeHasCompleteFifoOrderedRows) {
  for (std::int32_t p = 2; p <= 8; p += 2) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; m += 2) {
      expect_structure(dualpipe(spec(p, m)), Placement::kBidirectional, p, m);
    }
  }
}

// --- Validation and timing (order_checks.h) --------------------------------------------------

TEST(DualPipeV, EveryValidShapePassesValidateOrder) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; ++m) {
      EXPECT_NO_THROW(validate_order(dualpipe_v(v_spec(p, m)), v_spec(p, m), Placement::kV))
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(DualPipe, EveryValidShapePassesValidateOrder) {
  for (std::int32_t p = 2; p <= 8; p += 2) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; m += 2) {
      EXPECT_NO_THROW(validate_order(dualpipe(spec(p, m)), spec(p, m), Placement::kBidirectional))
          << "p=" << p << " m=" << m;
    }
  }
}

// docs/SCHEDULES.md §4.1-4.2 with F&B = F+B (no overlap gain) and W = F = B/2 (unit F): the
// README's bubble (PP/2-1)(F&B+B-3W) = 2(PP/2-1) units, PP the number of stages (p for
// DualPipe, 2p for DualPipeV), is the idle time (span - busy) of the worst rank, the first and
// last; and PP+1 chunk activations are alive at the peak on every rank.
void expect_readme_bubble_and_memory(const Order& order, std::int32_t num_stages) {
  const ActionTimes times{.forward = 1, .backward_input = 1, .backward_weight = 1, .backward = 2};
  const Timeline t = time_order(order, times);
  double worst = 0;
  for (std::size_t r = 0; r < t.span.size(); ++r) worst = std::max(worst, t.span[r] - t.busy[r]);
  const std::int32_t half = num_stages / 2;  // PP is even for both schedules
  EXPECT_DOUBLE_EQ(worst, 2.0 * (half - 1));
  EXPECT_DOUBLE_EQ(t.span.front() - t.busy.front(), worst);
  for (std::int32_t peak : t.peak_activations) EXPECT_EQ(peak, num_stages + 1);
}

TEST(DualPipe, BubbleAndPeakActivationsMatchTheReadme) {
  for (std::int32_t p : {2, 4, 8}) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; m += 2) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      expect_readme_bubble_and_memory(dualpipe(spec(p, m)), p);
    }
  }
}

TEST(DualPipeV, BubbleAndPeakActivationsMatchTheReadme) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 2 * p; m <= 2 * p + 8; ++m) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " m=" << m);
      expect_readme_bubble_and_memory(dualpipe_v(v_spec(p, m)), 2 * p);
    }
  }
}

// --- Error paths ----------------------------------------------------------------------------

TEST(DualPipe, RejectsAnOddRankCount) {
  EXPECT_THAT([] { (void)dualpipe(spec(3, 8)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"dualpipe\" (pp=3, vp=2, microbatches=8): pp must be even (half the "
                  "ranks start each direction); got 3; nearest valid: 2 or 4")));
  EXPECT_THAT([] { (void)dualpipe(spec(1, 8)); },
              ThrowsMessage<InvalidConfig>(HasSubstr("got 1; nearest valid: 2")));
}

TEST(DualPipe, RejectsTooFewOrOddMicrobatches) {
  EXPECT_THAT([] { (void)dualpipe(spec(4, 6)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"dualpipe\" (pp=4, vp=2, microbatches=6): microbatches must be >= "
                  "2*pp = 8; got 6; nearest valid: 8")));
  EXPECT_THAT([] { (void)dualpipe(spec(4, 11)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "microbatches must be even (half enter from each end); got 11; nearest valid: "
                  "10 or 12")));
}

TEST(DualPipeV, RejectsTooFewMicrobatchesButAcceptsAnOddCount) {
  EXPECT_THAT([] { (void)dualpipe_v(v_spec(4, 7)); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"dualpipe-v\" (pp=4, vp=2, microbatches=7): microbatches must be >= "
                  "2*pp = 8; got 7; nearest valid: 8")));
  EXPECT_NO_THROW((void)dualpipe_v(v_spec(4, 9)));
}

TEST(DualPipeV, RejectsAChunkCountOtherThanTwoAndForwardOnly) {
  EXPECT_THAT([] { (void)dualpipe_v({.pp = 2, .vp = 1, .microbatches = 4}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"dualpipe-v\" (pp=2, vp=1, microbatches=4): needs exactly 2 chunks "
                  "per rank; got vp=1")));
  EXPECT_THAT([] { (void)dualpipe({.pp = 2, .vp = 2, .microbatches = 4, .forward_only = true}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"dualpipe\" (pp=2, vp=2, microbatches=4): has no forward-only form")));
  EXPECT_THAT([] { (void)dualpipe_v({.pp = 0, .vp = 2, .microbatches = 4}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "(pp=0, vp=2, microbatches=4): pp, vp and microbatches must be at least 1")));
}

}  // namespace
}  // namespace metron::pipeline
