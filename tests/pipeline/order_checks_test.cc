// validate_order and time_order on orders written by hand, against hand-derived expectations.

#include "metron/pipeline/order_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/placement.h"

namespace metron::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Order rows(const char* text) { return ir::parse_rows(text); }

// Megatron 1F1B, p=2, m=3: rank 0 warms up with p-r-1 = 1 forward; rank 1 with none.
constexpr const char* kOneFOneB =
    "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
    "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n";

ScheduleSpec spec(std::int32_t pp, std::int32_t m, std::int32_t vp = 1) {
  return {.name = "test", .pp = pp, .vp = vp, .microbatches = m};
}

TEST(ValidateOrder, AcceptsAWellFormedOrder) {
  EXPECT_NO_THROW(validate_order(rows(kOneFOneB), spec(2, 3), Placement::kLoop));
}

TEST(ValidateOrder, BackwardBeforeItsForwardIsMarkedInThePicture) {
  const char* text =
      "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
      "rank 1: 1B0 1F0 1F1 1B1 1F2 1B2\n";
  EXPECT_THAT([&] { validate_order(rows(text), spec(2, 3), Placement::kLoop); },
              ThrowsMessage<InvalidConfig>(AllOf(
                  HasSubstr("invalid order for schedule \"test\" (pp=2, vp=1, microbatches=3): "
                            "1B0 runs before 1F0; expected F before I or B, and I before W"),
                  HasSubstr("\n  rank 1: 1B0 1F0 1F1 1B1 1F2 1B2\n          ^^^ <-- here"))));
}

TEST(ValidateOrder, MissingOrDuplicatedActionsAreCounted) {
  EXPECT_THAT(
      [&] {
        validate_order(rows("rank 0: 0F0 0F1 0B0 0F2 0B1\nrank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n"),
                       spec(2, 3), Placement::kLoop);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr(
          "stage 0 microbatch 2 has 1 F, 0 B, 0 I and 0 W; expected one F and either one B or one "
          "I and one W")));
  EXPECT_THAT(
      [&] { validate_order(rows("rank 0: 0F0 0I0 0W0 0B0\n"), spec(1, 1), Placement::kLoop); },
      ThrowsMessage<InvalidConfig>(HasSubstr("stage 0 microbatch 0 has 1 F, 1 B, 1 I and 1 W")));
}

TEST(ValidateOrder, WeightGradientBeforeItsInputGradientIsRejected) {
  EXPECT_THAT([&] { validate_order(rows("rank 0: 0F0 0W0 0I0\n"), spec(1, 1), Placement::kLoop); },
              ThrowsMessage<InvalidConfig>(HasSubstr("0W0 runs before 0I0")));
}

TEST(ValidateOrder, StageOnTwoRanksAndOutOfRangeStagesAreRejected) {
  EXPECT_THAT(
      [&] {
        validate_order(rows("rank 0: 0F0 0B0\nrank 1: 0F1 0B1\n"), spec(2, 2), Placement::kLoop);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("stage 0 runs on ranks 0 and 1; expected one rank "
                                             "per stage")));
  EXPECT_THAT([&] { validate_order(rows("rank 0: 3F0 3B0\n"), spec(1, 1), Placement::kLoop); },
              ThrowsMessage<InvalidConfig>(HasSubstr("stage 3 out of range; expected 0..0")));
}

TEST(ValidateOrder, ForwardOnlyOrdersHaveNoBackwards) {
  EXPECT_NO_THROW(validate_order(rows("rank 0: 0F0 0F1\nrank 1: 1F0 1F1\n"),
                                 {.name = "t", .pp = 2, .microbatches = 2, .forward_only = true},
                                 Placement::kLoop));
}

TEST(ValidateOrder, OrderThatCannotCompleteIsRejected) {
  // Rank 0 waits for 1B0 before running 0F1, but rank 1 needs 1F1 (hence 0F1) before 1B0.
  const char* text =
      "rank 0: 0F0 0B0 0F1 0B1\n"
      "rank 1: 1F0 1F1 1B0 1B1\n";
  EXPECT_THAT([&] { validate_order(rows(text), spec(2, 2), Placement::kLoop); },
              ThrowsMessage<InvalidConfig>(HasSubstr("order cannot complete: rank 0 waits forever "
                                                     "at action 1 (0B0)")));
}

TEST(StageMicrobatches, DualPipeDirectionsSplitTheMicrobatches) {
  EXPECT_EQ(stage_microbatches(Placement::kBidirectional, 4, 3, 8).first, 0);
  EXPECT_EQ(stage_microbatches(Placement::kBidirectional, 4, 3, 8).count, 4);
  EXPECT_EQ(stage_microbatches(Placement::kBidirectional, 4, 4, 8).first, 4);
  EXPECT_EQ(stage_microbatches(Placement::kLoop, 4, 4, 8).count, 8);
}

TEST(StageRanks, LoopAndVPlacementsFollowTheDocumentedExamples) {
  // docs/SCHEDULES.md §2.3.
  EXPECT_THAT(stage_ranks(Placement::kLoop, 4, 8), ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));
  EXPECT_THAT(stage_ranks(Placement::kV, 2, 4), ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(stage_ranks(Placement::kV, 4, 8), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
  EXPECT_THAT(stage_ranks(Placement::kV, 4, 12), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3));
  // DualPipe: direction b's stage p + k on rank p - 1 - k.
  EXPECT_THAT(stage_ranks(Placement::kBidirectional, 2, 4), ElementsAre(0, 1, 1, 0));
  EXPECT_THAT([] { (void)stage_ranks(Placement::kLoop, 4, 6); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "stage placement: 6 stages over 4 ranks; expected a positive multiple of the "
                  "ranks")));
}

TEST(TimeOrder, OneFOneBMatchesTheHandDrawnTimeline) {
  // F=1, B=2, no p2p. Rank 0: F0 [0,1) F1 [1,2); B0 needs 1B0. Rank 1: F0 [1,2) B0 [2,4)
  // F1 [4,5) B1 [5,7) F2 [7,8) B2 [8,10). Rank 0: B0 [4,6) F2 [6,7) B1 [7,9) B2 [10,12).
  const Timeline t = time_order(rows(kOneFOneB), ActionTimes{});
  EXPECT_THAT(t.start[0], ElementsAre(0, 1, 4, 6, 7, 10));
  EXPECT_THAT(t.start[1], ElementsAre(1, 2, 4, 5, 7, 8));
  EXPECT_EQ(t.makespan, 12);
  // (m + p - 1)(F + B) = 4 * 3 = 12, the 1F1B formula of docs/SCHEDULES.md §5.
  EXPECT_EQ(t.makespan, (3 + 2 - 1) * (1 + 2));
  EXPECT_THAT(t.peak_activations, ElementsAre(2, 1));  // p - r
  EXPECT_THAT(t.busy, ElementsAre(9, 9));
  EXPECT_THAT(t.span, ElementsAre(12, 9));
}

TEST(TimeOrder, P2PTimeIsAddedOnlyAcrossRanks) {
  const Timeline t =
      time_order(rows("rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n"), ActionTimes{.p2p = 0.5});
  // 0F0 [0,1); 1F0 at 1.5; 1B0 [2.5,4.5); 0B0 at 5.
  EXPECT_THAT(t.start[1], ElementsAre(1.5, 2.5));
  EXPECT_THAT(t.start[0], ElementsAre(0, 5));
}

TEST(TimeOrder, SplitBackwardAndOverlapUnits) {
  // One rank holding stages 0 and 1 (V placement, p = 1); the forward of microbatch 1 on stage 0
  // overlaps the backward of microbatch 0 on stage 1, as DualPipeV pairs them.
  const char* text = "rank 0: 0F0 1F0 (0F1;1B0)OVERLAP_F_B 1F1 1I1 0B0 0I1 1W1 0W1\n";
  const Timeline t = time_order(rows(text), ActionTimes{.overlap = 2.5});
  // 0F0 [0,1) 1F0 [1,2) overlap [2,4.5) 1F1 [4.5,5.5) 1I1 [5.5,6.5) 0B0 [6.5,8.5) 0I1 [8.5,9.5)
  // 1W1 [9.5,10.5) 0W1 [10.5,11.5).
  EXPECT_THAT(t.start[0], ElementsAre(0, 1, 2, 4.5, 5.5, 6.5, 8.5, 9.5, 10.5));
  EXPECT_EQ(t.makespan, 11.5);
  EXPECT_THAT(t.peak_activations, ElementsAre(3));  // 0F0 1F0 0F1 alive before 1B0 frees one
}

}  // namespace
}  // namespace metron::pipeline
