// The ordering rules (Note [ordering rules] in ordering.h), one rule per test, checked by driving
// OrderingState by hand and comparing with the order the rule implies.

#include "metron/ir/ordering.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "task_factory.h"

namespace metron::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace metron::ir::testing;

/// Every unit startable right now, each started (not completed).
std::vector<std::vector<TaskId>> start_all(OrderingState& s) {
  std::vector<std::vector<TaskId>> units;
  std::vector<TaskId> unit;
  while (s.pop_startable(unit)) {
    for (TaskId t : unit) s.start(t);
    units.push_back(unit);
  }
  return units;
}

TEST(Ordering, StreamRunsItsTasksOneAtATimeInIssueOrder) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId c = b.add_stream(r, "compute");
  TaskId a = b.add(compute(r, c, Phase::kForward, 0, 0));
  TaskId z = b.add(compute(r, c, Phase::kForward, 0, 1));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(a)));
  EXPECT_EQ(s.state(z), TaskState::kWaiting);
  s.complete(a);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(z)));
  s.complete(z);
  EXPECT_TRUE(s.done());
}

TEST(Ordering, IndependentStreamsRunConcurrently) {
  GraphBuilder b;
  RankId r = b.add_rank();
  TaskId a = b.add(compute(r, b.add_stream(r, "compute"), Phase::kForward, 0, 0));
  TaskId z = b.add(compute(r, b.add_stream(r, "tp"), Phase::kOther));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(a), ElementsAre(z)));
}

TEST(Ordering, CrossStreamDependencyWaitsForCompletion) {
  GraphBuilder b;
  RankId r = b.add_rank();
  TaskId a = b.add(compute(r, b.add_stream(r, "compute"), Phase::kForward, 0, 0));
  TaskId z = b.add(after(compute(r, b.add_stream(r, "tp"), Phase::kOther), a));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(a)));
  EXPECT_THAT(start_all(s), IsEmpty());  // a running is not enough
  s.complete(a);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(z)));
}

TEST(Ordering, OneHardwareQueueDispatchesStreamsInGlobalIssueOrder) {
  // x waits behind d on its stream; y, on another stream, was issued after x.
  // With one queue y cannot overtake x; with two queues it can.
  for (int queues : {1, 2}) {
    GraphBuilder b;
    RankId r = b.add_rank(Rank{.hardware_queues = queues});
    StreamId c = b.add_stream(r, "compute");
    StreamId t = b.add_stream(r, "tp");
    TaskId d = b.add(compute(r, c, Phase::kForward, 0, 0));
    TaskId x = b.add(compute(r, c, Phase::kForward, 0, 1));
    TaskId y = b.add(compute(r, t, Phase::kOther));
    const Graph g = std::move(b).build();
    OrderingState s(g);
    if (queues == 1) {
      EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(d)));
      s.complete(d);
      EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(x), ElementsAre(y)));  // y right after x
    } else {
      EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(d), ElementsAre(y)));
    }
  }
}

TEST(Ordering, HostWaitStopsIssuingUntilItsTargetCompletes) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId c = b.add_stream(r, "compute");
  StreamId t = b.add_stream(r, "tp");
  TaskId a = b.add(compute(r, c, Phase::kForward, 0, 0));
  TaskId w = b.add(host_wait(r, a));
  TaskId z = b.add(compute(r, t, Phase::kOther));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(a)));
  EXPECT_EQ(s.state(z), TaskState::kNotIssued);  // behind the wait, although its stream is free
  s.complete(a);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(w)));
  EXPECT_EQ(s.state(z), TaskState::kNotIssued);
  s.complete(w);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(z)));
}

TEST(Ordering, SendAndReceiveStartTogetherOnlyWhenBothAreReady) {
  GraphBuilder b;
  RankId r0 = b.add_rank();
  RankId r1 = b.add_rank();
  StreamId c1 = b.add_stream(r1, "compute");
  TaskId sd = b.add(send(r0, b.add_stream(r0, "pp"), 1, 64, 1));
  TaskId busy = b.add(compute(r1, c1, Phase::kForward, 1, 0));
  TaskId rv = b.add(recv(r1, c1, 0, 64, 1));  // behind busy on the same stream
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(busy)));
  EXPECT_EQ(s.state(sd), TaskState::kReady);  // locally ready, partner not
  s.complete(busy);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(sd, rv)));
}

TEST(Ordering, CollectiveStartsWhenTheLastMemberArrivesWithMembersInGroupOrder) {
  GraphBuilder b;
  std::vector<RankId> ranks{b.add_rank(), b.add_rank(), b.add_rank()};
  GroupId dp = b.add_group("dp", {ranks[2], ranks[0], ranks[1]});
  std::vector<TaskId> pre, ar;
  for (RankId r : ranks) {
    StreamId c = b.add_stream(r, "compute");
    pre.push_back(b.add(compute(r, c, Phase::kBackward, 0, 0)));
    ar.push_back(b.add(after(collective(r, b.add_stream(r, "dp"), dp, 8, 0), pre.back())));
  }
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_EQ(start_all(s).size(), 3U);
  s.complete(pre[0]);
  s.complete(pre[2]);
  EXPECT_THAT(start_all(s), IsEmpty());
  s.complete(pre[1]);
  EXPECT_THAT(start_all(s), ElementsAre(ElementsAre(ar[2], ar[0], ar[1])));
}

TEST(Ordering, StartingATaskThatMayNotStartIsAnInternalError) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId c = b.add_stream(r, "compute");
  b.add(compute(r, c, Phase::kForward, 0, 0));
  TaskId z = b.add(compute(r, c, Phase::kForward, 0, 1));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  EXPECT_THROW(s.start(z), InternalError);
  EXPECT_THROW(s.complete(z), InternalError);
}

TEST(Ordering, UnitsNameTheTaskWhoseStartOrCompletionMadeThemStartable) {
  // Rank 0: a then z on one stream. Rank 1: busy then the receive of a's send on one stream.
  GraphBuilder b;
  RankId r0 = b.add_rank();
  RankId r1 = b.add_rank();
  StreamId c0 = b.add_stream(r0, "compute");
  StreamId c1 = b.add_stream(r1, "compute");
  TaskId a = b.add(compute(r0, c0, Phase::kForward, 0, 0));
  TaskId z = b.add(compute(r0, c0, Phase::kForward, 0, 1));
  TaskId sd = b.add(after(send(r0, b.add_stream(r0, "pp"), 1, 64, 1), a));
  TaskId busy = b.add(compute(r1, c1, Phase::kForward, 1, 0));
  TaskId rv = b.add(recv(r1, c1, 0, 64, 1));
  const Graph g = std::move(b).build();
  OrderingState s(g);
  StartableUnit unit;
  // From the outset: a and busy, caused by nothing.
  ASSERT_TRUE(s.pop_startable(unit));
  EXPECT_EQ(unit.instance, -1);
  EXPECT_EQ(unit.task, a);
  EXPECT_TRUE(unit.members.empty());
  EXPECT_FALSE(unit.cause.valid());
  s.start(a);
  ASSERT_TRUE(s.pop_startable(unit));
  EXPECT_EQ(unit.task, busy);
  s.start(busy);
  EXPECT_FALSE(s.pop_startable(unit));
  // busy completes: the receive is locally ready, its send is not; nothing to start.
  s.complete(busy);
  EXPECT_FALSE(s.pop_startable(unit));
  // a completes: z (stream) and the pair (a was the send's dependency, and the last condition
  // of the instance), both caused by a, in the order their last condition was met.
  s.complete(a);
  ASSERT_TRUE(s.pop_startable(unit));
  EXPECT_EQ(unit.task, z);
  EXPECT_EQ(unit.cause, a);
  EXPECT_EQ(s.cause(z), a);
  ASSERT_TRUE(s.pop_startable(unit));
  EXPECT_EQ(unit.instance, g.comm_instance(sd));
  EXPECT_THAT(unit.members, ElementsAre(sd, rv));
  EXPECT_EQ(unit.cause, a);
  EXPECT_EQ(s.cause(rv), a);
  EXPECT_FALSE(s.pop_startable(unit));
}

}  // namespace
}  // namespace metron::ir
