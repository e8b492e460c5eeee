// add_intra_layer_collectives: Note [intra-layer collectives] checked by hand on a small two-rank
// graph (counts, bytes, streams, groups, sequence numbers, issue order, and who waits for what),
// on every phase, on DualPipe's F&B units, and on lowered graphs (with and without split compute).

#include "metron/lowering/intra_layer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/lowering/compute_split.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::CollectiveOp;
using ir::LayerRange;
using ir::Phase;
using ir::TaskId;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

// Stage 0 on rank 0 and stage 1 on rank 1, 3 layers each:
//   rank 0: F0(0)  SEND_F0(1)  F1(2)  RECV_B0(3)  B0(4)  WAIT(B0)(5)  STEP(6)
//   rank 1: RECV_F0(7)  F0(8)  B0(9)  SEND_B0(10)
// so new tasks get ids from 11 on, rank 0's first (the pass goes rank by rank).
class IntraLayer : public ::testing::Test {
 protected:
  IntraLayer() {
    const ir::StreamId compute0 = b_.add_stream(r0_, "compute");
    const ir::StreamId send0 = b_.add_stream(r0_, "pp-send");
    const ir::StreamId recv0 = b_.add_stream(r0_, "pp-recv");
    const ir::StreamId compute1 = b_.add_stream(r1_, "compute");
    const ir::StreamId send1 = b_.add_stream(r1_, "pp-send");
    const ir::StreamId recv1 = b_.add_stream(r1_, "pp-recv");
    f0_ = b_.add(compute(r0_, compute0, Phase::kForward, 0, 0, {0, 3}));
    send_ = b_.add({.rank = r0_,
                    .stream = send0,
                    .deps = {f0_},
                    .op = ir::Send{.peer = r1_, .bytes = 4, .tag = 1}});
    f1_ = b_.add(compute(r0_, compute0, Phase::kForward, 0, 1, {0, 3}));
    recv_ =
        b_.add({.rank = r0_,
                .stream = recv0,
                .op = ir::Recv{.peer = r1_, .bytes = 4, .tag = 2, .what = ir::P2PKind::kGradient}});
    b0_ = b_.add(compute(r0_, compute0, Phase::kBackward, 0, 0, {0, 3}));
    b_.task(b0_).deps = {recv_};
    wait_ = b_.add({.rank = r0_, .op = ir::HostWait{.target = b0_}});
    step_ = b_.add(compute(r0_, compute0, Phase::kOptimizer, 0, -1, {}));
    const TaskId r =
        b_.add({.rank = r1_, .stream = recv1, .op = ir::Recv{.peer = r0_, .bytes = 4, .tag = 1}});
    f_1_ = b_.add(compute(r1_, compute1, Phase::kForward, 1, 0, {3, 6}));
    b_.task(f_1_).deps = {r};
    b_1_ = b_.add(compute(r1_, compute1, Phase::kBackward, 1, 0, {3, 6}));
    send_1_ =
        b_.add({.rank = r1_,
                .stream = send1,
                .deps = {b_1_},
                .op = ir::Send{.peer = r0_, .bytes = 4, .tag = 2, .what = ir::P2PKind::kGradient}});
  }

  static ir::Task compute(ir::RankId rank, ir::StreamId stream, Phase phase, std::int32_t stage,
                          std::int32_t mb, LayerRange layers) {
    return {.rank = rank,
            .stream = stream,
            .stage = ir::StageId{stage},
            .microbatch = ir::MicrobatchId{mb},
            .layers = layers,
            .op = ir::Compute{.phase = phase}};
  }
  const ir::Task& task(TaskId t) const { return b_.data().tasks[t.index()]; }
  const ir::Collective& coll(TaskId t) const { return std::get<ir::Collective>(task(t).op); }
  std::string stream_name(TaskId t) const { return b_.data().streams[task(t).stream.index()].name; }
  std::string group(TaskId t) const { return b_.data().groups[coll(t).group.index()].name; }
  const std::vector<TaskId>& order(ir::RankId r) const { return b_.data().issue_order[r.index()]; }

  ir::GraphBuilder b_;
  ir::RankId r0_ = b_.add_rank();
  ir::RankId r1_ = b_.add_rank();
  TaskId f0_, send_, f1_, recv_, b0_, wait_, step_, f_1_, b_1_, send_1_;
};

LayerCollective blocking(GroupKind g, CollectiveOp op, std::int64_t bytes, std::int32_t per_layer) {
  return {.group = g, .op = op, .bytes = bytes, .per_layer = per_layer};
}

LayerCollective overlapped(GroupKind g, std::int64_t bytes) {
  return {.group = g, .op = CollectiveOp::kAllGather, .bytes = bytes, .overlapped = true};
}

// Sequence-parallel TP and EP: forward all-gather (2 a layer) then all-to-all (2 a layer),
// backward reduce-scatter (2 a layer). Every task covers 3 layers: counts of 6.
TEST_F(IntraLayer, BlockingCollectivesFollowTheTaskAndItsWaitersWaitForTheLast) {
  LayerCollective ag = blocking(GroupKind::kTensor, CollectiveOp::kAllGather, 10, 2);
  ag.dtype = ir::DType::kFp16;
  add_intra_layer_collectives(
      b_, {.forward = {ag, blocking(GroupKind::kExpert, CollectiveOp::kAllToAll, 7, 2)},
           .backward = {blocking(GroupKind::kTensor, CollectiveOp::kReduceScatter, 10, 2)}});
  // Rank 0: F0 -> 11 (tp), 12 (ep); F1 -> 13, 14; B0 -> 15. Rank 1: F -> 16, 17; B -> 18.
  const TaskId tp_f0{11}, ep_f0{12}, tp_f1{13}, ep_f1{14}, tp_b0{15};
  const TaskId tp_f_1{16}, ep_f_1{17}, tp_b_1{18};
  EXPECT_THAT(order(r0_), ElementsAre(f0_, tp_f0, ep_f0, send_, f1_, tp_f1, ep_f1, recv_, b0_,
                                      tp_b0, wait_, step_));
  EXPECT_THAT(order(r1_), ElementsAre(TaskId{7}, f_1_, tp_f_1, ep_f_1, b_1_, tp_b_1, send_1_));
  // Count = per_layer x 3 layers; bytes = count x entry bytes; dtype from the entry.
  EXPECT_EQ(coll(tp_f0), (ir::Collective{.op = CollectiveOp::kAllGather,
                                         .group = coll(tp_f0).group,
                                         .bytes = 60,
                                         .dtype = ir::DType::kFp16,
                                         .seq = 0,
                                         .count = 6}));
  EXPECT_EQ(coll(ep_f0).bytes, 42);
  EXPECT_EQ(coll(ep_f0).op, CollectiveOp::kAllToAll);
  EXPECT_EQ(coll(tp_b0).op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(coll(tp_b0).count, 6);
  EXPECT_EQ(task(tp_f0).label, "tp all-gather x6 (F mb0)");
  EXPECT_EQ(task(ep_f1).label, "ep all-to-all x6 (F mb1)");
  EXPECT_EQ(task(tp_b0).label, "tp reduce-scatter x6 (B mb0)");
  // Tags of the compute task.
  EXPECT_EQ(task(tp_f1).stage, ir::StageId{0});
  EXPECT_EQ(task(tp_f1).microbatch, ir::MicrobatchId{1});
  EXPECT_EQ(task(tp_f1).layers, (LayerRange{0, 3}));
  EXPECT_EQ(task(tp_b_1).layers, (LayerRange{3, 6}));
  // Streams and one-member groups per rank and kind, sequence numbers in issue order.
  EXPECT_EQ(stream_name(tp_f0), "tp");
  EXPECT_EQ(stream_name(ep_f0), "ep");
  EXPECT_EQ(task(tp_f_1).rank, r1_);
  EXPECT_EQ(group(tp_f0), "tp0");
  EXPECT_EQ(group(ep_f1), "ep0");
  EXPECT_EQ(group(tp_b_1), "tp1");
  EXPECT_THAT(b_.data().groups[coll(tp_f_1).group.index()].ranks, ElementsAre(r1_));
  EXPECT_EQ(b_.data().groups.size(), 4u);
  EXPECT_EQ(coll(tp_f1).seq, 1);
  EXPECT_EQ(coll(tp_b0).seq, 2);
  EXPECT_EQ(coll(ep_f1).seq, 1);
  EXPECT_EQ(coll(tp_b_1).seq, 1);
  // The chain: tp after the task, ep after tp (another stream).
  EXPECT_THAT(task(tp_f0).deps, ElementsAre(f0_));
  EXPECT_THAT(task(ep_f0).deps, ElementsAre(tp_f0));
  EXPECT_THAT(task(tp_b0).deps, ElementsAre(b0_));
  // Waiters: the send of F0's output, the next kernel on the stream (F1, then B0, then STEP),
  // the host wait (retargeted) and rank 1's gradient send.
  EXPECT_THAT(task(send_).deps, ElementsAre(f0_, ep_f0));
  EXPECT_THAT(task(f1_).deps, ElementsAre(ep_f0));
  EXPECT_THAT(task(b0_).deps, ElementsAre(recv_, ep_f1));
  EXPECT_EQ(std::get<ir::HostWait>(task(wait_).op).target, tp_b0);
  EXPECT_THAT(task(step_).deps, ElementsAre(tp_b0));
  EXPECT_THAT(task(b_1_).deps, ElementsAre(ep_f_1));
  EXPECT_THAT(task(send_1_).deps, ElementsAre(b_1_, tp_b_1));
  ir::Graph g = std::move(b_).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
}

// CP's overlapped exchange (1 a layer, so count 3) next to a blocking TP all-reduce (2 a layer).
TEST_F(IntraLayer, OverlappedCollectivesGoBeforeTheTaskWithItsDependencies) {
  add_intra_layer_collectives(
      b_, {.forward = {overlapped(GroupKind::kContext, 5),
                       blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 10, 2)}});
  // Rank 0: F0 -> 11 (cp), 12 (tp); F1 -> 13, 14. Rank 1: F -> 15, 16.
  const TaskId cp_f0{11}, tp_f0{12}, cp_f1{13}, tp_f1{14}, cp_f_1{15}, tp_f_1{16};
  EXPECT_THAT(order(r0_),
              ElementsAre(cp_f0, f0_, tp_f0, send_, cp_f1, f1_, tp_f1, recv_, b0_, wait_, step_));
  EXPECT_EQ(coll(cp_f0).count, 3);
  EXPECT_EQ(coll(cp_f0).bytes, 15);
  EXPECT_EQ(stream_name(cp_f0), "cp");
  EXPECT_EQ(group(cp_f0), "cp0");
  EXPECT_EQ(task(cp_f0).label, "cp all-gather x3 (F mb0)");
  // The exchange depends on what the task depends on (F1's stream predecessor F0 is done only
  // with its TP all-reduce); the TP all-reduce follows both the task and the exchange.
  EXPECT_THAT(task(cp_f0).deps, IsEmpty());
  EXPECT_THAT(task(cp_f1).deps, ElementsAre(tp_f0));
  EXPECT_THAT(task(cp_f_1).deps, ElementsAre(TaskId{7}));
  EXPECT_THAT(task(tp_f0).deps, ElementsAre(f0_, cp_f0));
  EXPECT_THAT(task(tp_f_1).deps, ElementsAre(f_1_, cp_f_1));
  EXPECT_THAT(task(send_).deps, ElementsAre(f0_, tp_f0));
  // No backward entries: B0 only waits for F1's unit, as its stream successor.
  EXPECT_THAT(task(b0_).deps, ElementsAre(recv_, tp_f1));
  EXPECT_EQ(std::get<ir::HostWait>(task(wait_).op).target, b0_);
  EXPECT_NO_THROW((void)std::move(b_).build());
}

// CP alone: nothing after the task implies the exchange, so waiters wait for both.
TEST_F(IntraLayer, WithOnlyOverlappedCollectivesWaitersWaitForTaskAndExchange) {
  add_intra_layer_collectives(b_, {.forward = {overlapped(GroupKind::kContext, 5)},
                                   .backward = {overlapped(GroupKind::kContext, 5)}});
  // Rank 0: F0 -> 11, F1 -> 12, B0 -> 13, the extra host wait 14. Rank 1: 15, 16.
  const TaskId cp_f0{11}, cp_f1{12}, cp_b0{13}, extra_wait{14}, cp_b_1{16};
  EXPECT_THAT(order(r0_), ElementsAre(cp_f0, f0_, send_, cp_f1, f1_, recv_, cp_b0, b0_, extra_wait,
                                      wait_, step_));
  EXPECT_THAT(task(send_).deps, ElementsAre(f0_, cp_f0));
  EXPECT_THAT(task(f1_).deps, ElementsAre(cp_f0));
  EXPECT_THAT(task(cp_b0).deps, ElementsAre(recv_, cp_f1));
  // A host wait has one target: the original keeps B0, a new one waits for the exchange.
  EXPECT_EQ(std::get<ir::HostWait>(task(wait_).op).target, b0_);
  EXPECT_EQ(std::get<ir::HostWait>(task(extra_wait).op).target, cp_b0);
  EXPECT_THAT(task(step_).deps, ElementsAre(cp_b0));
  EXPECT_THAT(task(send_1_).deps, ElementsAre(b_1_, cp_b_1));
  ir::Graph g = std::move(b_).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
}

// Note [pipeline scatter/gather]: an all-gather after each receive, which the receive's
// consumers (and the host wait on them) wait for, and its stream successor does not. A second
// transfer 0 -> 1 (ids 11, 12) follows, so rank 1's receive stream holds two receives.
TEST_F(IntraLayer, ReceivedEntriesFollowEachReceiveAndItsConsumersWaitForThem) {
  const TaskId send2 = b_.add({.rank = r0_,
                               .stream = task(send_).stream,
                               .op = ir::Send{.peer = r1_, .bytes = 4, .tag = 3}});
  const TaskId recv2 = b_.add({.rank = r1_,
                               .stream = task(TaskId{7}).stream,
                               .op = ir::Recv{.peer = r0_, .bytes = 4, .tag = 3}});
  add_intra_layer_collectives(
      b_, {.backward = {blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 10, 2)},
           .received = {blocking(GroupKind::kTensor, CollectiveOp::kAllGather, 16, 1)}});
  // Rank 0: RECV_B0 -> 13, B0 -> 14. Rank 1: RECV_F0 -> 15, B -> 16, the second receive -> 17.
  const TaskId ag_b0{13}, ar_b0{14}, ag_f_1{15}, ar_b_1{16}, ag_2{17};
  EXPECT_THAT(order(r0_),
              ElementsAre(f0_, send_, f1_, recv_, ag_b0, b0_, ar_b0, wait_, step_, send2));
  EXPECT_THAT(order(r1_), ElementsAre(TaskId{7}, ag_f_1, f_1_, b_1_, ar_b_1, send_1_, recv2, ag_2));
  // Once per receive (no layers to multiply by), the entry's bytes, the rank's own tp group in
  // issue order with the layers' collectives.
  EXPECT_EQ(coll(ag_b0), (ir::Collective{.op = CollectiveOp::kAllGather,
                                         .group = coll(ar_b0).group,
                                         .bytes = 16,
                                         .dtype = ir::DType::kBf16,
                                         .seq = 0,
                                         .count = 1}));
  EXPECT_EQ(coll(ar_b0).seq, 1);
  EXPECT_EQ(coll(ag_2).seq, 2);
  EXPECT_EQ(group(ag_f_1), "tp1");
  EXPECT_EQ(stream_name(ag_b0), "tp");
  EXPECT_EQ(task(ag_b0).label, "tp all-gather x1 (B recv)");
  EXPECT_EQ(task(ag_f_1).label, "tp all-gather x1 (F recv)");
  EXPECT_THAT(task(ag_b0).deps, ElementsAre(recv_));
  EXPECT_THAT(task(ag_2).deps, ElementsAre(recv2));
  // The consumers wait for the gather; the next receive on the stream does not.
  EXPECT_THAT(task(b0_).deps, ElementsAre(recv_, ag_b0));
  EXPECT_THAT(task(f_1_).deps, ElementsAre(TaskId{7}, ag_f_1));
  EXPECT_THAT(task(recv2).deps, IsEmpty());
  EXPECT_EQ(std::get<ir::HostWait>(task(wait_).op).target, ar_b0);
  ir::Graph g = std::move(b_).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
}

// A host wait on a receive waits for its gather (Megatron's batched exchange blocks until the
// received tensor is whole).
TEST(IntraLayerReceived, AHostWaitOnAReceiveWaitsForItsGather) {
  ir::GraphBuilder b = lower_unvalidated(ir::parse_rows("rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n"),
                                         {.p2p = P2PMode::kBatched, .layers = {.layers = 2}});
  add_intra_layer_collectives(
      b, {.received = {blocking(GroupKind::kTensor, CollectiveOp::kAllGather, 16, 1)}});
  ir::Graph g = std::move(b).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  int gathers = 0;
  int waits_on_receives = 0;
  for (const ir::Task& t : g.tasks()) {
    if (std::holds_alternative<ir::Collective>(t.op)) ++gathers;
    if (const auto* w = std::get_if<ir::HostWait>(&t.op)) {
      waits_on_receives += g.task(w->target).kind() == ir::TaskKind::kRecv ? 1 : 0;
    }
  }
  EXPECT_EQ(gathers, 2);  // rank 1 receives the activation, rank 0 the gradient
  EXPECT_EQ(waits_on_receives, 0);
}

TEST(IntraLayerPhases, EachPhaseTakesItsListAndOthersNone) {
  ir::GraphBuilder b;
  const ir::RankId r = b.add_rank();
  const ir::StreamId s = b.add_stream(r, "compute");
  const auto add = [&](Phase phase, std::int32_t stage, LayerRange layers) {
    return b.add({.rank = r,
                  .stream = s,
                  .stage = ir::StageId{stage},
                  .layers = layers,
                  .op = ir::Compute{.phase = phase}});
  };
  const TaskId recompute = add(Phase::kRecompute, 0, {0, 2});
  const TaskId input = add(Phase::kBackwardInput, 0, {0, 2});
  const TaskId weight = add(Phase::kBackwardWeight, 0, {0, 2});
  add(Phase::kOptimizer, 0, {0, 2});  // never communicates inside a layer
  add(Phase::kForward, -1, {0, 2});   // no stage
  add(Phase::kForward, 0, {});        // no layers
  const auto entry = [](GroupKind g, std::int32_t per_layer) {
    return blocking(g, CollectiveOp::kAllReduce, 1, per_layer);
  };
  add_intra_layer_collectives(b, {.forward = {entry(GroupKind::kTensor, 1)},
                                  .backward = {entry(GroupKind::kTensor, 100)},
                                  .backward_input = {entry(GroupKind::kTensor, 3)},
                                  .backward_weight = {entry(GroupKind::kExpert, 1)},
                                  .recompute = {entry(GroupKind::kTensor, 1)}});
  // Six tasks, then R -> 6 (1 x 2 layers), I -> 7 (3 x 2), W -> 8 (ep, 1 x 2).
  ASSERT_EQ(b.data().tasks.size(), 9u);
  const auto count = [&](std::size_t i) {
    return std::get<ir::Collective>(b.data().tasks[i].op).count;
  };
  EXPECT_EQ(count(6), 2);
  EXPECT_EQ(count(7), 6);
  EXPECT_EQ(count(8), 2);
  EXPECT_THAT(b.data().tasks[6].deps, ElementsAre(recompute));
  EXPECT_THAT(b.data().tasks[7].deps, ElementsAre(input));
  EXPECT_THAT(b.data().tasks[8].deps, ElementsAre(weight));
  EXPECT_EQ(b.data().tasks[6].label, "tp all-reduce x2 (R)");
  EXPECT_EQ(b.data().tasks[8].label, "ep all-reduce x2 (W)");
  EXPECT_NO_THROW((void)std::move(b).build());
}

TEST(IntraLayerDualPipe, FAndBUnitGetsBothHalvesAfterIt) {
  ir::GraphBuilder b;
  const ir::RankId r = b.add_rank();
  const ir::StreamId s = b.add_stream(r, "compute");
  const TaskId unit =
      b.add({.rank = r,
             .stream = s,
             .stage = ir::StageId{0},
             .chunk = ir::ChunkId{0},
             .microbatch = ir::MicrobatchId{2},
             .layers = {0, 3},
             .op = ir::Compute{.phase = Phase::kForward,
                               .overlapped = ir::OverlapPart{.phase = Phase::kBackward,
                                                             .stage = ir::StageId{1},
                                                             .chunk = ir::ChunkId{1},
                                                             .microbatch = ir::MicrobatchId{0},
                                                             .layers = {3, 6}}}});
  const TaskId next = b.add({.rank = r, .stream = s, .op = ir::Compute{.phase = Phase::kOther}});
  add_intra_layer_collectives(
      b, {.forward = {blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 1, 2)},
          .backward = {blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 1, 2),
                       blocking(GroupKind::kExpert, CollectiveOp::kAllToAll, 1, 1)}});
  // Forward half: tp x6 (2); backward half: tp x6 (3, FIFO after 2 on "tp"), ep x3 (4).
  const auto& tasks = b.data().tasks;
  EXPECT_THAT(b.data().issue_order[0], ElementsAre(unit, TaskId{2}, TaskId{3}, TaskId{4}, next));
  EXPECT_THAT(tasks[2].deps, ElementsAre(unit));
  EXPECT_THAT(tasks[3].deps, IsEmpty());
  EXPECT_THAT(tasks[4].deps, ElementsAre(TaskId{3}));
  EXPECT_THAT(tasks[next.index()].deps, ElementsAre(TaskId{4}));
  EXPECT_EQ(tasks[2].label, "tp all-reduce x6 (F mb2)");
  EXPECT_EQ(tasks[3].label, "tp all-reduce x6 (B mb0)");
  EXPECT_EQ(tasks[3].stage, ir::StageId{1});
  EXPECT_EQ(tasks[3].chunk, ir::ChunkId{1});
  EXPECT_EQ(tasks[3].layers, (LayerRange{3, 6}));
  EXPECT_EQ(std::get<ir::Collective>(tasks[4].op).count, 3);
  EXPECT_EQ(std::get<ir::Collective>(tasks[3].op).seq, 1);
  EXPECT_NO_THROW((void)std::move(b).build());
}

TEST_F(IntraLayer, NoEntriesChangeNothing) {
  const ir::GraphData before = b_.data();
  add_intra_layer_collectives(b_, {});
  EXPECT_EQ(b_.data(), before);
}

TEST_F(IntraLayer, BadEntriesAreInvalidConfig) {
  EXPECT_THAT(
      [&] {
        add_intra_layer_collectives(
            b_, {.backward_input = {blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 1, 1),
                                    blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 1, 0)}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("intra-layer collectives: backward_input[1]: per_layer is 0; expected >= 1")));
  EXPECT_THAT(
      [&] {
        add_intra_layer_collectives(
            b_, {.forward = {blocking(GroupKind::kExpert, CollectiveOp::kAllToAll, -3, 1)}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("intra-layer collectives: forward[0]: bytes is -3; expected >= 0")));
}

// Megatron 1F1B (p = 2, m = 3) lowered with 8 layers (4 a stage) and TP all-reduces, 2 a layer
// in forward and backward: one collective of count 8 after each of the 12 F and B tasks.
TEST(IntraLayerLowered, OneFOneBWithTensorParallelism) {
  ir::GraphBuilder b = lower_unvalidated(ir::parse_rows("rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
                                                        "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n"),
                                         {.layers = {.layers = 8}});
  const LayerCollective tp = blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 16, 2);
  add_intra_layer_collectives(b, {.forward = {tp}, .backward = {tp}});
  ir::Graph g = std::move(b).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  std::int32_t collectives = 0;
  for (std::int32_t i = 0; i < g.num_tasks(); ++i) {
    const ir::Task& t = g.task(TaskId{i});
    if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
      ++collectives;
      EXPECT_EQ(c->count, 8);
      EXPECT_EQ(c->bytes, 128);
      // It follows its compute task, and the next kernel on that stream waits for it.
      const TaskId compute = t.deps.at(0);
      EXPECT_EQ(g.task(compute).microbatch, t.microbatch);
      const TaskId next = g.stream_successor(compute);
      if (next.valid()) {
        EXPECT_THAT(g.task(next).deps, ::testing::Contains(TaskId{i}));
      }
    }
  }
  EXPECT_EQ(collectives, 12);
}

// Split first, then collectives: each piece gets its own (count by its layers), and the next
// piece waits for the previous piece's all-reduce.
TEST_F(IntraLayer, PiecesOfASplitTaskGetTheirOwnCollectives) {
  split_compute(b_, {{.task = f0_, .cuts = {1}}});  // piece 11 [0,1), F0 keeps [1,3)
  const TaskId piece{11};
  add_intra_layer_collectives(
      b_, {.forward = {blocking(GroupKind::kTensor, CollectiveOp::kAllReduce, 10, 2)}});
  // Rank 0: piece -> 12 (x2), F0 -> 13 (x4), F1 -> 14 (x6).
  EXPECT_THAT(order(r0_), ElementsAre(piece, TaskId{12}, f0_, TaskId{13}, send_, f1_, TaskId{14},
                                      recv_, b0_, wait_, step_));
  EXPECT_EQ(coll(TaskId{12}).count, 2);
  EXPECT_EQ(coll(TaskId{13}).count, 4);
  EXPECT_THAT(task(f0_).deps, ElementsAre(TaskId{12}));
  EXPECT_THAT(task(send_).deps, ElementsAre(f0_, TaskId{13}));
  EXPECT_NO_THROW((void)std::move(b_).build());
}

}  // namespace
}  // namespace metron::lowering
