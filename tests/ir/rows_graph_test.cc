// Rows <-> graph (Note [rows to graph]): hand-checked dependencies, tags and peers, the problems
// rows_to_graph collects, and the projection graph_to_rows.

#include "metron/ir/rows_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"

namespace metron::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

// The task at position `k` of rank `r`'s issue order.
TaskId at(const Graph& g, std::int32_t r, std::size_t k) { return g.issue_order(RankId{r})[k]; }

std::string stream_name(const Graph& g, TaskId t) { return g.stream(g.task(t).stream).name; }

// 1F1B over 2 ranks and 2 microbatches, with PyTorch-style comms.
constexpr const char* kOneFOneB =
    "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n";

TEST(RowsToGraph, OneFOneBHasTheDependenciesOfTheNote) {
  Graph g = rows_to_graph(parse_rows(kOneFOneB));
  ASSERT_EQ(g.num_ranks(), 2);
  ASSERT_EQ(g.num_tasks(), 16);
  // Rank 0: the send waits for its forward; a backward for its forward and its gradient.
  EXPECT_THAT(g.task(at(g, 0, 0)).deps, IsEmpty());
  EXPECT_THAT(g.task(at(g, 0, 1)).deps, ElementsAre(at(g, 0, 0)));
  EXPECT_THAT(g.task(at(g, 0, 3)).deps, ElementsAre(at(g, 0, 2)));
  EXPECT_THAT(g.task(at(g, 0, 5)).deps, UnorderedElementsAre(at(g, 0, 0), at(g, 0, 4)));
  EXPECT_THAT(g.task(at(g, 0, 7)).deps, UnorderedElementsAre(at(g, 0, 2), at(g, 0, 6)));
  // Rank 1: 1F0 waits for 1RECV_F0; the last stage's backward only for its forward.
  EXPECT_THAT(g.task(at(g, 1, 1)).deps, ElementsAre(at(g, 1, 0)));
  EXPECT_THAT(g.task(at(g, 1, 2)).deps, ElementsAre(at(g, 1, 1)));
  EXPECT_THAT(g.task(at(g, 1, 3)).deps, ElementsAre(at(g, 1, 2)));
  EXPECT_THAT(g.task(at(g, 1, 5)).deps, ElementsAre(at(g, 1, 4)));
}

TEST(RowsToGraph, SendAndReceiveOfOneTensorShareATag) {
  Graph g = rows_to_graph(parse_rows(kOneFOneB));
  // Activation of stage 0 mb 1: tag 2 * (2^20 * 0 + 1) + 0 = 2.
  EXPECT_EQ(g.task(at(g, 0, 3)).op, TaskOp(Send{.peer = RankId{1}, .tag = 2}));
  EXPECT_EQ(g.task(at(g, 1, 4)).op, TaskOp(Recv{.peer = RankId{0}, .tag = 2}));
  // Gradient of stage 1 mb 0: tag 2 * (2^20 * 1 + 0) + 1 = 2097153.
  EXPECT_EQ(g.task(at(g, 1, 3)).op,
            TaskOp(Send{.peer = RankId{0}, .tag = 2097153, .what = P2PKind::kGradient}));
  EXPECT_EQ(g.task(at(g, 0, 4)).op,
            TaskOp(Recv{.peer = RankId{1}, .tag = 2097153, .what = P2PKind::kGradient}));
}

TEST(RowsToGraph, TasksGetRoleStreamsAndTags) {
  Graph g = rows_to_graph(parse_rows(kOneFOneB), {.hardware_queues = 1});
  EXPECT_EQ(g.rank(RankId{0}).hardware_queues, 1);
  EXPECT_EQ(stream_name(g, at(g, 0, 0)), "compute");
  EXPECT_EQ(stream_name(g, at(g, 0, 1)), "pp-send-1");
  EXPECT_EQ(stream_name(g, at(g, 0, 4)), "pp-recv-1");
  const Task& b = g.task(at(g, 1, 6));
  EXPECT_EQ(b.op, TaskOp(Compute{.phase = Phase::kBackward}));
  EXPECT_EQ(b.stage, StageId{1});
  EXPECT_EQ(b.chunk, ChunkId{0});
  EXPECT_EQ(b.microbatch, MicrobatchId{1});
}

TEST(RowsToGraph, GraphToRowsGivesTheRowsBack) {
  ActionRows rows = parse_rows(kOneFOneB);
  EXPECT_EQ(graph_to_rows(rows_to_graph(rows)), rows);
}

// V-shape: rank 0 owns stages 0 and 3, rank 1 owns 1 and 2, so stages 1 -> 2 stay on rank 1.
constexpr const char* kVShape =
    "rank 0: 0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0\n"
    "rank 1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0\n";

TEST(RowsToGraph, VShapeNeighboursOnOneRankDependLocally) {
  Graph g = rows_to_graph(parse_rows(kVShape));
  EXPECT_THAT(g.task(at(g, 1, 2)).deps, ElementsAre(at(g, 1, 1)));  // 2F0 <- 1F0
  EXPECT_THAT(g.task(at(g, 1, 6)).deps, UnorderedElementsAre(at(g, 1, 1), at(g, 1, 5)));  // 1B0
  EXPECT_THAT(g.task(at(g, 0, 3)).deps, ElementsAre(at(g, 0, 2)));  // 3F0 <- recv
  // Chunks count each rank's stages in ascending order.
  EXPECT_EQ(g.task(at(g, 0, 3)).chunk, ChunkId{1});
  EXPECT_EQ(g.task(at(g, 1, 1)).chunk, ChunkId{0});
  EXPECT_EQ(g.task(at(g, 1, 2)).chunk, ChunkId{1});
  // Stage 2 sends its activation to stage 3's owner: tag 2 * (2^20 * 2 + 0) = 4194304.
  EXPECT_EQ(g.task(at(g, 1, 3)).op, TaskOp(Send{.peer = RankId{0}, .tag = 4194304}));
  EXPECT_EQ(g.task(at(g, 0, 2)).op, TaskOp(Recv{.peer = RankId{1}, .tag = 4194304}));
  EXPECT_EQ(graph_to_rows(g), parse_rows(kVShape));
}

// Two data-parallel replicas of a 2-stage pipeline: stage 1 has two owners, so peers are explicit.
constexpr const char* kDataParallel =
    "group dp0: 0 2\n"
    "group dp1: 1 3\n"
    "rank 0: 0F0 0SEND_F0@1 0RECV_B0@1 0B0 ALL_REDUCE[dp0#0,bytes=1024] STEP\n"
    "rank 1: 1RECV_F0@0 1F0 1B0 1SEND_B0@0 ALL_REDUCE[dp1#0,bytes=1024] STEP\n"
    "rank 2: 0F0 0SEND_F0@3 0RECV_B0@3 0B0 ALL_REDUCE[dp0#0,bytes=1024] STEP\n"
    "rank 3: 1RECV_F0@2 1F0 1B0 1SEND_B0@2 ALL_REDUCE[dp1#0,bytes=1024] STEP\n";

TEST(RowsToGraph, DataParallelReplicasNeedAndPrintPeers) {
  ActionRows rows = parse_rows(kDataParallel);
  Graph g = rows_to_graph(rows);
  EXPECT_EQ(g.task(at(g, 2, 1)).op, TaskOp(Send{.peer = RankId{3}, .tag = 0}));
  EXPECT_EQ(g.group(GroupId{1}), (Group{.name = "dp1", .ranks = {RankId{1}, RankId{3}}}));
  EXPECT_EQ(g.task(at(g, 3, 4)).op,
            TaskOp(Collective{.group = GroupId{1}, .bytes = 1024, .seq = 0}));
  EXPECT_EQ(stream_name(g, at(g, 3, 4)), "comm");
  EXPECT_EQ(graph_to_rows(g), rows);
}

TEST(RowsToGraph, CollectiveWaitsForLastComputeAndStepForCollectives) {
  Graph g = rows_to_graph(parse_rows(kDataParallel));
  EXPECT_THAT(g.task(at(g, 0, 4)).deps, ElementsAre(at(g, 0, 3)));  // all-reduce <- 0B0
  EXPECT_THAT(g.task(at(g, 0, 5)).deps, ElementsAre(at(g, 0, 4)));  // STEP <- all-reduce
}

TEST(RowsToGraph, DataParallelWithoutPeersCannotInferThem) {
  std::string text = kDataParallel;
  for (const char* peer : {"@0", "@1", "@2", "@3"}) {
    for (auto pos = text.find(peer); pos != std::string::npos; pos = text.find(peer)) {
      text.erase(pos, 2);
    }
  }
  ActionRows rows = parse_rows(text);
  EXPECT_THAT([&] { (void)rows_to_graph(rows); },
              ThrowsMessage<InvalidGraph>(HasSubstr(
                  "rank 0 action 1 \"0SEND_F0\": cannot infer the peer: stage 1 has 2 owners "
                  "(ranks 1, 3); expected exactly one rank computing stage 1, or an explicit "
                  "@<peer>")));
  try {
    (void)rows_to_graph(rows);
  } catch (const InvalidGraph& e) {
    EXPECT_EQ(e.problems().size(), 8u);  // every p2p end: stages 0 and 1 both have two owners
  }
}

TEST(RowsToGraph, CollectiveKeysBecomeTaskFields) {
  ActionRows rows = parse_rows(
      "group g: 0 1\n"
      "rank 0: 0F0 BROADCAST[g#3,bytes=64,dtype=bf16,root=1,bucket=2,stage=0,mb=0,stream=dp]\n"
      "rank 1: BROADCAST[g#3,bytes=64,dtype=bf16,root=1,bucket=2,stream=dp]\n");
  Graph g = rows_to_graph(rows);
  const Task& t = g.task(at(g, 0, 1));
  EXPECT_EQ(t.op, TaskOp(Collective{.op = CollectiveOp::kBroadcast,
                                    .group = GroupId{0},
                                    .bytes = 64,
                                    .dtype = DType::kBf16,
                                    .root = RankId{1},
                                    .seq = 3}));
  EXPECT_EQ(t.bucket, BucketId{2});
  EXPECT_EQ(t.stage, StageId{0});
  EXPECT_EQ(t.microbatch, MicrobatchId{0});
  EXPECT_EQ(stream_name(g, at(g, 0, 1)), "dp");
  EXPECT_EQ(graph_to_rows(g), rows);
}

TEST(RowsToGraph, CollectiveCountRoundTripsThroughRows) {
  // count=12 becomes Collective::count; a token without it means 1, and count is printed after
  // bucket and before stage (action.h), only when it is not 1.
  const char* text =
      "group tp0: 0\n"
      "rank 0: 0F0 ALL_REDUCE[tp0#0,bytes=96,bucket=1,count=12,stage=0,stream=tp] "
      "ALL_REDUCE[tp0#1,bytes=8,stream=tp]\n";
  ActionRows rows = parse_rows(text);
  Graph g = rows_to_graph(rows);
  EXPECT_EQ(std::get<Collective>(g.task(at(g, 0, 1)).op).count, 12);
  EXPECT_EQ(std::get<Collective>(g.task(at(g, 0, 2)).op).count, 1);
  EXPECT_EQ(graph_to_rows(g), rows);
  EXPECT_EQ(format_rows(graph_to_rows(g)), text);
}

TEST(RowsToGraph, WaitTargetsTheLatestEqualAction) {
  ActionRows rows = parse_rows("rank 0: 0F0 OTHER 0OTHER OTHER WAIT(OTHER) 0I0 0W0\n");
  Graph g = rows_to_graph(rows);
  const Task& wait = g.task(at(g, 0, 4));
  EXPECT_EQ(wait.op, TaskOp(HostWait{.target = at(g, 0, 3)}));
  EXPECT_FALSE(wait.stream.valid());
  EXPECT_THAT(g.task(at(g, 0, 5)).deps, ElementsAre(at(g, 0, 0)));  // I <- F
  EXPECT_THAT(g.task(at(g, 0, 6)).deps, ElementsAre(at(g, 0, 5)));  // W <- I
  EXPECT_EQ(graph_to_rows(g), rows);
}

TEST(RowsToGraph, OverlapCountsAsBothHalves) {
  ActionRows rows = parse_rows("rank 0: 0F0 (0F1;0B0)OVERLAP_F_B 0B1\n");
  Graph g = rows_to_graph(rows);
  const Task& unit = g.task(at(g, 0, 1));
  EXPECT_EQ(unit.op, TaskOp(Compute{.phase = Phase::kForward,
                                    .overlapped = OverlapPart{.phase = Phase::kBackward,
                                                              .stage = StageId{0},
                                                              .chunk = ChunkId{0},
                                                              .microbatch = MicrobatchId{0}}}));
  EXPECT_EQ(unit.microbatch, MicrobatchId{1});
  EXPECT_THAT(unit.deps, ElementsAre(at(g, 0, 0)));                 // B half <- 0F0
  EXPECT_THAT(g.task(at(g, 0, 2)).deps, ElementsAre(at(g, 0, 1)));  // 0B1 <- F half
  EXPECT_EQ(graph_to_rows(g), rows);
}

TEST(RowsToGraph, PeerThatDiffersFromTheOwnerIsKept) {
  // Stage 1 is computed on rank 1, but rank 0 ships this activation to rank 2.
  ActionRows rows = parse_rows(
      "rank 0: 0F0 0SEND_F0@2\n"
      "rank 1: 1F0\n"
      "rank 2: 1RECV_F0\n");
  Graph g = rows_to_graph(rows);
  EXPECT_EQ(g.task(at(g, 2, 0)).op, TaskOp(Recv{.peer = RankId{0}, .tag = 0}));
  EXPECT_EQ(graph_to_rows(g), rows);
}

TEST(RowsToGraph, IdleSlotsAreDropped) {
  ActionRows with_idles = parse_rows("rank 0: _ 0F0 _ _ 0B0 _\n");
  EXPECT_EQ(graph_to_rows(rows_to_graph(with_idles)), parse_rows("rank 0: 0F0 0B0\n"));
}

// PyTorch's compute_comms CSV of a 2-rank zero-bubble schedule (I and W split), idle cells kept.
TEST(RowsToGraph, PyTorchCommsCsvBuildsAValidGraph) {
  ActionRows rows = parse_csv(
      "0F0,0SEND_F0,0F1,0SEND_F1,,0RECV_B0,0I0,0W0,0RECV_B1,0I1,0W1\n"
      "1RECV_F0,1F0,1RECV_F1,1I0,1SEND_B0,1F1,1W0,1I1,1SEND_B1,1W1\n");
  Graph g = rows_to_graph(rows);
  EXPECT_EQ(g.num_tasks(), 20);                                     // 21 cells, one idle
  EXPECT_THAT(g.task(at(g, 1, 5)).deps, ElementsAre(at(g, 1, 2)));  // 1F1 <- 1RECV_F1
  EXPECT_THAT(g.task(at(g, 1, 4)).deps, ElementsAre(at(g, 1, 3)));  // 1SEND_B0 <- 1I0
  EXPECT_THAT(g.task(at(g, 1, 6)).deps, ElementsAre(at(g, 1, 3)));  // 1W0 <- 1I0
  // On rank 0 the idle cell is gone: 0I1 is the 9th task; it waits for 0F1 and 0RECV_B1.
  EXPECT_THAT(g.task(at(g, 0, 8)).deps, UnorderedElementsAre(at(g, 0, 2), at(g, 0, 7)));
}

// Conversion problems: collected, each naming rank, action and token.

TEST(RowsToGraphError, UndeclaredGroup) {
  EXPECT_THAT(
      [] {
        (void)rows_to_graph(parse_rows("group dp: 0\nrank 0: 0F0 ALL_REDUCE[dq#0,bytes=4]\n"));
      },
      ThrowsMessage<InvalidGraph>(
          HasSubstr("rank 0 action 1 \"ALL_REDUCE[dq#0,bytes=4]\": group \"dq\" is not declared; "
                    "expected a \"group dq: <ranks>\" line before the rank rows")));
}

TEST(RowsToGraphError, PeerOfAStageWithoutOwner) {
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("rank 0: 0F0 0SEND_F0\n")); },
              ThrowsMessage<InvalidGraph>(HasSubstr(
                  "rank 0 action 1 \"0SEND_F0\": cannot infer the peer: stage 1 has no owner; "
                  "expected exactly one rank computing stage 1, or an explicit @<peer>")));
}

TEST(RowsToGraphError, WaitWithoutEarlierAction) {
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("rank 0: _ WAIT(0F0) 0F0\n")); },
              ThrowsMessage<InvalidGraph>(HasSubstr(
                  "rank 0 action 1 \"WAIT(0F0)\": no earlier \"0F0\" on rank 0; expected WAIT to "
                  "follow the action it awaits")));
}

TEST(RowsToGraphError, PyTorchFsdpActionsHaveNoGraphForm) {
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("rank 0: 0UNSHARD 0F0 0RESHARD\n")); },
              ThrowsMessage<InvalidGraph>(HasSubstr(
                  "rank 0 action 0 \"0UNSHARD\": UNSHARD has no graph form (it carries no group "
                  "or size); expected the collectives it stands for, e.g. "
                  "ALL_GATHER[<group>#<seq>,bytes=<n>]")));
}

TEST(RowsToGraphError, GroupRankOutOfRange) {
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("group dp: 0 5\nrank 0: 0F0\nrank 1: 0F0\n")); },
              ThrowsMessage<InvalidGraph>(
                  HasSubstr("group \"dp\": rank 5 is out of range; expected 0..1")));
}

TEST(RowsToGraphError, EveryProblemIsCollected) {
  ActionRows rows = parse_rows(
      "rank 0: 0UNSHARD 0F0 0SEND_F0 ALL_REDUCE[x#0,bytes=1] 0REDUCE_GRAD\n"
      "rank 1: WAIT(1F0)\n");
  try {
    (void)rows_to_graph(rows);
    FAIL() << "expected InvalidGraph";
  } catch (const InvalidGraph& e) {
    EXPECT_EQ(e.problems().size(), 5u);
    EXPECT_THAT(e.what(), HasSubstr("invalid graph: 5 problems"));
  }
}

TEST(RowsToGraphError, ValidatorProblemsAreReportedToo) {
  // Rank 1 never receives what rank 0 sends.
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("rank 0: 0F0 0SEND_F0\nrank 1: 1F0\n")); },
              ThrowsMessage<InvalidGraph>(HasSubstr("unmatched send")));
}

// graph_to_rows of graphs built directly: tasks without a text form.

TEST(GraphToRowsError, ForwardWithoutTagsHasNoTextForm) {
  GraphBuilder b;
  RankId r = b.add_rank();
  TaskId f = b.add(
      {.rank = r, .stream = b.add_stream(r, "compute"), .op = Compute{.phase = Phase::kForward}});
  Graph g = std::move(b).build();
  EXPECT_THAT([&] { (void)graph_to_rows(g); },
              ThrowsMessage<InvalidConfig>(describe_task(g.data(), f) +
                                           ": has no text form: forward needs a stage and a "
                                           "microbatch; expected both tags to be set"));
}

TEST(GraphToRowsError, OtherTransfersHaveNoTextForm) {
  GraphBuilder b;
  RankId r0 = b.add_rank();
  RankId r1 = b.add_rank();
  TaskId send = b.add({.rank = r0,
                       .stream = b.add_stream(r0, "x"),
                       .stage = StageId{0},
                       .microbatch = MicrobatchId{0},
                       .op = Send{.peer = r1, .what = P2PKind::kOther}});
  b.add({.rank = r1,
         .stream = b.add_stream(r1, "x"),
         .stage = StageId{1},
         .microbatch = MicrobatchId{0},
         .op = Recv{.peer = r0, .what = P2PKind::kOther}});
  Graph g = std::move(b).build();
  EXPECT_THAT([&] { (void)graph_to_rows(g); },
              ThrowsMessage<InvalidConfig>(describe_task(g.data(), send) +
                                           ": has no text form: p2p transfers of kind \"other\" "
                                           "have no action; expected activation or gradient"));
}

TEST(GraphToRows, DropsWhatTheTextFormHasNoWordsFor) {
  GraphBuilder b;
  RankId r = b.add_rank();
  StreamId main = b.add_stream(r, "main");
  b.add({.rank = r,
         .stream = main,
         .stage = StageId{0},
         .microbatch = MicrobatchId{2},
         .label = "fwd",
         .op = Compute{.phase = Phase::kForward, .flops = 1e9}});
  b.add({.rank = r,
         .stream = main,
         .stage = StageId{0},
         .microbatch = MicrobatchId{2},
         .op = Compute{.phase = Phase::kOptimizer}});
  EXPECT_EQ(graph_to_rows(std::move(b).build()), parse_rows("rank 0: 0F2 0STEP\n"));
}

}  // namespace
}  // namespace metron::ir

namespace metron::ir {
namespace {

TEST(RowsToGraph, GivesEveryTransferTheRequestedSize) {
  const Graph g = rows_to_graph(parse_rows("rank 0: 0F0 0SEND_F0\nrank 1: 1RECV_F0 1F0\n"),
                                {.p2p_bytes = 4096});
  int transfers = 0;
  for (const Task& t : g.tasks()) {
    if (const auto* s = std::get_if<Send>(&t.op)) {
      EXPECT_EQ(s->bytes, 4096);
      ++transfers;
    }
    if (const auto* r = std::get_if<Recv>(&t.op)) {
      EXPECT_EQ(r->bytes, 4096);
      ++transfers;
    }
  }
  EXPECT_EQ(transfers, 2);
}

// Issue 14, found by fuzz_rows_text: the neighbours of the last representable stage were computed
// as stage + 1 in int32 (signed overflow). The stage is legal; it simply has no neighbour above.
TEST(RowsToGraph, TheLastRepresentableStageHasNoNeighbourAbove) {
  const Graph g = rows_to_graph(parse_rows("rank 0: 2147483647B0\n"));
  EXPECT_EQ(g.num_tasks(), 1);
  EXPECT_THAT([] { (void)rows_to_graph(parse_rows("rank 0: 2147483647SEND_F0\n")); },
              ThrowsMessage<InvalidGraph>(HasSubstr("cannot infer the peer")));
}

// Issue 14, found by fuzz_graph_json: a JSON graph may name groups and streams with any string,
// and the text form wrote names it could not read back.
TEST(GraphToRowsError, NamesTheTextFormCannotSpellAreRefused) {
  GraphBuilder b;
  const RankId r = b.add_rank();
  const GroupId world = b.add_group("world", {r});
  const StreamId odd = b.add_stream(r, "dp%0");
  b.add({.rank = r,
         .stream = odd,
         .op = Collective{.op = CollectiveOp::kAllReduce, .group = world, .bytes = 64}});
  const Graph g = std::move(b).build();
  EXPECT_THAT([&] { (void)graph_to_rows(g); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "has no text form: stream name \"dp%0\" has characters the text form cannot "
                  "spell; expected letters, digits, '_', '-' and '.'")));

  GraphBuilder c;
  const RankId r0 = c.add_rank();
  c.add_group("w]x", {r0});
  const Graph h = std::move(c).build();
  EXPECT_THAT([&] { (void)graph_to_rows(h); },
              ThrowsMessage<InvalidConfig>(HasSubstr("group \"w]x\" has no text form")));
  EXPECT_THAT([] { (void)parse_rows("group g\xff: 0\nrank 0: 0F0\n"); },
              ThrowsMessage<ParseError>(HasSubstr(
                  "<text>:1:7: group name \"g\xff\" has characters the text form cannot spell")));
  EXPECT_TRUE(is_text_form_name("dp-intra.0_a"));
  EXPECT_FALSE(is_text_form_name(""));
}

}  // namespace
}  // namespace metron::ir
