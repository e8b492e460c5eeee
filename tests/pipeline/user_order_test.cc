// User-supplied orders: PyTorch's compute-only CSV and the text form, with the spec inferred.

#include "metron/pipeline/user_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"

namespace metron::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// PyTorch ZB1P on 2 ranks, 3 microbatches, written as its CSV with idle cells.
constexpr const char* kZb1pCsv =
    "0F0,0F1,,0I0,0W0,0F2,0I1,0W1,0I2,0W2\n"
    ",1F0,1I0,1F1,1W0,1I1,1F2,1W1,1I2,1W2\n";

TEST(UserOrder, InfersTheSpecAndDropsIdleCells) {
  const UserOrder u = user_order(ir::parse_csv(kZb1pCsv));
  EXPECT_EQ(u.spec.pp, 2);
  EXPECT_EQ(u.spec.vp, 1);
  EXPECT_EQ(u.spec.microbatches, 3);
  EXPECT_FALSE(u.spec.forward_only);
  EXPECT_EQ(u.placement, Placement::kLoop);
  EXPECT_EQ(ir::format_rows(u.order),
            "rank 0: 0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2\n"
            "rank 1: 1F0 1I0 1F1 1W0 1I1 1F2 1W1 1I2 1W2\n");
}

TEST(UserOrder, RecognisesVPlacement) {
  // Two ranks, four stages: rank 0 holds 0 and 3, rank 1 holds 1 and 2.
  const UserOrder u =
      user_order(ir::parse_rows("rank 0: 0F0 3F0 3B0 0B0\n"
                                "rank 1: 1F0 2F0 2B0 1B0\n"));
  EXPECT_EQ(u.spec.vp, 2);
  EXPECT_EQ(u.placement, Placement::kV);
}

TEST(UserOrder, ForwardsOnlyMeanInference) {
  EXPECT_TRUE(user_order(ir::parse_rows("rank 0: 0F0 0F1\nrank 1: 1F0 1F1\n")).spec.forward_only);
}

TEST(UserOrder, CommunicationAndBrokenOrdersAreRejected) {
  EXPECT_THAT([] { (void)user_order(ir::parse_rows("rank 0: 0F0 0SEND_F0 0B0\n")); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "user order: rank 0 action 1 \"0SEND_F0\" is not a compute action; expected F, "
                  "I, W, B or OVERLAP_F_B (sends and receives are added by --with-comms)")));
  EXPECT_THAT(
      [] { (void)user_order(ir::parse_rows("rank 0: 0F0 0B0 2F0 2B0\nrank 1: 1F0 1B0\n")); },
      ThrowsMessage<InvalidConfig>(HasSubstr(
          "user order: 3 stages over 2 ranks; expected the same number of stages on every "
          "rank")));
  EXPECT_THAT([] { (void)user_order(ir::parse_rows("rank 0: 0B0 0F0\n")); },
              ThrowsMessage<InvalidConfig>(HasSubstr("0B0 runs before 0F0")));
}

// Issue 14: a microbatch number far beyond the order's actions leaves a gap; it is refused
// before any table is sized by it (the order would otherwise need a billion microbatches).
TEST(UserOrder, RefusesAMicrobatchBeyondTheOrdersActions) {
  EXPECT_THAT(
      [] { (void)user_order(ir::parse_rows("rank 0: 0F0 0F1000000000 0B0 0B1000000000\n")); },
      ThrowsMessage<InvalidConfig>(
          AllOf(HasSubstr("user order: an action of stage 0, microbatch 1000000000"),
                HasSubstr("beyond the order's 4 actions"))));
}

}  // namespace
}  // namespace metron::pipeline
