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
#include "metron/lowering/lowering.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/registry.h"

namespace metron::lowering {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

pipeline::Order rows(const std::string& text) { return ir::parse_rows(text); }

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
  pipeline::Order out =
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
  pipeline::Order out = add_p2p_async(rows("rank 0: 0F0 3F1 3B1 0B0\nrank 1: 2F1 1F0 1B0 2B1\n"));
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

// 1F1B orders for p = 2..6 and m = 1..2p+1, with and without split backward, lowered by `pass`,
// run to completion with 8 hardware queues and with one.
void expect_one_f_one_b_never_deadlocks(pipeline::Order (*pass)(const pipeline::Order&)) {
  for (std::int32_t p = 2; p <= 6; ++p) {
    for (std::int32_t m = 1; m <= 2 * p + 1; ++m) {
      for (std::int32_t queues : {8, 1}) {
        for (bool split : {false, true}) {
          pipeline::Order order = pipeline::one_f_one_b({.pp = p, .microbatches = m});
          if (split) order = split_backward(order);
          ir::Graph g = ir::rows_to_graph(pass(order), {.hardware_queues = queues});
          ir::DeadlockReport report = ir::find_deadlock(g);
          EXPECT_FALSE(report.deadlocked)
              << "p=" << p << " m=" << m << " queues=" << queues << " split=" << split;
          EXPECT_EQ(report.completed, g.num_tasks());
        }
      }
    }
  }
}

TEST(AddP2PAsync, OneFOneBOrdersNeverDeadlock) {
  expect_one_f_one_b_never_deadlocks(&add_p2p_async);
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
  pipeline::Order out = add_p2p_batched(pipeline::one_f_one_b({.pp = 2, .microbatches = 2}));
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
  EXPECT_EQ(ir::format_rows(add_p2p_batched(pipeline::one_f_one_b({.pp = 3, .microbatches = 1}))),
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
  expect_one_f_one_b_never_deadlocks(&add_p2p_batched);
}

// Megatron interleaved 1F1B, p = 2, v = 2, m = 2, N = 2 (§1.4). Table: step k = 0..3 runs
// (mb, chunk) (0,0) (1,0) (0,1) (1,1); backward k runs chunk 1 - chunk(k). Warm-ups:
// 2(p-r-1) + (v-1)N = 4 = T on rank 0 (all warm-up), 2 on rank 1. Stages: rank 0 holds 0 and 2,
// rank 1 holds 1 and 3. Per call (Note [batched interleaved exchanges]: forward tokens, then
// backward ones; receive first except on the leading rank, 0 forwards and 1 backwards):
// Rank 0 (forward leader: receives at step k >= p-1 = 1 what rank 1 sent at step k-1):
//   before 0F0: recv_forward: none (leader, k < 1)
//   0F0 send_forward_recv_forward: 0SEND_F0; nothing arrives (k = 0 < 1)
//   0F1 send_forward_recv_forward: 0SEND_F1; rank 1's step 0 ran chunk 0 -> 2RECV_F0 (queued)
//   2F0 send_forward_recv_forward: 2SEND_F0; rank 1's step 1 ran chunk 0 -> 2RECV_F1
//   2F1 send_forward_recv_forward: 2SEND_F1; nothing (step 4 does not exist)
//       all warm-up: recv_backward of B0 = 2B0 -> 2RECV_B0
//   2B0 send_backward_recv_backward: 2SEND_B0; input of B1 = 2B1 -> 2RECV_B1
//   2B1 send_backward_recv_backward: 2SEND_B1; input of B2 = 0B0 -> 0RECV_B0
//   0B0 send_backward_recv_backward: none (stage 0); input of B3 = 0B1 -> 0RECV_B1
//   0B1 send_backward_recv_backward: nothing left
// Rank 1 (backward leader: receives at step k >= 1 what rank 0 sent at backward step k-1):
//   before 1F0: recv_forward -> 1RECV_F0
//   1F0 send_forward_recv_forward: 1SEND_F0; input of F1 = 1F1 -> 1RECV_F1
//   1F1 last warm-up, send_forward_backward_recv_forward_backward: 1SEND_F1; input of F2 = 3F0
//       -> 3RECV_F0; B0's gradient: none (3B0 is the last stage)
//   3F0 3B0 steady: 3F0 sends nothing (last stage); input of F3 -> 3RECV_F1; 3SEND_B0; backward
//       leader at k = 0 < 1: nothing
//   3F1 3B1 steady (last): no F send, no F receive; 3SEND_B1; rank 0's backward step 0 ran
//       chunk 1 -> its gradient is for chunk 0: 1RECV_B0
//   1B0 cool-down: 1SEND_B0; rank 0's backward step 1 ran chunk 1 -> 1RECV_B1
//   1B1 cool-down: 1SEND_B1; nothing (last step)
// With one hardware queue the tokens meet in order: 0SEND_F0/1RECV_F0, 0SEND_F1/1RECV_F1,
// 1SEND_F0/2RECV_F0, 2SEND_F0/3RECV_F0, 1SEND_F1/2RECV_F1, 2SEND_F1/3RECV_F1, 3SEND_B0/2RECV_B0
// (rank 0's separate recv_backward meets the same call of rank 1), 3SEND_B1/2RECV_B1,
// 2SEND_B0/1RECV_B0, 1SEND_B0/0RECV_B0, 2SEND_B1/1RECV_B1, 1SEND_B1/0RECV_B1. Megatron itself
// forbids this PP=2 case (issue #750); our tags tell 0SEND_F1 and 2SEND_B0 to rank 1 apart.
TEST(AddP2PBatched, MegatronInterleavedPp2Vp2M2) {
  const pipeline::Order order =
      pipeline::generate_order({.name = "interleaved-1f1b", .pp = 2, .vp = 2, .microbatches = 2});
  ASSERT_EQ(ir::format_rows(order),
            "rank 0: 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1\n"
            "rank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1\n");
  pipeline::Order out = add_p2p_batched(order);
  EXPECT_EQ(ir::format_rows(out),
            "rank 0: 0F0 0SEND_F0 WAIT(0SEND_F0) 0F1 0SEND_F1 2RECV_F0 WAIT(2RECV_F0) "
            "WAIT(0SEND_F1) 2F0 2SEND_F0 2RECV_F1 WAIT(2RECV_F1) WAIT(2SEND_F0) 2F1 2SEND_F1 "
            "WAIT(2SEND_F1) 2RECV_B0 WAIT(2RECV_B0) 2B0 2RECV_B1 2SEND_B0 WAIT(2RECV_B1) "
            "WAIT(2SEND_B0) 2B1 0RECV_B0 2SEND_B1 WAIT(0RECV_B0) WAIT(2SEND_B1) 0B0 0RECV_B1 "
            "WAIT(0RECV_B1) 0B1\n"
            "rank 1: 1RECV_F0 WAIT(1RECV_F0) 1F0 1RECV_F1 1SEND_F0 WAIT(1RECV_F1) WAIT(1SEND_F0) "
            "1F1 3RECV_F0 1SEND_F1 WAIT(3RECV_F0) WAIT(1SEND_F1) 3F0 3B0 3RECV_F1 3SEND_B0 "
            "WAIT(3RECV_F1) WAIT(3SEND_B0) 3F1 3B1 3SEND_B1 1RECV_B0 WAIT(1RECV_B0) "
            "WAIT(3SEND_B1) 1B0 1SEND_B0 1RECV_B1 WAIT(1RECV_B1) WAIT(1SEND_B0) 1B1 1SEND_B1 "
            "WAIT(1SEND_B1)\n");
  for (std::int32_t queues : {8, 1}) {
    EXPECT_FALSE(ir::find_deadlock(ir::rows_to_graph(out, {.hardware_queues = queues})).deadlocked)
        << "queues=" << queues;
  }
}

// Every interleaved order the generators accept, with and without split backward, default and
// larger group sizes: lower() validates the graph (8 hardware queues), and the exchanges alone
// also run with one queue (rows_to_graph; LoweringOptions has no queue count).
TEST(AddP2PBatched, InterleavedOrdersNeverDeadlockIncludingPp2AndOneQueue) {
  std::int32_t lowered = 0;
  for (const char* name : {"interleaved-1f1b", "interleaved-1f1b-legacy"}) {
    for (std::int32_t p = 2; p <= 4; ++p) {
      for (std::int32_t v = 2; v <= 3; ++v) {
        for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
          for (std::int32_t n = p; n <= p + 2; ++n) {
            std::optional<std::int32_t> group;
            if (n > p) group = n;
            pipeline::Order order;
            try {
              order = pipeline::generate_order(
                  {.name = name, .pp = p, .vp = v, .microbatches = m, .group_size = group});
            } catch (const InvalidConfig&) {
              continue;  // e.g. m < N, or m mod N in (0, p)
            }
            for (bool split : {false, true}) {
              const std::string where = std::string(name) + " p=" + std::to_string(p) +
                                        " v=" + std::to_string(v) + " m=" + std::to_string(m) +
                                        " N=" + std::to_string(n) +
                                        " split=" + std::to_string(split);
              ir::Graph g = lower(order, {.p2p = P2PMode::kBatched, .split_backward = split});
              ir::DeadlockReport report = ir::find_deadlock(g);
              EXPECT_FALSE(report.deadlocked) << where;
              EXPECT_EQ(report.completed, g.num_tasks()) << where;
              pipeline::Order rows = add_p2p_batched(split ? split_backward(order) : order);
              ir::Graph one = ir::rows_to_graph(rows, {.hardware_queues = 1});
              EXPECT_FALSE(ir::find_deadlock(one).deadlocked) << where << " queues=1";
              ++lowered;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(lowered, 100);
}

TEST(AddP2PBatched, ForwardOnlyInterleavedOrdersOnlySendForward) {
  for (std::int32_t p = 2; p <= 4; ++p) {
    pipeline::Order order = pipeline::generate_order({.name = "interleaved-1f1b",
                                                      .pp = p,
                                                      .vp = 2,
                                                      .microbatches = 2 * p,
                                                      .forward_only = true});
    pipeline::Order out = add_p2p_batched(order);
    EXPECT_THAT(ir::format_rows(out), Not(HasSubstr("_B")));
    for (std::int32_t queues : {8, 1}) {
      ir::Graph g = ir::rows_to_graph(out, {.hardware_queues = queues});
      EXPECT_FALSE(ir::find_deadlock(g).deadlocked) << "p=" << p << " queues=" << queues;
    }
  }
}

// Interleaved table with groups of N = 1 < p = 2 microbatches: (0,0) (0,1) (1,0) (1,1), warm-ups
// 2(p-r-1) + (v-1)N = 3 and 1. Rank 0's 2F0 (step 1) needs what rank 1 sends at step 0, which
// the forward leader only receives in its call of step p-1 = 1, after 2F0.
TEST(AddP2PBatched, InterleavedGroupsSmallerThanPpAreRejected) {
  EXPECT_THAT(
      [] {
        add_p2p_batched(
            rows("rank 0: 0F0 2F0 0F1 2F1 2B0 0B0 2B1 0B1\n"
                 "rank 1: 1F0 3F0 3B0 1F1 1B0 3F1 3B1 1B1\n"));
      },
      ThrowsMessage<InvalidConfig>(AllOf(
          HasSubstr("add_p2p_batched: rank 0 step 1 \"2F0\" runs before Megatron's exchanges "
                    "receive its input \"2RECV_F0\"; expected an interleaved table whose groups "
                    "hold at least pp (2) microbatches"),
          HasSubstr("use async p2p (P2PMode::kAsync, --p2p async)"))));
}

TEST(AddP2PBatched, LoopPlacementOrdersOtherThanMegatronsAreRejected) {
  // Looped BFS runs the backwards of a chunk in reverse microbatch order (ranks are checked
  // from the last, whose warm-up the others' follow from).
  EXPECT_THAT(
      [] {
        add_p2p_batched(
            pipeline::generate_order({.name = "looped-bfs", .pp = 2, .vp = 2, .microbatches = 2}));
      },
      ThrowsMessage<InvalidConfig>(
          AllOf(HasSubstr("add_p2p_batched: rank 1 step 4 is \"3B1\"; expected \"3B0\" (Megatron's "
                          "interleaved 1F1B with rank 0's table of forwards and a warm-up of 4)"),
                HasSubstr("use async p2p (P2PMode::kAsync, --p2p async) for other orders"))));
  // The 1F1B shape, but rank 0 warms up with 2 forwards instead of min(2 + 2, 4) = 4.
  EXPECT_THAT(
      [] {
        add_p2p_batched(
            rows("rank 0: 0F0 0F1 2F0 2B0 2F1 2B1 0B0 0B1\n"
                 "rank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1\n"));
      },
      ThrowsMessage<InvalidConfig>(HasSubstr(
          "add_p2p_batched: rank 0 warms up with 2 forwards; expected min(2 + 2, 4) = 4, two "
          "more than rank 1 (Megatron's interleaved 1F1B)")));
}

TEST(AddP2PBatched, VPlacementAndOverlapUnitsAreRejectedNamingAsync) {
  // ZB-V-like V placement (rank 0: stages 0, 3; rank 1: stages 1, 2).
  EXPECT_THAT(
      [] { add_p2p_batched(rows("rank 0: 0F0 3F0 3B0 0B0\nrank 1: 1F0 2F0 2B0 1B0\n")); },
      ThrowsMessage<InvalidConfig>(HasSubstr(
          "add_p2p_batched: stage 2 on rank 1; expected one stage per rank or stage c·2 + r on "
          "rank r for every chunk c; batched p2p supports one stage per rank (Megatron 1F1B) and "
          "loop placement (Megatron interleaved 1F1B); use async p2p (P2PMode::kAsync, --p2p "
          "async) for V and DualPipe orders")));
  EXPECT_THAT([] { add_p2p_batched(rows("rank 0: 0F0 (0F1;0B0)OVERLAP_F_B 0B1\n")); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("add_p2p_batched: rank 0 computes an OVERLAP_F_B unit "
                            "\"(0F1;0B0)OVERLAP_F_B\"; batched p2p supports one stage per rank")));
}

}  // namespace
}  // namespace metron::lowering
