// The world a step's graph stands for (Note [world layout]): world ranks and group members
// derived by hand from Megatron-LM's "tp-cp-ep-dp-pp" order for small layouts.

#include "metron/scenario/world_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/step_builder.h"

namespace metron::scenario {
namespace {

using ::testing::ElementsAre;

Scenario gpt(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t cp = 1) {
  Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {.tp = tp,
                .pp = pp,
                .dp = dp,
                .cp = cp,
                .microbatch_size = 1,
                .num_microbatches = 4,
                .seq_len = 2048};
  s.schedule = {.name = "1f1b"};
  return s;
}

/// The naming of the graph's group called `name`.
const timelines::GroupNaming& group_named(const timelines::WorldLayout& layout,
                                          const ir::Graph& graph, const std::string& name) {
  for (std::size_t g = 0; g < graph.data().groups.size(); ++g) {
    if (graph.data().groups[g].name == name) return layout.groups[g];
  }
  ADD_FAILURE() << "no group " << name;
  return layout.groups.front();
}

TEST(WorldLayout, DualPipesStageCopiesPairPipelineRanksOfOneDataParallelIndex) {
  // tp 2, pp 4, dp 2 in full mode: world rank = t + 2·(d + 2·p). DualPipe pairs pipeline ranks
  // p and 3-p (Note [stage copies]). Graph rank 5 is replica 1's pipeline rank 1 (d = 1, t = 0):
  // world rank 0 + 2·(1 + 2·1) = 6, its mirror p = 2: 0 + 2·(1 + 4) = 10. Its group is
  // "pp-copies" + (replica · 2 + lower pipeline rank) = "pp-copies3".
  Scenario s = gpt(2, 4, 2);
  s.model = models::model_preset("gpt3-350m");  // 24 layers: divisible by pp·vp = 8
  s.parallel.vp = 2;
  s.parallel.num_microbatches = 8;
  s.schedule = {.name = "dualpipe"};
  const Step step = build_step(s, Replication::kFull);
  const timelines::WorldLayout layout = world_layout(s, step.graph);
  const timelines::GroupNaming& pair = group_named(layout, step.graph, "pp-copies3");
  EXPECT_THAT(pair.world_ranks, ElementsAre(6, 10));
  EXPECT_EQ(pair.description, "PIPELINE_STAGE_COPIES_GROUP");
  EXPECT_THAT(group_named(layout, step.graph, "pp-copies0").world_ranks, ElementsAre(0, 12));
}

TEST(WorldLayout, TiedEmbeddingsPairTheFirstAndLastPipelineRankOfOneDataParallelIndex) {
  // tp 2, pp 4, dp 2 in full mode, GPT-3 125M (tied embeddings): world rank = t + 2·(d + 2·p).
  // Megatron's embedding group of (t, d) is pipeline ranks 0 and 3 (Note [embedding gradients]).
  // Graph group "embedding1" is replica 1's at t = 0: world ranks 0 + 2·(1 + 0) = 2 and
  // 0 + 2·(1 + 2·3) = 14. The tensor-parallel peer t = 1 numbers its groups on past the 8 ranks
  // of one tensor-parallel index (lowering/tensor_parallel.h): its replica 1 has "embedding9",
  // world ranks 1 + 2·1 = 3 and 1 + 2·7 = 15.
  const Scenario s = gpt(2, 4, 2);
  const Step step = build_step(s, Replication::kFull);
  const timelines::WorldLayout layout = world_layout(s, step.graph);
  const timelines::GroupNaming& pair = group_named(layout, step.graph, "embedding1");
  EXPECT_THAT(pair.world_ranks, ElementsAre(2, 14));
  EXPECT_EQ(pair.description, "EMBEDDING_GROUP");
  EXPECT_THAT(group_named(layout, step.graph, "embedding0").world_ranks, ElementsAre(0, 12));
  EXPECT_THAT(group_named(layout, step.graph, "embedding9").world_ranks, ElementsAre(3, 15));
}

TEST(WorldLayout, SymmetricStepNamesTheRealTensorAndDataParallelGroups) {
  // tp 2, pp 2, dp 2: 8 GPUs. World rank = t + 2·(d + 2·p). Graph rank r is pipeline rank r of
  // replica 0, t = 0: world ranks 0 and 4. Its tp group {0, 1} / {4, 5}; its dp group varies d:
  // {0, 2} / {4, 6}.
  const Scenario s = gpt(2, 2, 2);
  const Step step = build_step(s);
  const timelines::WorldLayout layout = world_layout(s, step.graph);
  EXPECT_EQ(layout.world_size, 8);
  EXPECT_THAT(layout.world_rank, ElementsAre(0, 4));
  EXPECT_THAT(layout.local_device, ElementsAre(0, 4));
  const timelines::GroupNaming& tp1 = group_named(layout, step.graph, "tp1");
  EXPECT_THAT(tp1.world_ranks, ElementsAre(4, 5));
  EXPECT_EQ(tp1.description, "TENSOR_MODEL_PARALLEL_GROUP");
  const timelines::GroupNaming& dp0 = group_named(layout, step.graph, "dp0");
  EXPECT_THAT(dp0.world_ranks, ElementsAre(0, 2));
  EXPECT_EQ(dp0.description, "DATA_PARALLEL_GROUP");
  EXPECT_THAT(group_named(layout, step.graph, "dp1").world_ranks, ElementsAre(4, 6));
  // Sends and receives go through the pipeline group: p varies, {0, 4} for both graph ranks.
  ASSERT_EQ(layout.pipeline_groups.size(), 2U);
  EXPECT_THAT(layout.pipeline_groups[1].world_ranks, ElementsAre(0, 4));
  EXPECT_EQ(layout.pipeline_groups[0].pg_name, layout.pipeline_groups[1].pg_name);
  // Distinct groups get distinct names, counted from "1".
  EXPECT_NE(tp1.pg_name, dp0.pg_name);
  EXPECT_NE(tp1.pg_name, "0");
}

TEST(WorldLayout, FullStepNumbersReplicasAndKeepsTheirSharedDataParallelGroup) {
  // tp 1, pp 2, dp 3, --full: graph rank k·2 + r is replica k's pipeline rank r, world rank
  // d + 3·p: graph ranks 0..5 → 0, 3, 1, 4, 2, 5; dp group of pipeline rank 1 = {3, 4, 5}.
  const Scenario s = gpt(1, 2, 3);
  const Step step = build_step(s, Replication::kFull);
  const timelines::WorldLayout layout = world_layout(s, step.graph);
  EXPECT_EQ(layout.world_size, 6);
  EXPECT_THAT(layout.world_rank, ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(group_named(layout, step.graph, "dp1").world_ranks, ElementsAre(3, 4, 5));
}

TEST(WorldLayout, ContextParallelGroupsAreInsideTheDataParallelIndex) {
  // tp 2, cp 2, dp 2, pp 1: world rank = t + 2·(c + 2·k). Graph rank 0 (t = c = k = 0): its cp
  // group varies c: {0, 2}; its dp-with-cp group varies d = c + 2k: {0, 2, 4, 6}.
  const Scenario s = gpt(2, 1, 2, 2);
  const Step step = build_step(s);
  const timelines::WorldLayout layout = world_layout(s, step.graph);
  EXPECT_EQ(layout.world_size, 8);
  EXPECT_THAT(group_named(layout, step.graph, "cp0").world_ranks, ElementsAre(0, 2));
  const timelines::GroupNaming& dp = group_named(layout, step.graph, "dp0");
  EXPECT_THAT(dp.world_ranks, ElementsAre(0, 2, 4, 6));
  EXPECT_EQ(dp.description, "DATA_PARALLEL_GROUP_WITH_CP");
}

}  // namespace
}  // namespace metron::scenario
