#include "metron/ir/graph_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "task_factory.h"

namespace metron::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace metron::ir::testing;

/// Two ranks: rank 0 computes, sends, and all-reduces with rank 1 on a second stream.
struct SmallGraph {
  GraphBuilder b;
  RankId r0 = b.add_rank();
  RankId r1 = b.add_rank(Rank{.hardware_queues = 1});
  StreamId c0 = b.add_stream(r0, "compute");
  StreamId s0 = b.add_stream(r0, "pp-send");
  StreamId d0 = b.add_stream(r0, "dp-grad");
  StreamId c1 = b.add_stream(r1, "compute");
  StreamId v1 = b.add_stream(r1, "pp-recv");
  StreamId d1 = b.add_stream(r1, "dp-grad");
  GroupId dp = b.add_group("dp", {r0, r1});
  TaskId f0 = b.add(compute(r0, c0, Phase::kForward, 0, 0));
  TaskId send0 = b.add(after(send(r0, s0, 1, 64, 7), f0));
  TaskId ar0 = b.add(after(collective(r0, d0, dp, 256, 0), f0));
  TaskId recv1 = b.add(recv(r1, v1, 0, 64, 7));
  TaskId f1 = b.add(after(compute(r1, c1, Phase::kForward, 1, 0), recv1));
  TaskId ar1 = b.add(after(collective(r1, d1, dp, 256, 0), f1));
};

TEST(GraphBuilder, BuildsAnImmutableGraphWithIssueOrderPerRank) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  EXPECT_EQ(g.num_ranks(), 2);
  EXPECT_EQ(g.num_tasks(), 6);
  EXPECT_THAT(g.issue_order(s.r0), ElementsAre(s.f0, s.send0, s.ar0));
  EXPECT_THAT(g.issue_order(s.r1), ElementsAre(s.recv1, s.f1, s.ar1));
  EXPECT_EQ(g.issue_position(s.ar0), 2);
  EXPECT_THAT(g.streams_of(s.r1), ElementsAre(s.c1, s.v1, s.d1));
  EXPECT_EQ(g.find_stream(s.r1, "pp-recv"), s.v1);
  EXPECT_EQ(g.find_stream(s.r1, "pp-send"), std::nullopt);
  EXPECT_EQ(g.find_group("dp"), s.dp);
}

TEST(GraphBuilder, IndexesDependentsAndStreamFifos) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  EXPECT_THAT(g.dependents(s.f0), ElementsAre(s.send0, s.ar0));
  EXPECT_THAT(g.dependents(s.ar0), IsEmpty());
  EXPECT_THAT(g.stream_tasks(s.c0), ElementsAre(s.f0));
  EXPECT_FALSE(g.stream_predecessor(s.f0).valid());
}

TEST(GraphBuilder, MatchesCommunicationIntoInstances) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  ASSERT_EQ(g.num_comm_instances(), 2);
  EXPECT_EQ(g.comm_instance(s.f0), -1);
  EXPECT_THAT(g.comm_members(g.comm_instance(s.send0)), ElementsAre(s.send0, s.recv1));
  EXPECT_EQ(g.comm_instance(s.recv1), g.comm_instance(s.send0));
  EXPECT_THAT(g.comm_members(g.comm_instance(s.ar1)), ElementsAre(s.ar0, s.ar1));
}

TEST(GraphBuilder, HardwareQueuesMapStreamsRoundRobin) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  // Rank 0 has 8 queues: each stream its own. Rank 1 has one queue for all three streams.
  EXPECT_EQ(g.queue_of(s.c0), 0);
  EXPECT_EQ(g.queue_of(s.d0), 2);
  EXPECT_EQ(g.queue_of(s.d1), 0);
  // On rank 1 every task waits for the previous one on the queue to start (different streams).
  EXPECT_EQ(g.queue_predecessor(s.f1), s.recv1);
  EXPECT_EQ(g.queue_predecessor(s.ar1), s.f1);
  EXPECT_EQ(g.queue_successor(s.recv1), s.f1);
  EXPECT_FALSE(g.queue_predecessor(s.send0).valid());
}

TEST(GraphBuilder, SameStreamPredecessorIsNotAlsoAQueueConstraint) {
  GraphBuilder b;
  RankId r = b.add_rank(Rank{.hardware_queues = 1});
  StreamId c = b.add_stream(r, "compute");
  TaskId a = b.add(compute(r, c, Phase::kForward, 0, 0));
  TaskId z = b.add(compute(r, c, Phase::kForward, 0, 1));
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.stream_predecessor(z), a);
  EXPECT_EQ(g.stream_successor(a), z);
  EXPECT_FALSE(g.queue_predecessor(z).valid());
}

TEST(GraphBuilder, StreamLookupAddsOnlyMissingStreams) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId first = b.stream(r, "compute");
  EXPECT_EQ(b.stream(r, "compute"), first);
  EXPECT_NE(b.stream(r, "tp"), first);
  EXPECT_EQ(b.data().streams.size(), 2U);
}

TEST(GraphBuilder, StreamLookupFindsStreamsOfTheGraphItStartedFrom) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  GraphBuilder again(g);
  EXPECT_EQ(again.stream(s.r1, "pp-recv"), s.v1);
  EXPECT_EQ(again.stream(s.r0, "dp-grad"), s.d0);
  EXPECT_EQ(again.stream(s.r1, "tp"), StreamId{6});  // new: after the six existing streams
  EXPECT_EQ(again.stream(s.r1, "tp"), StreamId{6});
}

TEST(GraphBuilder, RebuildingFromAGraphGivesAnEqualGraph) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  const Graph copy = GraphBuilder(g).build();
  EXPECT_EQ(copy, g);
}

TEST(GraphBuilder, ExplicitIssueOrderReplacesInsertionOrder) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId c = b.add_stream(r, "compute");
  StreamId t = b.add_stream(r, "tp");
  TaskId x = b.add(compute(r, c, Phase::kForward, 0, 0));
  TaskId y = b.add(compute(r, t, Phase::kOther));
  b.set_issue_order(r, {y, x});
  const Graph g = std::move(b).build();
  EXPECT_THAT(g.issue_order(r), ElementsAre(y, x));
}

TEST(GraphBuilder, UnknownTaskIdIsAnInvalidConfig) {
  GraphBuilder b;
  EXPECT_THAT([&] { b.precede(TaskId{0}, TaskId{3}); },
              ::testing::ThrowsMessage<InvalidConfig>(::testing::HasSubstr("no task 3")));
}

TEST(GraphAccess, ForeignIdIsAnInternalError) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  EXPECT_THROW((void)g.task(TaskId{99}), InternalError);
  EXPECT_THROW((void)g.issue_order(RankId{2}), InternalError);
}

TEST(DescribeTask, NamesRankStageMicrobatchKindAndStream) {
  SmallGraph s;
  const Graph g = std::move(s.b).build();
  EXPECT_EQ(g.describe(s.f1),
            "task 4 (rank 1, stage 1, microbatch 0): forward on stream \"compute\"");
  EXPECT_EQ(g.describe(s.send0),
            "task 1 (rank 0): send of activation 64 bytes to rank 1 (tag 7) on stream \"pp-send\"");
  EXPECT_EQ(g.describe(s.ar1),
            "task 5 (rank 1): all-reduce of 256 bytes on group \"dp\" (seq 0) on stream "
            "\"dp-grad\"");
}

}  // namespace
}  // namespace metron::ir
