// Every validation problem the graph builder reports, with its message. Expectations are written
// from the contract (docs/ARCHITECTURE.md, "The task-graph contract"), not copied from output.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "task_factory.h"

namespace metron::ir {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using namespace metron::ir::testing;

/// Two ranks with compute, send and receive streams each.
class Validate : public ::testing::Test {
 protected:
  std::vector<std::string> problems() const { return find_problems(b_.data()); }

  GraphBuilder b_;
  RankId r0_ = b_.add_rank();
  RankId r1_ = b_.add_rank();
  StreamId c0_ = b_.add_stream(r0_, "compute");
  StreamId s0_ = b_.add_stream(r0_, "pp-send");
  StreamId v0_ = b_.add_stream(r0_, "pp-recv");
  StreamId c1_ = b_.add_stream(r1_, "compute");
  StreamId s1_ = b_.add_stream(r1_, "pp-send");
  StreamId v1_ = b_.add_stream(r1_, "pp-recv");
};

TEST_F(Validate, WellFormedGraphHasNoProblems) {
  TaskId f = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  b_.add(after(send(r0_, s0_, 1, 64, 1), f));
  TaskId rv = b_.add(recv(r1_, v1_, 0, 64, 1));
  b_.add(after(compute(r1_, c1_, Phase::kForward, 1, 0), rv));
  EXPECT_THAT(problems(), IsEmpty());
  EXPECT_NO_THROW((void)std::move(b_).build());
}

TEST_F(Validate, BuildThrowsOneInvalidGraphListingEveryProblem) {
  b_.add(send(r0_, s0_, 1, 64, 1));                               // unmatched send
  b_.add(compute(r1_, s0_, Phase::kForward, 1, 0));               // on rank 0's stream
  b_.add(after(compute(r0_, c0_, Phase::kForward), TaskId{42}));  // dangling dependency
  try {
    (void)std::move(b_).build();
    FAIL() << "expected InvalidGraph";
  } catch (const InvalidGraph& e) {
    EXPECT_THAT(e.problems(), SizeIs(3));
    EXPECT_THAT(e.what(), HasSubstr("invalid graph: 3 problems"));
    EXPECT_THAT(e.what(), HasSubstr("unmatched send"));
    EXPECT_THAT(e.what(),
                HasSubstr("is on stream \"pp-send\" of rank 0; expected a stream of rank 1"));
    EXPECT_THAT(e.what(), HasSubstr("depends on task 42, which does not exist"));
  }
}

TEST_F(Validate, UnmatchedSendNamesTheReceiveItExpected) {
  Task t = send(r0_, s0_, 1, 64, 5);
  t.stage = StageId{0};
  t.microbatch = MicrobatchId{3};
  b_.add(t);
  EXPECT_THAT(
      problems(),
      ElementsAre(
          "unmatched send: task 0 (rank 0, stage 0, microbatch 3): send of activation 64 bytes to "
          "rank 1 (tag 5) on stream \"pp-send\"; expected a receive on rank 1 from rank 0 with tag "
          "5"));
}

TEST_F(Validate, UnmatchedReceiveNamesTheSendItExpected) {
  b_.add(recv(r1_, v1_, 0, 64, 9, P2PKind::kGradient));
  EXPECT_THAT(
      problems(),
      ElementsAre(
          "unmatched receive: task 0 (rank 1): receive of gradient 64 bytes from rank 0 (tag 9) on "
          "stream \"pp-recv\"; expected a send on rank 0 to rank 1 with tag 9"));
}

TEST_F(Validate, ReceiveWithTheWrongTagDoesNotMatch) {
  b_.add(send(r0_, s0_, 1, 64, 1));
  b_.add(recv(r1_, v1_, 0, 64, 2));
  EXPECT_THAT(problems(), ElementsAre(HasSubstr("unmatched send"), HasSubstr("unmatched receive")));
}

TEST_F(Validate, TwoSendsWithOneTagAreReported) {
  b_.add(send(r0_, s0_, 1, 64, 1));
  b_.add(send(r0_, s0_, 1, 64, 1));
  b_.add(recv(r1_, v1_, 0, 64, 1));
  EXPECT_THAT(
      problems(),
      ElementsAre(HasSubstr(
          "2 sends and 1 receives share rank 0 -> rank 1 tag 1; expected exactly one of each")));
}

TEST_F(Validate, SendAndReceiveMustAgreeOnBytes) {
  b_.add(send(r0_, s0_, 1, 64, 1));
  b_.add(recv(r1_, v1_, 0, 32, 1));
  EXPECT_THAT(problems(), ElementsAre(AllOf(HasSubstr("send and receive disagree"),
                                            HasSubstr("sends 64 activation bytes"),
                                            HasSubstr("expects 32 activation bytes"))));
}

TEST_F(Validate, SendToItselfIsRejected) {
  b_.add(send(r0_, s0_, 0, 64, 1));
  EXPECT_THAT(problems(), Contains(HasSubstr("sends to its own rank; expected another rank")));
}

TEST_F(Validate, DanglingIdsAreReportedNotDereferenced) {
  b_.add(compute(RankId{7}, c0_, Phase::kForward));
  b_.add(compute(r0_, StreamId{99}, Phase::kForward));
  b_.add(send(r0_, s0_, 5, 64, 1));
  Task uses = compute(r0_, c0_, Phase::kForward);
  uses.uses.push_back(BufferId{3});
  b_.add(uses);
  b_.add(collective(r0_, c0_, GroupId{4}, 8, 0));
  b_.add(host_wait(r0_, TaskId{123}));
  const auto p = problems();
  EXPECT_THAT(p, Contains(HasSubstr("task 0 (rank 7): forward on stream \"compute\": rank 7 does "
                                    "not exist; expected 0..1")));
  EXPECT_THAT(p, Contains(HasSubstr("stream 99 does not exist")));
  EXPECT_THAT(p, Contains(HasSubstr("the peer rank does not exist")));
  EXPECT_THAT(p, Contains(HasSubstr("uses buffer 3, which does not exist")));
  EXPECT_THAT(p, Contains(HasSubstr("group 4 does not exist")));
  EXPECT_THAT(p, Contains(HasSubstr("the awaited task does not exist")));
}

TEST_F(Validate, TaskOnAnotherRanksStreamIsReported) {
  b_.add(compute(r0_, c1_, Phase::kForward, 0, 0));
  EXPECT_THAT(
      problems(),
      ElementsAre(
          "task 0 (rank 0, stage 0, microbatch 0): forward on stream \"compute\": is on stream "
          "\"compute\" of rank 1; expected a stream of rank 0"));
}

TEST_F(Validate, DependenciesCrossRanksOnlyThroughCommunication) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  b_.add(after(compute(r1_, c1_, Phase::kForward, 1, 0), a));
  EXPECT_THAT(
      problems(),
      ElementsAre(HasSubstr(
          "depends on task 0 (rank 0, stage 0, microbatch 0): forward on stream \"compute\"; "
          "dependencies cross ranks only through communication tasks")));
}

TEST_F(Validate, DependencyIssuedLaterIsReported) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  TaskId later = b_.add(compute(r0_, s0_, Phase::kOther));
  b_.precede(later, a);
  EXPECT_THAT(
      problems(),
      ElementsAre(HasSubstr("which rank 0 issues after it; a dependency must be issued first")));
}

TEST_F(Validate, CycleIsReportedWithAllItsTasks) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  TaskId x = b_.add(compute(r0_, s0_, Phase::kOther));
  TaskId y = b_.add(compute(r0_, v0_, Phase::kOther));
  b_.precede(a, x);
  b_.precede(x, y);
  b_.precede(y, a);
  const auto p = problems();
  EXPECT_THAT(
      p,
      Contains(AllOf(
          HasSubstr(
              "dependency cycle among 3 tasks of rank 0; expected dependencies to form no cycle"),
          HasSubstr("task 0 (rank 0, stage 0, microbatch 0): forward"),
          HasSubstr("task 1 (rank 0)"), HasSubstr("task 2 (rank 0)"))));
  // The edge y -> a also points forward in issue order; that is reported as well.
  EXPECT_THAT(p, Contains(HasSubstr("a dependency must be issued first")));
}

TEST_F(Validate, TaskDependingOnItselfIsReported) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  b_.precede(a, a);
  EXPECT_THAT(problems(), ElementsAre(HasSubstr("depends on itself")));
}

TEST_F(Validate, HostWaitRunsOnNoStreamAndWaitsOnlyForEarlierOwnTasks) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  Task on_stream = host_wait(r0_, a);
  on_stream.stream = c0_;
  b_.add(on_stream);
  TaskId other = b_.add(compute(r1_, c1_, Phase::kForward, 1, 0));
  b_.add(host_wait(r0_, other));
  TaskId w = b_.add(host_wait(r0_, a));
  TaskId later = b_.add(compute(r0_, c0_, Phase::kOther));
  std::get<HostWait>(b_.task(w).op).target = later;
  const auto p = problems();
  EXPECT_THAT(p, Contains(HasSubstr("a host wait runs on the host; expected no stream")));
  EXPECT_THAT(p, Contains(HasSubstr("a host waits only for its own rank's tasks")));
  EXPECT_THAT(p,
              Contains(HasSubstr("which is issued after the wait; the host would never issue it")));
}

TEST_F(Validate, StreamsGroupsAndRanksAreChecked) {
  b_.add_stream(r0_, "compute");
  b_.add_stream(r0_, "");
  b_.add_group("dp", {r0_, r0_});
  b_.add_group("dp", {});
  b_.add_group("tp", {RankId{9}});
  b_.add_rank(Rank{.hardware_queues = 0});
  const auto p = problems();
  EXPECT_THAT(p, Contains("stream 6: rank 0 already has a stream named \"compute\""));
  EXPECT_THAT(p, Contains("stream 7: empty name; expected a name"));
  EXPECT_THAT(p, Contains("group \"dp\": rank 0 is listed twice"));
  EXPECT_THAT(p, Contains("group 1: another group is already named \"dp\""));
  EXPECT_THAT(p, Contains("group \"dp\": no ranks; expected at least one"));
  EXPECT_THAT(p, Contains("group \"tp\": rank 9 does not exist; expected 0..2"));
  EXPECT_THAT(p, Contains("rank 2: hardware_queues is 0; expected at least 1"));
}

TEST_F(Validate, BuffersAreAllocatedExactlyOnceOnTheirOwnRank) {
  BufferId never = b_.add_buffer(r0_, 64, "never");
  BufferId twice = b_.add_buffer(r0_, 64, "twice");
  BufferId foreign = b_.add_buffer(r1_, 64, "foreign");
  b_.add_buffer(r0_, -1, "negative");
  Task a = compute(r0_, c0_, Phase::kForward, 0, 0);
  a.allocates = {twice};
  a.uses = {never};
  b_.add(a);
  b_.add(a);
  Task c = compute(r0_, c0_, Phase::kBackward, 0, 0);
  c.allocates = {foreign};
  b_.add(c);
  const auto p = problems();
  EXPECT_THAT(p, Contains(HasSubstr("buffer 0 \"never\" of rank 0 is never allocated; expected "
                                    "exactly one task that allocates it")));
  EXPECT_THAT(p, Contains(HasSubstr("buffer 1 \"twice\" is allocated 2 times; expected once")));
  EXPECT_THAT(p, Contains(HasSubstr("uses buffer 2 \"foreign\" of rank 1; expected a buffer of its "
                                    "own rank")));
  EXPECT_THAT(p, Contains(HasSubstr("buffer 3 \"negative\": -1 bytes; expected >= 0")));
}

TEST_F(Validate, IssueOrderMustListEveryTaskOfTheRankOnce) {
  TaskId a = b_.add(compute(r0_, c0_, Phase::kForward, 0, 0));
  TaskId z = b_.add(compute(r0_, c0_, Phase::kForward, 0, 1));
  TaskId other = b_.add(compute(r1_, c1_, Phase::kForward, 1, 0));
  b_.set_issue_order(r0_, {a, a, other, TaskId{50}});
  const auto p = problems();
  EXPECT_THAT(p, Contains(HasSubstr("issue order of rank 0: lists task 0 (rank 0, stage 0, "
                                    "microbatch 0): forward on stream \"compute\" twice")));
  EXPECT_THAT(p, Contains(HasSubstr("issue order of rank 0: lists task 2 (rank 1, stage 1, "
                                    "microbatch 0): forward on stream \"compute\", which belongs "
                                    "to another rank")));
  EXPECT_THAT(p, Contains("issue order of rank 0: task 50 does not exist"));
  EXPECT_THAT(p,
              Contains(HasSubstr("microbatch 1): forward on stream \"compute\": missing from the "
                                 "issue order of rank 0")));
  (void)z;
}

TEST_F(Validate, WorkMustBeFiniteAndTagsMustBeIndicesOrNone) {
  Task nan_work = compute(r0_, c0_, Phase::kForward, 0, 0);
  std::get<Compute>(nan_work.op).flops = std::nan("");
  b_.add(nan_work);
  Task bad_tag = compute(r0_, c0_, Phase::kForward, -5, 0);
  b_.add(bad_tag);
  const auto p = problems();
  EXPECT_THAT(p,
              Contains(HasSubstr("work of nan flops and 0 bytes; expected finite amounts >= 0")));
  EXPECT_THAT(p, Contains(HasSubstr("stage -5; expected an index >= 0 or none")));
}

/// Three ranks in a data-parallel group with a stream for gradient collectives each.
class ValidateCollectives : public ::testing::Test {
 protected:
  std::vector<std::string> problems() const { return find_problems(b_.data()); }
  TaskId add(std::int32_t rank, Collective c) {
    c.group = dp_;
    return b_.add({.rank = RankId{rank}, .stream = grad_[static_cast<std::size_t>(rank)], .op = c});
  }

  GraphBuilder b_;
  RankId r0_ = b_.add_rank();
  RankId r1_ = b_.add_rank();
  RankId r2_ = b_.add_rank();
  std::vector<StreamId> grad_{b_.add_stream(r0_, "dp-grad"), b_.add_stream(r1_, "dp-grad"),
                              b_.add_stream(r2_, "dp-grad")};
  GroupId dp_ = b_.add_group("dp", {r0_, r1_, r2_});
};

TEST_F(ValidateCollectives, MatchingMembersFormOneInstance) {
  for (int r = 0; r < 3; ++r) add(r, {.bytes = 1024, .seq = 0});
  EXPECT_THAT(problems(), IsEmpty());
}

TEST_F(ValidateCollectives, MissingMemberIsNamed) {
  add(0, {.bytes = 1024, .seq = 0});
  add(2, {.bytes = 1024, .seq = 0});
  EXPECT_THAT(
      problems(),
      ElementsAre(
          "unmatched collective: task 0 (rank 0): all-reduce of 1024 bytes on group \"dp\" (seq 0) "
          "on "
          "stream \"dp-grad\"; rank 1 never issues seq 0 on group \"dp\"; expected every member of "
          "the group to"));
}

TEST_F(ValidateCollectives, MembersThatNameDifferentGroupsAreToldSo) {
  GroupId other = b_.add_group("dp-copy", {r0_, r1_, r2_});
  add(0, {.bytes = 8, .seq = 4});
  add(1, {.bytes = 8, .seq = 4});
  b_.add({.rank = r2_, .stream = grad_[2], .op = Collective{.group = other, .bytes = 8, .seq = 4}});
  const auto p = problems();
  EXPECT_THAT(p, Contains(AllOf(HasSubstr("rank 2 never issues seq 4 on group \"dp\""),
                                HasSubstr("members disagree on the group: rank 2 issues seq 4 on "
                                          "group \"dp-copy\" instead (task 2 (rank 2)"))));
}

TEST_F(ValidateCollectives, MembersMustAgreeOnOpBytesDtypeAndRoot) {
  add(0, {.op = CollectiveOp::kReduce, .bytes = 1024, .root = RankId{0}, .seq = 0});
  add(1, {.op = CollectiveOp::kReduce,
          .bytes = 2048,
          .dtype = DType::kBf16,
          .root = RankId{1},
          .seq = 0});
  add(2, {.op = CollectiveOp::kBroadcast, .bytes = 1024, .root = RankId{0}, .seq = 0});
  const auto p = problems();
  EXPECT_THAT(p, Contains(AllOf(HasSubstr("collective seq 0 on group \"dp\": members disagree on "
                                          "bytes: task 0"),
                                HasSubstr("has 1024, task 1"), HasSubstr("has 2048"))));
  EXPECT_THAT(p, Contains(HasSubstr("members disagree on dtype")));
  EXPECT_THAT(p, Contains(AllOf(HasSubstr("members disagree on root"), HasSubstr("has 0"),
                                HasSubstr("has 1"))));
  EXPECT_THAT(p, Contains(AllOf(HasSubstr("members disagree on op"), HasSubstr("has reduce"),
                                HasSubstr("has broadcast"))));
}

TEST_F(ValidateCollectives, SequenceNumbersMustRiseInIssueOrderOnEveryMember) {
  for (int r = 0; r < 3; ++r) {
    const bool swapped = r == 2;
    add(r, {.bytes = 8, .seq = swapped ? 1 : 0});
    add(r, {.bytes = 8, .seq = swapped ? 0 : 1});
  }
  EXPECT_THAT(problems(),
              ElementsAre(HasSubstr("rank 2 issues seq 0 after seq 1 on group \"dp\"")));
}

TEST_F(ValidateCollectives, DuplicateSequenceNumberOnOneRankIsReported) {
  for (int r = 0; r < 3; ++r) add(r, {.bytes = 8, .seq = 0});
  add(1, {.bytes = 8, .seq = 0});
  EXPECT_THAT(problems(), ElementsAre(HasSubstr("rank 1 issues seq 0 on group \"dp\" twice")));
}

TEST_F(ValidateCollectives, IssuerMustBeAMemberAndRootedOpsNeedAMemberRoot) {
  GroupId pair = b_.add_group("pair", {r0_, r1_});
  b_.add({.rank = r2_, .stream = grad_[2], .op = Collective{.group = pair, .bytes = 8}});
  b_.add({.rank = r0_,
          .stream = grad_[0],
          .op = Collective{.op = CollectiveOp::kBroadcast, .group = pair, .bytes = 8, .seq = 1}});
  const auto p = problems();
  EXPECT_THAT(p, Contains(HasSubstr("rank 2 is not a member of group \"pair\"")));
  EXPECT_THAT(p,
              Contains(HasSubstr("broadcast needs a root among the group's ranks; got rank -1")));
}

TEST_F(ValidateCollectives, MembersMustAgreeOnCount) {
  // Ranks 0 and 1 stand for 2 collectives, rank 2 for 3: one disagreement, between the first
  // member (rank 0) and rank 2.
  add(0, {.bytes = 8, .seq = 0, .count = 2});
  add(1, {.bytes = 8, .seq = 0, .count = 2});
  add(2, {.bytes = 8, .seq = 0, .count = 3});
  EXPECT_THAT(problems(),
              ElementsAre(AllOf(HasSubstr("collective seq 0 on group \"dp\": members disagree on "
                                          "count: task 0 (rank 0)"),
                                HasSubstr("has 2, task 2 (rank 2)"), HasSubstr("has 3"))));
}

TEST_F(ValidateCollectives, CountBelowOneIsRejected) {
  // A task stands for at least one collective: every member with count 0 is reported, and
  // none of them is then matched (which would add "disagree" or "unmatched" problems).
  for (int r = 0; r < 3; ++r) add(r, {.bytes = 8, .seq = 0, .count = 0});
  EXPECT_THAT(problems(), ElementsAre(HasSubstr("task 0 (rank 0)"), HasSubstr("task 1 (rank 1)"),
                                      HasSubstr("task 2 (rank 2)")));
  EXPECT_THAT(problems(), Each(HasSubstr("count 0; expected >= 1")));
}

}  // namespace
}  // namespace metron::ir
