// split_compute: Note [compute pieces] checked by hand on a small two-rank graph (piece ranges,
// issue order, moved dependencies and buffers, labels, shared-out work), the tasks it leaves
// whole, and a lowered 1F1B split at every layer that still validates and runs.

#include "metron/lowering/compute_split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::LayerRange;
using ir::TaskId;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

// Stage 0 of a 2-stage pipeline, one microbatch, 8 layers per stage:
//   rank 0: F(0)  SEND_F(1)  RECV_B(2)  B(3)  WAIT(B)(4)  STEP(5)
//   rank 1: RECV_F(6)  F(7)  B(8)  SEND_B(9)
// F allocates the activation stash that B uses and, with the send, the output tensor.
class ComputeSplit : public ::testing::Test {
 protected:
  ComputeSplit() {
    const ir::StreamId compute0 = b_.add_stream(r0_, "compute");
    const ir::StreamId send0 = b_.add_stream(r0_, "pp-send");
    const ir::StreamId recv0 = b_.add_stream(r0_, "pp-recv");
    const ir::StreamId compute1 = b_.add_stream(r1_, "compute");
    const ir::StreamId send1 = b_.add_stream(r1_, "pp-send");
    const ir::StreamId recv1 = b_.add_stream(r1_, "pp-recv");
    act_ = b_.add_buffer(r0_, 100, "activation s0 mb0");
    out_ = b_.add_buffer(r0_, 10, "output s0 mb0");
    f_ = b_.add(compute(r0_, compute0, ir::Phase::kForward, 0, {0, 8}, "0F0", 800.0));
    b_.task(f_).allocates = {act_, out_};
    send_ = b_.add({.rank = r0_,
                    .stream = send0,
                    .stage = ir::StageId{0},
                    .microbatch = ir::MicrobatchId{0},
                    .deps = {f_},
                    .uses = {out_},
                    .op = ir::Send{.peer = r1_, .bytes = 10, .tag = 1}});
    recv_ = b_.add(
        {.rank = r0_,
         .stream = recv0,
         .op = ir::Recv{.peer = r1_, .bytes = 10, .tag = 2, .what = ir::P2PKind::kGradient}});
    bwd_ = b_.add(compute(r0_, compute0, ir::Phase::kBackward, 0, {0, 8}, "0B0", 1600.0));
    b_.task(bwd_).deps = {recv_};
    b_.task(bwd_).uses = {act_};
    wait_ = b_.add({.rank = r0_, .op = ir::HostWait{.target = bwd_}});
    step_ = b_.add(compute(r0_, compute0, ir::Phase::kOptimizer, -1, {}, "STEP", 0.0));
    const TaskId r =
        b_.add({.rank = r1_, .stream = recv1, .op = ir::Recv{.peer = r0_, .bytes = 10, .tag = 1}});
    f1_ = b_.add(compute(r1_, compute1, ir::Phase::kForward, 1, {8, 16}, "1F0", 800.0));
    b_.task(f1_).deps = {r};
    const TaskId b1 = b_.add(compute(r1_, compute1, ir::Phase::kBackward, 1, {8, 16}, "1B0", 0.0));
    b_.add({.rank = r1_,
            .stream = send1,
            .deps = {b1},
            .op = ir::Send{.peer = r0_, .bytes = 10, .tag = 2, .what = ir::P2PKind::kGradient}});
  }

  static ir::Task compute(ir::RankId rank, ir::StreamId stream, ir::Phase phase, std::int32_t stage,
                          LayerRange layers, const char* label, double flops) {
    return {.rank = rank,
            .stream = stream,
            .stage = ir::StageId{stage},
            .microbatch = ir::MicrobatchId{stage < 0 ? -1 : 0},
            .layers = layers,
            .label = label,
            .op = ir::Compute{.phase = phase, .flops = flops}};
  }
  const ir::Task& task(TaskId t) const { return b_.data().tasks[t.index()]; }
  double flops(TaskId t) const { return std::get<ir::Compute>(task(t).op).flops; }
  const std::vector<TaskId>& order(ir::RankId r) const { return b_.data().issue_order[r.index()]; }

  ir::GraphBuilder b_;
  ir::RankId r0_ = b_.add_rank();
  ir::RankId r1_ = b_.add_rank();
  ir::BufferId act_, out_;
  TaskId f_, send_, recv_, bwd_, wait_, step_, f1_;
};

TEST_F(ComputeSplit, ForwardRunsUpAndBackwardFromTheTop) {
  // F [0,8) cut at 2 and 5 (given unsorted): [0,2) [2,5) [5,8), the last keeping F's id.
  // B [0,8) cut at 3: the top [3,8) runs first, B keeps [0,3). New ids follow the 10 tasks.
  const auto pieces =
      split_compute(b_, {{.task = f_, .cuts = {5, 2}}, {.task = bwd_, .cuts = {3}}});
  const TaskId f_a{10}, f_b{11}, b_top{12};
  ASSERT_THAT(pieces, ElementsAre(ElementsAre(f_a, f_b, f_), ElementsAre(b_top, bwd_)));
  EXPECT_EQ(task(f_a).layers, (LayerRange{0, 2}));
  EXPECT_EQ(task(f_b).layers, (LayerRange{2, 5}));
  EXPECT_EQ(task(f_).layers, (LayerRange{5, 8}));
  EXPECT_EQ(task(b_top).layers, (LayerRange{3, 8}));
  EXPECT_EQ(task(bwd_).layers, (LayerRange{0, 3}));
  // Pieces come right before their task; rank 1 is untouched.
  EXPECT_THAT(order(r0_), ElementsAre(f_a, f_b, f_, send_, recv_, b_top, bwd_, wait_, step_));
  EXPECT_THAT(order(r1_), ElementsAre(TaskId{6}, f1_, TaskId{8}, TaskId{9}));
  // Same stream and tags; labels carry inclusive layers.
  for (TaskId t : {f_a, f_b}) {
    EXPECT_EQ(task(t).stream, task(f_).stream);
    EXPECT_EQ(task(t).stage, ir::StageId{0});
    EXPECT_EQ(task(t).microbatch, ir::MicrobatchId{0});
  }
  EXPECT_EQ(task(f_a).label, "0F0 [L0-1]");
  EXPECT_EQ(task(f_b).label, "0F0 [L2-4]");
  EXPECT_EQ(task(f_).label, "0F0 [L5-7]");
  EXPECT_EQ(task(b_top).label, "0B0 [L3-7]");
  EXPECT_EQ(task(bwd_).label, "0B0 [L0-2]");
  // Work by layer count: 800 flops over 8 layers is 100 a layer.
  EXPECT_DOUBLE_EQ(flops(f_a), 200.0);
  EXPECT_DOUBLE_EQ(flops(f_b), 300.0);
  EXPECT_DOUBLE_EQ(flops(f_), 300.0);
  EXPECT_DOUBLE_EQ(flops(b_top), 1000.0);  // 1600 / 8 * 5
  EXPECT_DOUBLE_EQ(flops(bwd_), 600.0);
  EXPECT_NO_THROW((void)std::move(b_).build());
}

TEST_F(ComputeSplit, FirstPieceTakesDependenciesAndAllocationsAndEveryPieceUses) {
  split_compute(b_, {{.task = f_, .cuts = {4}}, {.task = bwd_, .cuts = {4}}});
  const TaskId f_low{10}, b_top{11};
  EXPECT_THAT(task(f_low).allocates, ElementsAre(act_, out_));
  EXPECT_THAT(task(f_).allocates, IsEmpty());
  EXPECT_THAT(task(b_top).deps, ElementsAre(recv_));
  EXPECT_THAT(task(bwd_).deps, IsEmpty());
  EXPECT_THAT(task(b_top).uses, ElementsAre(act_));
  EXPECT_THAT(task(bwd_).uses, ElementsAre(act_));
  // What waited for the task waits for its last piece, which kept the id.
  EXPECT_THAT(task(send_).deps, ElementsAre(f_));
  EXPECT_EQ(std::get<ir::HostWait>(task(wait_).op).target, bwd_);
  EXPECT_NO_THROW((void)std::move(b_).build());
}

TEST_F(ComputeSplit, CutsOutsideTheRangeAndRepeatsAreIgnored) {
  // Only 4 falls strictly inside (0, 8): two pieces.
  const auto pieces = split_compute(b_, {{.task = f_, .cuts = {0, 8, -1, 9, 4, 4}}});
  ASSERT_THAT(pieces, ElementsAre(ElementsAre(TaskId{10}, f_)));
  EXPECT_EQ(task(TaskId{10}).layers, (LayerRange{0, 4}));
  EXPECT_EQ(task(f_).layers, (LayerRange{4, 8}));
}

TEST_F(ComputeSplit, TasksLeftWholeReturnThemselvesAndChangeNothing) {
  // Pieces of an F&B unit would need two ranges at once: DualPipe's units stay whole.
  const TaskId unit =
      b_.add(compute(r1_, task(f1_).stream, ir::Phase::kForward, 1, {8, 16}, "unit", 0.0));
  std::get<ir::Compute>(b_.task(unit).op).overlapped = ir::OverlapPart{
      .stage = ir::StageId{1}, .microbatch = ir::MicrobatchId{1}, .layers = {8, 16}};
  const ir::GraphData before = b_.data();
  const auto pieces = split_compute(b_, {{.task = send_, .cuts = {4}},
                                         {.task = step_, .cuts = {4}},
                                         {.task = unit, .cuts = {12}},
                                         {.task = f1_, .cuts = {8, 16, 20}}});
  EXPECT_THAT(pieces, ElementsAre(ElementsAre(send_), ElementsAre(step_), ElementsAre(unit),
                                  ElementsAre(f1_)));
  EXPECT_EQ(b_.data(), before);
}

TEST_F(ComputeSplit, RecomputeRunsUpAndWeightGradientFromTheTop) {
  // Appended to rank 1 as tasks 10 (R) and 11 (W), both over stage 1's [8, 16), cut at 12.
  const ir::StreamId stream = task(f1_).stream;
  const TaskId r = b_.add(compute(r1_, stream, ir::Phase::kRecompute, 1, {8, 16}, "1R0", 0.0));
  const TaskId w = b_.add(compute(r1_, stream, ir::Phase::kBackwardWeight, 1, {8, 16}, "1W0", 0.0));
  const auto pieces = split_compute(b_, {{.task = r, .cuts = {12}}, {.task = w, .cuts = {12}}});
  ASSERT_THAT(pieces, ElementsAre(ElementsAre(TaskId{12}, r), ElementsAre(TaskId{13}, w)));
  EXPECT_EQ(task(TaskId{12}).layers, (LayerRange{8, 12}));
  EXPECT_EQ(task(r).layers, (LayerRange{12, 16}));
  EXPECT_EQ(task(TaskId{13}).layers, (LayerRange{12, 16}));
  EXPECT_EQ(task(w).layers, (LayerRange{8, 12}));
  EXPECT_THAT(order(r1_),
              ElementsAre(TaskId{6}, f1_, TaskId{8}, TaskId{9}, TaskId{12}, r, TaskId{13}, w));
}

TEST_F(ComputeSplit, RequestsForOneTaskAreMerged) {
  // Cuts 2 and 6 from two requests: three pieces, both requests get all of them.
  const auto pieces = split_compute(b_, {{.task = f_, .cuts = {6}}, {.task = f_, .cuts = {2}}});
  const std::vector<TaskId> expected = {TaskId{10}, TaskId{11}, f_};
  EXPECT_THAT(pieces, ElementsAre(expected, expected));
  EXPECT_EQ(task(TaskId{10}).layers, (LayerRange{0, 2}));
  EXPECT_EQ(task(TaskId{11}).layers, (LayerRange{2, 6}));
  EXPECT_EQ(task(f_).layers, (LayerRange{6, 8}));
  EXPECT_NO_THROW((void)std::move(b_).build());
}

TEST_F(ComputeSplit, UnknownTaskIsAnInvalidConfig) {
  EXPECT_THAT(
      [&] {
        split_compute(b_, {{.task = f_}, {.task = TaskId{99}, .cuts = {1}}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("split_compute: request 1 names task 99; expected a task 0..9")));
}

TEST(RunsBackward, BackwardPhasesRunTopDownRecomputeDoesNot) {
  EXPECT_TRUE(runs_backward(ir::Phase::kBackward));
  EXPECT_TRUE(runs_backward(ir::Phase::kBackwardInput));
  EXPECT_TRUE(runs_backward(ir::Phase::kBackwardWeight));
  EXPECT_FALSE(runs_backward(ir::Phase::kForward));
  EXPECT_FALSE(runs_backward(ir::Phase::kRecompute));
  EXPECT_FALSE(runs_backward(ir::Phase::kOptimizer));
}

// The lowered 1F1B of lower_test.cc (p = 2, m = 3) with split backward and 4 layers per stage,
// every compute task cut at every layer boundary: each F, I and W becomes 4 one-layer pieces,
// and the graph still validates and runs.
TEST(ComputeSplitLowered, EveryLayerBoundaryOnA1F1B) {
  const ir::ActionRows order = ir::parse_rows(
      "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
      "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
  ir::GraphBuilder b = lower_unvalidated(order, {.split_backward = true, .layers = {.layers = 8}});
  std::vector<SplitRequest> requests;
  for (std::size_t i = 0; i < b.data().tasks.size(); ++i) {
    const ir::Task& t = b.data().tasks[i];
    requests.push_back({.task = TaskId{static_cast<std::int32_t>(i)},
                        .cuts = {t.layers.first + 1, t.layers.first + 2, t.layers.first + 3}});
  }
  const auto pieces = split_compute(b, requests);
  std::size_t split = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ir::Task& t = b.data().tasks[requests[i].task.index()];
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase == ir::Phase::kOptimizer) {
      EXPECT_EQ(pieces[i].size(), 1u);
      continue;
    }
    ++split;
    ASSERT_EQ(pieces[i].size(), 4u);
    // Stage s holds [4s, 4s + 4); forward pieces go up, backward ones down.
    const std::int32_t base = 4 * t.stage.value();
    for (std::int32_t k = 0; k < 4; ++k) {
      const std::int32_t layer = runs_backward(c->phase) ? base + 3 - k : base + k;
      EXPECT_EQ(b.data().tasks[pieces[i][static_cast<std::size_t>(k)].index()].layers,
                (LayerRange{layer, layer + 1}));
    }
  }
  EXPECT_EQ(split, 2u * 3u * 3u);  // 2 stages x 3 microbatches x (F, I, W)
  ir::Graph g = std::move(b).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
}

}  // namespace
}  // namespace metron::lowering
