// The row-level lowering passes (split_backward, add_p2p_async, add_p2p_batched,
// add_optimizer_step): input text -> expected text, each expectation derived by hand in the
// comment next to it, plus static deadlock checks (ir::find_deadlock) over 1F1B orders.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/rows_graph.h"
#include "metron/schedules/lowering.h"

namespace metron::schedules {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Order rows(const std::string& text) { return ir::parse_rows(text); }

// Megatron 1F1B (SCHEDULES.md §1.3) as text: rank r holds stage r, warmup w = min(p-r-1, m),
// then m-w pairs F(w+i) B(i), then the remaining B.
std::string one_f_one_b(std::int32_t p, std::int32_t m) {
  std::string text;
  for (std::int32_t r = 0; r < p; ++r) {
    std::int32_t w = std::min(p - r - 1, m);
    std::string s = std::to_string(r);
    text += "rank " + s + ":";
    for (std::int32_t i = 0; i < w; ++i) text += " " + s + "F" + std::to_string(i);
    for (std::int32_t i = 0; i < m - w; ++i) {
      text += " " + s + "F" + std::to_string(w + i) + " " + s + "B" + std::to_string(i);
    }
    for (std::int32_t i = m - w; i < m; ++i) text += " " + s + "B" + std::to_string(i);
    text += "\n";
  }
  return text;
}

TEST(SplitBackward, FullBackwardBecomesInputThenWeightInPlace) {
  // Idle slots, W-less I and OVERLAP_F_B units stay as they are (the overlap's B is DualPipe's
  // own choice of a full backward).
  EXPECT_EQ(ir::format_rows(split_backward(rows("rank 0: 0F0 0B0 _ 0F1 (0F2;1B0)OVERLAP_F_B 0B1\n"
                                                "rank 1: 1F0 1I0 1W0\n"))),
            "rank 0: 0F0 0I0 0W0 _ 0F1 (0F2;1B0)OVERLAP_F_B 0I1 0W1\n"
            "rank 1: 1F0 1I0 1W0\n");
}

TEST(AddOptimizerStep, StepAfterEveryNonEmptyRowWithTheLowestStage) {
  EXPECT_EQ(ir::format_rows(add_optimizer_step(rows("rank 0: 0F0 _ 3F0 3SEND_F0\n"
                                                    "rank 1:\n"
                                                    "rank 2: 2F0 1F0\n"))),
            "rank 0: 0F0 _ 3F0 3SEND_F0 0STEP\n"
            "rank 1:\n"
            "rank 2: 2F0 1F0 1STEP\n");
}

// PyTorch's test_schedule.py "simple" case: two ranks, two microbatches, with the idle slots of
// the compute-only input (an idle slot uses up its rank's turn in a sweep, as None does).
//   sweep 1: r0 0F0, 0SEND_F0, r1 += 1RECV_F0 | r1 idle
//   sweep 2: r0 0F1, 0SEND_F1, r1 += 1RECV_F1 | r1 1F0 (RECV_F(1,0) seen)
//   sweep 3: r0 idle                           | r1 1B0 (last stage), 1SEND_B0, r0 += 0RECV_B0
//   sweep 4: r0 0B0 (RECV_B(0,0) seen)         | r1 1F1
//   sweep 5: r0 idle                           | r1 1B1, 1SEND_B1, r0 += 0RECV_B1
//   sweep 6: r0 0B1                            | r1 idle
// Upstream's expected comms rows; _simulate_comms_compute runs them in 11 unit steps (by hand:
// r0 finishes 0B1 at step 10, counting from 0).
TEST(AddP2PAsync, PyTorchSimpleCaseWithIdleSlots) {
  EXPECT_EQ(ir::format_rows(add_p2p_async(rows("rank 0: 0F0 0F1 _ 0B0 _ 0B1\n"
                                               "rank 1: _ 1F0 1B0 1F1 1B1 _\n"))),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1\n");
}

// The same order without idle slots, as generators emit it:
//   sweep 1: r0 0F0, 0SEND_F0, r1 += 1RECV_F0 | r1 1F0
//   sweep 2: r0 0F1, 0SEND_F1, r1 += 1RECV_F1 | r1 1B0, 1SEND_B0, r0 += 0RECV_B0
//   sweep 3: r0 0B0                            | r1 1F1
//   sweep 4: r0 0B1 not ready (no RECV_B(0,1)) | r1 1B1, 1SEND_B1, r0 += 0RECV_B1
//   sweep 5: r0 0B1
TEST(AddP2PAsync, SimpleCaseWithoutIdleSlots) {
  EXPECT_EQ(ir::format_rows(add_p2p_async(rows("rank 0: 0F0 0F1 0B0 0B1\n"
                                               "rank 1: 1F0 1B0 1F1 1B1\n"))),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1\n");
}

// V placement, 2 ranks, 4 stages (rank 0: stages 0 and 3; rank 1: stages 1 and 2), m = 2, split
// backward. Stages 1 -> 2 (and 2 -> 1) meet on rank 1: no SEND/RECV between them.
//   sweep  1: r0 0F0, 0SEND_F0, r1 += 1RECV_F0 | r1 1F0 (2 is local: no send)
//   sweep  2: r0 0F1, 0SEND_F1, r1 += 1RECV_F1 | r1 2F0 (F(1,0) seen), 2SEND_F0, r0 += 3RECV_F0
//   sweep  3: r0 3F0                           | r1 1F1
//   sweep  4: r0 3I0, 3SEND_B0, r1 += 2RECV_B0 | r1 2F1, 2SEND_F1, r0 += 3RECV_F1
//   sweep  5: r0 3F1                           | r1 2I0 (1 is local: no send)
//   sweep  6: r0 3I1, 3SEND_B1, r1 += 2RECV_B1 | r1 1I0 (I(2,0) seen), 1SEND_B0, r0 += 0RECV_B0
//   sweep  7: r0 0I0                           | r1 2I1
//   sweep  8: r0 3W0                           | r1 1I1, 1SEND_B1, r0 += 0RECV_B1
//   sweep  9: r0 0I1                           | r1 2W0
//   sweep 10-12: the remaining W, one per rank per sweep
TEST(AddP2PAsync, VPlacementHasNoP2PBetweenLocalStages) {
  Order out =
      add_p2p_async(rows("rank 0: 0F0 0F1 3F0 3I0 3F1 3I1 0I0 3W0 0I1 3W1 0W0 0W1\n"
                         "rank 1: 1F0 2F0 1F1 2F1 2I0 1I0 2I1 1I1 2W0 2W1 1W0 1W1\n"));
  EXPECT_EQ(ir::format_rows(out),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3F0 3I0 3SEND_B0 3RECV_F1 3F1 3I1 3SEND_B1 "
            "0RECV_B0 0I0 3W0 0RECV_B1 0I1 3W1 0W0 0W1\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 2F0 2SEND_F0 1F1 2RECV_B0 2F1 2SEND_F1 2I0 2RECV_B1 1I0 "
            "1SEND_B0 2I1 1I1 1SEND_B1 2W0 2W1 1W0 1W1\n");
  EXPECT_FALSE(ir::find_deadlock(ir::rows_to_graph(out)).deadlocked);
}

// DualPipe's two directions (p = 2, m = 2): stages 0 -> 1 carry microbatch 0, stages 2 -> 3
// microbatch 1 (rank 0: stages 0, 3; rank 1: stages 1, 2). Stage 2 is the first stage of its
// direction and stage 1 the last: 2F1 needs no input and 1B0 none from stage 2.
//   sweep 1: r0 0F0, 0SEND_F0, r1 += 1RECV_F0 | r1 2F1, 2SEND_F1, r0 += 3RECV_F1
//   sweep 2: r0 3F1 (RECV_F(3,1) seen)         | r1 1F0 (stage 2 does not run mb 0: no send)
//   sweep 3: r0 3B1, 3SEND_B1, r1 += 2RECV_B1 | r1 1B0, 1SEND_B0, r0 += 0RECV_B0
//            (rank 0 goes first, so 2RECV_B1 lands before 1B0 in rank 1's row)
//   sweep 4: r0 0B0                            | r1 2B1
TEST(AddP2PAsync, DualPipeDirectionsExchangeOnlyWithStagesRunningTheMicrobatch) {
  Order out = add_p2p_async(rows("rank 0: 0F0 3F1 3B1 0B0\nrank 1: 2F1 1F0 1B0 2B1\n"));
  EXPECT_EQ(ir::format_rows(out),
            "rank 0: 0F0 0SEND_F0 3RECV_F1 3F1 3B1 3SEND_B1 0RECV_B0 0B0\n"
            "rank 1: 1RECV_F0 2F1 2SEND_F1 1F0 2RECV_B1 1B0 1SEND_B0 2B1\n");
  EXPECT_FALSE(ir::find_deadlock(ir::rows_to_graph(out)).deadlocked);
}

TEST(AddP2PAsync, AnOrderThatCannotRunIsRejectedNamingEveryHead) {
  // 0B0 waits for 1B0's gradient, 1B0 for 1F0, 1F0 for 0F0, which comes after 0B0.
  EXPECT_THAT([] { add_p2p_async(rows("rank 0: 0B0 0F0\nrank 1: 1F0 1B0\n")); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("add_p2p_async: no rank can make progress; the order cannot run"),
                        HasSubstr("rank 0 waits at action 0 \"0B0\""),
                        HasSubstr("rank 1 waits at action 0 \"1F0\""))));
}

TEST(AddP2PAsync, AStageOnTwoRanksIsRejected) {
  EXPECT_THAT([] { add_p2p_async(rows("rank 0: 0F0 0B0\nrank 1: 0F1 0B1\n")); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "add_p2p_async: stage 0 is computed on ranks 0 and 1; expected each stage on "
                  "exactly one rank")));
}

TEST(AddP2PAsync, OneFOneBOrdersNeverDeadlock) {
  for (std::int32_t p = 2; p <= 6; ++p) {
    for (std::int32_t m = 1; m <= 2 * p + 1; ++m) {
      for (std::int32_t queues : {8, 1}) {
        for (bool split : {false, true}) {
          Order order = rows(one_f_one_b(p, m));
          if (split) order = split_backward(order);
          ir::Graph g = ir::rows_to_graph(add_p2p_async(order), {.hardware_queues = queues});
          ir::DeadlockReport report = ir::find_deadlock(g);
          EXPECT_FALSE(report.deadlocked)
              << "p=" << p << " m=" << m << " queues=" << queues << " split=" << split;
          EXPECT_EQ(report.completed, g.num_tasks());
        }
      }
    }
  }
}

// Megatron 1F1B, p = 2, m = 2 (§1.3). Rank 0 (stage 0): warmup 1, steady 1.
//   recv_forward: none (first stage); F0; send_forward            -> 0SEND_F0, wait
//   recv_forward: none; F1; send_forward_recv_backward            -> 0SEND_F1 0RECV_B0, waits
//   B0; last steady step: send_backward: none (first stage)
//   cooldown: recv_backward                                       -> 0RECV_B1, wait; B1
// Rank 1 (stage 1, last): warmup 0, steady 2.
//   recv_forward                                                  -> 1RECV_F0, wait
//   F0; send_forward_recv_backward: none (last stage); B0
//   send_backward_recv_forward (receive first, Megatron's order)  -> 1RECV_F1 1SEND_B0, waits
//   F1; B1; last steady step: send_backward                       -> 1SEND_B1, wait
// Both ranks' PP=2 exchange (0SEND_F1 0RECV_B0 against 1RECV_F1 1SEND_B0) is issued before
// either host blocks, so the pair meets head to head.
TEST(AddP2PBatched, MegatronOneFOneBPp2) {
  Order out = add_p2p_batched(rows(one_f_one_b(2, 2)));
  EXPECT_EQ(ir::format_rows(out),
            "rank 0: 0F0 0SEND_F0 WAIT(0SEND_F0) 0F1 0SEND_F1 0RECV_B0 WAIT(0RECV_B0) "
            "WAIT(0SEND_F1) 0B0 0RECV_B1 WAIT(0RECV_B1) 0B1\n"
            "rank 1: 1RECV_F0 WAIT(1RECV_F0) 1F0 1B0 1RECV_F1 1SEND_B0 WAIT(1RECV_F1) "
            "WAIT(1SEND_B0) 1F1 1B1 1SEND_B1 WAIT(1SEND_B1)\n");
  EXPECT_FALSE(ir::find_deadlock(ir::rows_to_graph(out)).deadlocked);
}

// Megatron 1F1B, p = 3, m = 1: every stage's warmup min(p-s-1, m) covers its one forward except
// the last, so no steady phase: send_forward and recv_backward are separate blocking calls.
//   stage 0: F0; send_forward; recv_backward; B0
//   stage 1: recv_forward; F0; send_forward; recv_backward; B0; send_backward
//   stage 2: recv_forward; F0; B0; send_backward
TEST(AddP2PBatched, NoSteadyPhaseKeepsSendAndReceiveSeparate) {
  EXPECT_EQ(ir::format_rows(add_p2p_batched(rows(one_f_one_b(3, 1)))),
            "rank 0: 0F0 0SEND_F0 WAIT(0SEND_F0) 0RECV_B0 WAIT(0RECV_B0) 0B0\n"
            "rank 1: 1RECV_F0 WAIT(1RECV_F0) 1F0 1SEND_F0 WAIT(1SEND_F0) 1RECV_B0 WAIT(1RECV_B0) "
            "1B0 1SEND_B0 WAIT(1SEND_B0)\n"
            "rank 2: 2RECV_F0 WAIT(2RECV_F0) 2F0 2B0 2SEND_B0 WAIT(2SEND_B0)\n");
}

// Split backward, p = 2, m = 2 (1F1B with each B split into I W). I sends the gradient; W
// exchanges nothing and is skipped when pairing, so rank 1 posts send_backward_recv_forward right
// after its I (receive first) and runs W0 while the exchange completes; rank 0's
// send_forward_recv_backward pairs F1 with I0 as usual, and its I1 needs a receive of its own.
// (Pairing across W matters: a lone 1SEND_B0 followed later by a lone 1RECV_F1 would deadlock
// against rank 0's 0SEND_F1 0RECV_B0 with one hardware queue.)
TEST(AddP2PBatched, WeightGradientIsSkippedWhenPairing) {
  EXPECT_EQ(ir::format_rows(add_p2p_batched(rows("rank 0: 0F0 0F1 0I0 0W0 0I1 0W1\n"
                                                 "rank 1: 1F0 1I0 1W0 1F1 1I1 1W1\n"))),
            "rank 0: 0F0 0SEND_F0 WAIT(0SEND_F0) 0F1 0SEND_F1 0RECV_B0 WAIT(0RECV_B0) "
            "WAIT(0SEND_F1) 0I0 0W0 0RECV_B1 WAIT(0RECV_B1) 0I1 0W1\n"
            "rank 1: 1RECV_F0 WAIT(1RECV_F0) 1F0 1I0 1RECV_F1 1SEND_B0 WAIT(1RECV_F1) "
            "WAIT(1SEND_B0) 1W0 1F1 1I1 1SEND_B1 WAIT(1SEND_B1) 1W1\n");
}

TEST(AddP2PBatched, OneFOneBOrdersNeverDeadlockIncludingPp2AndOneQueue) {
  for (std::int32_t p = 2; p <= 6; ++p) {
    for (std::int32_t m = 1; m <= 2 * p + 1; ++m) {
      for (std::int32_t queues : {8, 1}) {
        for (bool split : {false, true}) {
          Order order = rows(one_f_one_b(p, m));
          if (split) order = split_backward(order);
          ir::Graph g = ir::rows_to_graph(add_p2p_batched(order), {.hardware_queues = queues});
          ir::DeadlockReport report = ir::find_deadlock(g);
          EXPECT_FALSE(report.deadlocked)
              << "p=" << p << " m=" << m << " queues=" << queues << " split=" << split;
          EXPECT_EQ(report.completed, g.num_tasks());
        }
      }
    }
  }
}

TEST(AddP2PBatched, SeveralStagesPerRankAreRejectedNamingAsync) {
  EXPECT_THAT([] { add_p2p_batched(rows("rank 0: 0F0 2F0 2B0 0B0\nrank 1: 1F0 3F0 3B0 1B0\n")); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "add_p2p_batched: rank 0 computes stages 0 and 2; batched p2p supports one "
                  "stage per rank (Megatron 1F1B) so far; use async p2p (P2PMode::kAsync, "
                  "--p2p async) for interleaved, V and DualPipe orders")));
  EXPECT_THAT([] { add_p2p_batched(rows("rank 0: 0F0 (0F1;0B0)OVERLAP_F_B 0B1\n")); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("add_p2p_batched: rank 0 computes an OVERLAP_F_B unit "
                            "\"(0F1;0B0)OVERLAP_F_B\"; batched p2p supports one stage per rank")));
}

}  // namespace
}  // namespace metron::schedules
