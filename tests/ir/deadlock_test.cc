// The static deadlock check: cross-rank ordering deadlocks are found before anything runs, and
// every blocked task is named with what it waits for.

#include "metron/ir/deadlock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "task_factory.h"

namespace metron::ir {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using namespace metron::ir::testing;

/// Two ranks exchanging one tensor each way, on one stream per rank or on separate send and
/// receive streams.
Graph exchange(bool separate_streams) {
  GraphBuilder b;
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank = b.add_rank();
    const StreamId out = b.add_stream(rank, separate_streams ? "pp-send" : "pp");
    const StreamId in = separate_streams ? b.add_stream(rank, "pp-recv") : out;
    b.add(send(rank, out, 1 - r, 64, r));  // both ranks send first
    b.add(recv(rank, in, 1 - r, 64, 1 - r));
  }
  return std::move(b).build();
}

TEST(Deadlock, BothRanksSendingFirstOnOneStreamDeadlock) {
  const DeadlockReport report = find_deadlock(exchange(false));
  EXPECT_TRUE(report.deadlocked);
  EXPECT_EQ(report.completed, 0);
  ASSERT_THAT(report.blocked, SizeIs(2));
  EXPECT_THAT(
      report.blocked[0],
      AllOf(
          HasSubstr("rank 0 stream \"pp\": task 0 (rank 0): send of activation 64 bytes to rank 1 "
                    "(tag 0) on stream \"pp\" is ready but waits for its partners:"),
          HasSubstr("task 3 (rank 1): receive of activation 64 bytes from rank 0 (tag 0) on stream "
                    "\"pp\", which is queued behind task 2 (rank 1): send"),
          HasSubstr("(1 more queued behind it)")));
  EXPECT_THAT(report.blocked[1], HasSubstr("rank 1 stream \"pp\": task 2 (rank 1): send"));
}

TEST(Deadlock, SeparateSendAndReceiveStreamsDoNotDeadlock) {
  const DeadlockReport report = find_deadlock(exchange(true));
  EXPECT_FALSE(report.deadlocked);
  EXPECT_EQ(report.completed, 4);
  EXPECT_EQ(report.steps, 1);  // both pairs run in the first unit step
  EXPECT_NO_THROW(check_deadlock(exchange(true)));
}

TEST(Deadlock, CheckThrowsDeadlockListingEveryBlockedTask) {
  EXPECT_THAT([] { check_deadlock(exchange(false)); },
              ::testing::ThrowsMessage<Deadlock>(
                  AllOf(HasSubstr("deadlock: no task can make progress; 2 blocked tasks"),
                        HasSubstr("rank 0 stream \"pp\""), HasSubstr("rank 1 stream \"pp\""))));
}

/// Two ranks, two groups over both; rank 1 issues the groups' collectives in the opposite order.
Graph crossed_collectives(std::int32_t queues, bool one_stream) {
  GraphBuilder b;
  const RankId r0 = b.add_rank(Rank{.hardware_queues = queues});
  const RankId r1 = b.add_rank(Rank{.hardware_queues = queues});
  const GroupId ga = b.add_group("a", {r0, r1});
  const GroupId gb = b.add_group("b", {r0, r1});
  for (RankId r : {r0, r1}) {
    const StreamId sa = b.add_stream(r, one_stream ? "comm" : "comm-a");
    const StreamId sb = one_stream ? sa : b.add_stream(r, "comm-b");
    const Task on_a = collective(r, sa, ga, 8, 0);
    const Task on_b = collective(r, sb, gb, 8, 0);
    b.add(r == r0 ? on_a : on_b);
    b.add(r == r0 ? on_b : on_a);
  }
  return std::move(b).build();
}

TEST(Deadlock, CollectivesInDifferentOrdersOnOneStreamDeadlock) {
  const DeadlockReport report = find_deadlock(crossed_collectives(8, true));
  EXPECT_TRUE(report.deadlocked);
  EXPECT_THAT(
      report.blocked,
      ElementsAre(
          AllOf(HasSubstr("rank 0 stream \"comm\": task 0 (rank 0): all-reduce of 8 bytes on group "
                          "\"a\""),
                HasSubstr("task 3 (rank 1): all-reduce of 8 bytes on group \"a\" (seq 0) on stream "
                          "\"comm\", which is queued behind task 2")),
          AllOf(HasSubstr("rank 1 stream \"comm\": task 2 (rank 1): all-reduce of 8 bytes on group "
                          "\"b\""),
                HasSubstr("task 1 (rank 0): all-reduce of 8 bytes on group \"b\""))));
}

TEST(Deadlock, CollectivesInDifferentOrdersOnTheirOwnStreamsDeadlockOnlyWithOneQueue) {
  EXPECT_FALSE(find_deadlock(crossed_collectives(8, false)).deadlocked);
  const DeadlockReport report = find_deadlock(crossed_collectives(1, false));
  EXPECT_TRUE(report.deadlocked);
  EXPECT_THAT(report.blocked, Contains(HasSubstr("is behind task 0 (rank 0): all-reduce of 8 bytes "
                                                 "on group \"a\" (seq 0) on stream \"comm-a\" on "
                                                 "hardware queue 0")));
}

TEST(Deadlock, HostsWaitingForReceivesBeforeSendingAreReported) {
  GraphBuilder b;
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankId rank = b.add_rank();
    const StreamId in = b.add_stream(rank, "pp-recv");
    const StreamId out = b.add_stream(rank, "pp-send");
    const TaskId rv = b.add(recv(rank, in, 1 - r, 64, 1 - r));
    b.add(host_wait(rank, rv));
    b.add(send(rank, out, 1 - r, 64, r));
  }
  const DeadlockReport report = find_deadlock(std::move(b).build());
  EXPECT_TRUE(report.deadlocked);
  EXPECT_THAT(
      report.blocked,
      Contains(AllOf(HasSubstr("rank 0 host: stopped at task 1 (rank 0): host wait for task 0"),
                     HasSubstr("waits for task 0 (rank 0): receive"),
                     HasSubstr("1 tasks not issued"))));
  EXPECT_THAT(
      report.blocked,
      Contains(AllOf(
          HasSubstr("rank 0 stream \"pp-recv\": task 0"),
          HasSubstr("task 5 (rank 1): send of activation 64 bytes to rank 0 (tag 1) on stream "
                    "\"pp-send\", which rank 1 has not issued"))));
}

TEST(Deadlock, UnitStepsCountTheLongestChain) {
  // Rank 0: F -> send; rank 1: recv -> F -> B; rank 0 then B after a gradient round trip.
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const StreamId c0 = b.add_stream(r0, "compute");
  const StreamId p0 = b.add_stream(r0, "pp");
  const StreamId c1 = b.add_stream(r1, "compute");
  const StreamId p1 = b.add_stream(r1, "pp");
  const TaskId f0 = b.add(compute(r0, c0, Phase::kForward, 0, 0));
  b.add(after(send(r0, p0, 1, 64, 0), f0));
  const TaskId g0 = b.add(recv(r0, p0, 1, 64, 1, P2PKind::kGradient));
  b.add(after(compute(r0, c0, Phase::kBackward, 0, 0), g0));
  const TaskId a1 = b.add(recv(r1, p1, 0, 64, 0));
  const TaskId f1 = b.add(after(compute(r1, c1, Phase::kForward, 1, 0), a1));
  const TaskId b1 = b.add(compute(r1, c1, Phase::kBackward, 1, 0));
  (void)f1;
  b.add(after(send(r1, p1, 0, 64, 1, P2PKind::kGradient), b1));
  // F0, send/recv, F1, B1, send/recv, B0: six unit steps.
  const DeadlockReport report = find_deadlock(std::move(b).build());
  EXPECT_FALSE(report.deadlocked);
  EXPECT_EQ(report.steps, 6);
  EXPECT_EQ(report.completed, 8);
}

}  // namespace
}  // namespace metron::ir
