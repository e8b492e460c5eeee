// assign_layers: every mode (even, explicit per-stage, Megatron's first/last-stage counts) and
// every error path (type and message), then the graph pass that tags compute tasks.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/rows_graph.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using R = ir::LayerRange;

TEST(AssignLayers, EvenSplit) {
  EXPECT_THAT(assign_layers({.layers = 12}, 4), ElementsAre(R{0, 3}, R{3, 6}, R{6, 9}, R{9, 12}));
  EXPECT_THAT(assign_layers({.layers = 0}, 2), ElementsAre(R{0, 0}, R{0, 0}));
}

TEST(AssignLayers, EvenSplitNamesTheNearestValidCounts) {
  EXPECT_THAT([] { assign_layers({.layers = 10}, 4); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "layer assignment: 10 layers do not split evenly over 4 stages; expected a "
                  "multiple of 4 (nearest valid layer counts: 8 or 12)")));
  EXPECT_THAT([] { assign_layers({.layers = 3}, 4); },
              ThrowsMessage<InvalidConfig>(HasSubstr("(nearest valid layer counts: 4)")));
  EXPECT_THAT(
      [] { assign_layers({.layers = -4}, 4); },
      ThrowsMessage<InvalidConfig>(HasSubstr("layer assignment: layers is -4; expected >= 0")));
}

TEST(AssignLayers, ExplicitCountsPerStage) {
  // Empty stages are allowed (Megatron's layout strings allow them too).
  EXPECT_THAT(assign_layers({.per_stage = {3, 0, 5}}, 3), ElementsAre(R{0, 3}, R{3, 3}, R{3, 8}));
  EXPECT_THAT(assign_layers({.layers = 8, .per_stage = {3, 0, 5}}, 3),
              ElementsAre(R{0, 3}, R{3, 3}, R{3, 8}));
}

TEST(AssignLayers, ExplicitCountsErrors) {
  EXPECT_THAT(
      [] {
        assign_layers({.per_stage = {3, 5}}, 3);
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("layer assignment: per_stage lists 2 counts for 3 stages; expected "
                    "one count per stage")));
  EXPECT_THAT(
      [] {
        assign_layers({.per_stage = {3, -1, 5}}, 3);
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("layer assignment: per_stage[1] (stage 1) is -1; expected >= 0")));
  EXPECT_THAT(
      [] {
        assign_layers({.layers = 9, .per_stage = {3, 5}}, 2);
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("layer assignment: per_stage counts sum to 8 but layers is 9; expected them "
                    "equal")));
  EXPECT_THAT(
      [] {
        assign_layers({.per_stage = {3, 5}, .first_stage = 3}, 2);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("layer assignment: per_stage cannot be combined with "
                                             "first_stage/last_stage; expected one of them")));
}

TEST(AssignLayers, FirstAndLastStageCountsSplitTheRestOverTheMiddle) {
  EXPECT_THAT(assign_layers({.layers = 14, .first_stage = 2, .last_stage = 4}, 4),
              ElementsAre(R{0, 2}, R{2, 6}, R{6, 10}, R{10, 14}));
  // Only one end given: the rest split over the other stages.
  EXPECT_THAT(assign_layers({.layers = 11, .first_stage = 2}, 4),
              ElementsAre(R{0, 2}, R{2, 5}, R{5, 8}, R{8, 11}));
  EXPECT_THAT(assign_layers({.layers = 9, .last_stage = 3}, 3),
              ElementsAre(R{0, 3}, R{3, 6}, R{6, 9}));
  // Two stages, both ends given: nothing in between.
  EXPECT_THAT(assign_layers({.layers = 7, .first_stage = 3, .last_stage = 4}, 2),
              ElementsAre(R{0, 3}, R{3, 7}));
}

TEST(AssignLayers, FirstAndLastStageErrors) {
  EXPECT_THAT([] { assign_layers({.layers = 15, .first_stage = 2, .last_stage = 4}, 4); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "layer assignment: the 9 layers left after first_stage and last_stage do not "
                  "split evenly over the 2 other stages; expected a multiple of 2 (nearest valid "
                  "layer counts: 14 or 16)")));
  EXPECT_THAT([] { assign_layers({.first_stage = 2}, 4); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "layer assignment: first_stage needs the total; expected layers to be set")));
  EXPECT_THAT([] { assign_layers({.layers = 4, .last_stage = 4}, 1); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("layer assignment: last_stage needs at least 2 stages; got 1")));
  EXPECT_THAT([] { assign_layers({.layers = 5, .first_stage = 4, .last_stage = 4}, 3); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "layer assignment: first_stage and last_stage take 8 layers but layers is 5 "
                  "with 1 other stage(s); expected layers >= 8")));
  EXPECT_THAT([] { assign_layers({.layers = 9, .first_stage = 4, .last_stage = 4}, 2); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expected layers = 8")));
  EXPECT_THAT([] { assign_layers({.layers = 9, .first_stage = -1}, 2); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("layer assignment: first_stage is -1; expected >= 0")));
}

TEST(AssignLayers, NothingToAssignOrNoStages) {
  EXPECT_THAT([] { assign_layers({}, 2); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("layer assignment: nothing to assign; expected layers, per_stage or "
                            "first_stage/last_stage")));
  EXPECT_THAT(
      [] { assign_layers({.layers = 4}, 0); },
      ThrowsMessage<InvalidConfig>(HasSubstr("layer assignment: stages is 0; expected >= 1")));
}

TEST(AssignLayersToGraph, ComputeTasksGetTheirStageRange) {
  ir::Graph g =
      ir::rows_to_graph(ir::parse_rows("rank 0: 0F0 1F0 1SEND_F0 (0F1;1B0)OVERLAP_F_B 0STEP\n"
                                       "rank 1: 2RECV_F0 2F0\n"));
  ir::Graph out = assign_layers(g, {R{0, 3}, R{3, 8}, R{8, 10}});
  EXPECT_EQ(out.task(ir::TaskId{0}).layers, (R{0, 3}));
  EXPECT_EQ(out.task(ir::TaskId{1}).layers, (R{3, 8}));
  EXPECT_EQ(out.task(ir::TaskId{2}).layers, (R{}));  // SEND: no layers
  const ir::Task& overlap = out.task(ir::TaskId{3});
  EXPECT_EQ(overlap.layers, (R{0, 3}));
  EXPECT_EQ(std::get<ir::Compute>(overlap.op).overlapped->layers, (R{3, 8}));
  EXPECT_EQ(out.task(ir::TaskId{4}).layers, (R{}));  // STEP covers the whole rank
  EXPECT_EQ(out.task(ir::TaskId{6}).layers, (R{8, 10}));
}

TEST(AssignLayersToGraph, AStageWithoutARangeIsRejected) {
  ir::Graph g = ir::rows_to_graph(ir::parse_rows("rank 0: 0F0 1F0\n"));
  EXPECT_THAT(
      [&] {
        assign_layers(g, {R{0, 3}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("has stage 1; expected a stage below 1 (the stages the layers were "
                    "assigned to)")));
}

}  // namespace
}  // namespace metron::lowering
