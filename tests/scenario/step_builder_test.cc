// What build_step charges communication with (issue 17): each group's placement, a measured
// profile's collective and p2p entries looked up with it, and the profile's compute slow-down in
// place of the hardware's.

#include "metron/scenario/step_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <variant>

#include "metron/base/error.h"
#include "metron/models/comm_cost.h"
#include "metron/models/compute_cost.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/layer_shape.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_presets.h"
#include "metron/models/stage_cost_model.h"
#include "metron/scenario/evaluation.h"

namespace metron::scenario {
namespace {

/// GPT-3 125M at sequence 128 on DGX H100s (8 GPUs a node), 1F1B with 4 microbatches.
Scenario gpt_125m(std::int64_t tp, std::int64_t pp, std::int64_t dp) {
  Scenario s = default_scenario();
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-h100");
  s.gpus.reset();
  s.parallel = {.tp = tp, .pp = pp, .dp = dp, .microbatch_size = 1, .seq_len = 128};
  s.parallel.num_microbatches = 4;
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  return s;
}

/// The cost model's op of the same name (Note [profile JSON]): an expectation independent of
/// scenario::comm_op's switch.
models::CommOp op_named_as(ir::CollectiveOp op) {
  return models::parse_comm_op(ir::to_string(op)).value();
}

TEST(StepBuilder, GroupsArePlacedAsTheirKindSitsOnTheNodes) {
  // tp 4 × dp 4 × pp 2 in Megatron's order (tp fastest): a tp group is 4 neighbours, inside one
  // 8-GPU node; a dp group is ranks 4 apart, {0, 4, 8, 12}: two nodes of two.
  const Step step = build_step(gpt_125m(4, 2, 4));
  ASSERT_EQ(step.group_placements.size(), step.graph.data().groups.size());
  int tp = 0;
  int dp = 0;
  for (std::size_t g = 0; g < step.group_placements.size(); ++g) {
    const std::string& name = step.graph.data().groups[g].name;
    const models::GroupPlacement placement = step.group_placements[g];
    if (name.starts_with("tp")) {
      EXPECT_EQ(placement, (models::GroupPlacement{.ranks = 4, .nodes = 1})) << name;
      ++tp;
    } else if (name.starts_with("dp")) {
      EXPECT_EQ(placement, (models::GroupPlacement{.ranks = 4, .nodes = 2})) << name;
      ++dp;
    }
  }
  EXPECT_GT(tp, 0);
  EXPECT_GT(dp, 0);
  // Pipeline neighbours are tp·dp = 16 ranks apart: never in one node.
  EXPECT_FALSE(step.p2p_same_node);
  EXPECT_TRUE(build_step(gpt_125m(2, 2, 1)).p2p_same_node);  // 4 ranks fit in one node
}

TEST(StepBuilder, DualPipeRanksHoldAndSumBothOfTheirModelStages) {
  // DualPipe pp 4 over GPT-3 350M's 24 layers: model stages of 6 layers; rank r runs stage r and
  // the copy of stage 3-r (Note [stage copies]). The same model split one stage per rank (1F1B,
  // pp 4) prices each stage alone: rank r's state is both of its stages', and the copies' sum
  // carries both stages' whole gradients (fp32), though Megatron's distributed optimizer over dp 2
  // steps half of them.
  Scenario s = gpt_125m(1, 4, 2);
  s.model = models::model_preset("gpt3-350m");
  s.schedule = {.name = "dualpipe"};
  s.parallel.vp = 2;
  s.parallel.num_microbatches = 8;
  s.sync = {.policy = sync::SyncPolicy::kMegatronDistopt};
  const Step step = build_step(s);
  models::ParallelSpec one_stage = s.parallel;
  one_stage.vp = 1;
  const models::StatePolicy policy = state_policy(s);
  ASSERT_EQ(step.state_bytes.size(), 4U);
  ASSERT_EQ(step.sync_input.grad_bytes, 4);        // bf16 weights, gradients reduced in fp32
  std::map<std::int32_t, std::int64_t> sum_bytes;  // by rank
  for (std::int32_t t = 0; t < step.graph.num_tasks(); ++t) {
    const ir::Task& task = step.graph.task(ir::TaskId{t});
    const auto* c = std::get_if<ir::Collective>(&task.op);
    if (c == nullptr || !step.graph.group(c->group).name.starts_with("pp-copies")) continue;
    EXPECT_EQ(step.group_placements[c->group.index()].ranks, 2);
    EXPECT_FALSE(sum_bytes.contains(task.rank.value()));
    sum_bytes[task.rank.value()] = c->bytes;
  }
  ASSERT_EQ(sum_bytes.size(), 4U);
  for (std::int64_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_DOUBLE_EQ(step.state_bytes[static_cast<std::size_t>(r)],
                     models::state_memory(*s.model, one_stage, policy, r).total() +
                         models::state_memory(*s.model, one_stage, policy, 3 - r).total());
    const std::int64_t params = models::rank_parameters(*s.model, one_stage, r).total() +
                                models::rank_parameters(*s.model, one_stage, 3 - r).total();
    EXPECT_EQ(sum_bytes[static_cast<std::int32_t>(r)], params * 4);
  }
  // Without data parallelism the sum is the rank's only collective, with its gradients' bytes.
  s.parallel.dp = 1;
  const Step alone = build_step(s);
  std::int64_t rank0 = 0;
  for (std::int32_t t = 0; t < alone.graph.num_tasks(); ++t) {
    const ir::Task& task = alone.graph.task(ir::TaskId{t});
    const auto* c = std::get_if<ir::Collective>(&task.op);
    if (c != nullptr && task.rank.value() == 0) rank0 += c->bytes;
  }
  EXPECT_EQ(rank0, (models::rank_parameters(*s.model, one_stage, 0).total() +
                    models::rank_parameters(*s.model, one_stage, 3).total()) *
                       alone.sync_input.grad_bytes);
}

TEST(StepBuilder, TiedEmbeddingsSumTheirGradientsBetweenTheFirstAndLastPipelineRank) {
  // GPT-3 125M ties its embeddings; tp 2, pp 4, dp 2 with Megatron's distributed optimizer.
  // Megatron pads the vocabulary of 50,257 to a multiple of 128·tp = 256: 50,432, so each rank's
  // copy holds 50,432 / 2 · 768 elements, all-reduced in the gradient buffer's fp32 by pipeline
  // ranks 0 and 3 alone (Note [embedding gradients]). The pair is tp·dp·3 = 12 ranks apart on
  // 8-GPU nodes: two nodes.
  Scenario s = gpt_125m(2, 4, 2);
  s.sync = {.policy = sync::SyncPolicy::kMegatronDistopt};
  const auto sums = [](const Step& step, std::int64_t nodes = 2) {
    std::map<std::int32_t, std::int64_t> bytes;  // by rank
    for (std::int32_t t = 0; t < step.graph.num_tasks(); ++t) {
      const ir::Task& task = step.graph.task(ir::TaskId{t});
      const auto* c = std::get_if<ir::Collective>(&task.op);
      if (c == nullptr || !step.graph.group(c->group).name.starts_with("embedding")) continue;
      EXPECT_EQ(step.group_placements[c->group.index()],
                (models::GroupPlacement{.ranks = 2, .nodes = nodes}));
      EXPECT_EQ(c->op, ir::CollectiveOp::kAllReduce);
      bytes[task.rank.value()] += c->bytes;
    }
    return bytes;
  };
  const std::int64_t copy = 50'432 / 2 * 768 * 4;
  EXPECT_THAT(sums(build_step(s)),
              ::testing::ElementsAre(::testing::Pair(0, copy), ::testing::Pair(3, copy)));
  // Without data parallelism too (the sync input is still built; the pair, 6 ranks apart, then
  // shares a node), and interleaved: rank 0's first chunk and rank 3's last.
  s.parallel.dp = 1;
  EXPECT_THAT(sums(build_step(s), 1),
              ::testing::ElementsAre(::testing::Pair(0, copy), ::testing::Pair(3, copy)));
  s.schedule = {.name = "interleaved-1f1b"};
  s.parallel.vp = 3;
  s.parallel.num_microbatches = 8;
  EXPECT_THAT(sums(build_step(s), 1),
              ::testing::ElementsAre(::testing::Pair(0, copy), ::testing::Pair(3, copy)));
  // None where there is nothing to sum across ranks: untied, one pipeline rank, or ZB-V, whose
  // rank 0 holds both ends.
  Scenario untied = gpt_125m(2, 4, 2);
  untied.model->tied_embeddings = false;
  EXPECT_TRUE(sums(build_step(untied)).empty());
  EXPECT_TRUE(sums(build_step(gpt_125m(2, 1, 2))).empty());
  Scenario v = gpt_125m(2, 3, 1);
  v.schedule = {.name = "zb-v"};
  v.parallel.vp = 2;
  v.parallel.num_microbatches = 8;
  EXPECT_TRUE(sums(build_step(v)).empty());
}

TEST(StepBuilder, AProfilesCollectiveAndP2pEntriesAreChargedExactly) {
  Scenario s = gpt_125m(2, 2, 2);
  const Step plain = build_step(s);
  // A distinct time for every distinct (op, placement, bytes per call), 1 µs apart; 7 µs for the
  // pipeline's transfers.
  models::CostProfile profile;
  std::map<std::tuple<models::CommOp, std::int64_t, std::int64_t, std::int64_t>, sim::Time> time;
  std::int64_t sends = 0;
  for (const ir::Task& t : plain.graph.tasks()) {
    if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
      const models::GroupPlacement where = plain.group_placements[c->group.index()];
      const auto key =
          std::make_tuple(op_named_as(c->op), where.ranks, where.nodes, c->bytes / c->count);
      if (time.contains(key)) continue;
      time[key] = static_cast<sim::Time>(time.size() + 1) * 1000;
      profile.set_collective(op_named_as(c->op), where, c->bytes / c->count,
                             static_cast<double>(time[key]) * 1e-9);
    } else if (const auto* send = std::get_if<ir::Send>(&t.op)) {
      profile.set_p2p(send->bytes, plain.p2p_same_node, 7e-6);
      ++sends;
    }
  }
  ASSERT_GE(time.size(), 2U);  // tensor- and data-parallel collectives
  ASSERT_GT(sends, 0);
  s.profile = profile;
  const Step profiled = build_step(s);
  int collectives = 0;
  for (std::int32_t i = 0; i < profiled.graph.num_tasks(); ++i) {
    const ir::Task& t = profiled.graph.task(ir::TaskId{i});
    const sim::Time d = profiled.durations[static_cast<std::size_t>(i)];
    if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
      const models::GroupPlacement where = profiled.group_placements[c->group.index()];
      // A task standing for `count` calls pays each call's measured time.
      EXPECT_EQ(d, c->count * time.at(std::make_tuple(op_named_as(c->op), where.ranks, where.nodes,
                                                      c->bytes / c->count)))
          << profiled.graph.describe(ir::TaskId{i});
      ++collectives;
    } else if (t.kind() == ir::TaskKind::kSend || t.kind() == ir::TaskKind::kRecv) {
      EXPECT_EQ(d, 7000) << profiled.graph.describe(ir::TaskId{i});
    }
  }
  EXPECT_GT(collectives, 0);
}

// Note [piece costs]: DDP's buckets cut the last microbatch's backward into pieces; the piece
// holding the model's last layer runs the LM head's backward, the one holding its first layer
// the embedding's weight gradient, and the others only their layers. Expected from the cost
// model's op inventories, composed by hand.
TEST(StepBuilder, APieceOfABackwardPaysForTheHeadOrEmbeddingItHolds) {
  Scenario s = gpt_125m(1, 1, 2);
  s.sync = {.policy = sync::SyncPolicy::kDdp};
  const Step step = build_step(s);
  const models::ComputeModel compute(s.hardware, s.model->dtype);
  const models::LayerShape shape = models::layer_shape(*s.model, s.parallel);
  const auto cost = [&](const std::vector<models::OpCost>& ops) {
    return compute.cost(ops).seconds;
  };
  const double layer =
      cost(models::layer_ops(*s.model, shape, models::ComputePhase::kBackwardInput)) +
      cost(models::layer_ops(*s.model, shape, models::ComputePhase::kBackwardWeight));
  const double head =
      cost(models::head_ops(*s.model, shape, models::ComputePhase::kBackwardInput)) +
      cost(models::head_ops(*s.model, shape, models::ComputePhase::kBackwardWeight));
  const double embedding =
      cost(models::embedding_ops(*s.model, shape, models::ComputePhase::kBackwardWeight));
  const std::int32_t layers = static_cast<std::int32_t>(s.model->layers);
  int pieces = 0;
  double total = 0;
  bool saw_head = false;
  bool saw_embedding = false;
  bool saw_middle = false;
  for (std::int32_t i = 0; i < step.graph.num_tasks(); ++i) {
    const ir::Task& t = step.graph.task(ir::TaskId{i});
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase != ir::Phase::kBackward || t.rank.value() != 0 ||
        t.microbatch.value() != 3) {
      continue;
    }
    const double n = t.layers.last - t.layers.first;
    const bool first = t.layers.first == 0;
    const bool last = t.layers.last == layers;
    const double expected = n * layer + (last ? head : 0) + (first ? embedding : 0);
    const double got = static_cast<double>(step.durations[static_cast<std::size_t>(i)]) * 1e-9;
    EXPECT_NEAR(got, expected, 1e-9) << step.graph.describe(ir::TaskId{i});
    saw_head |= last && !first;
    saw_embedding |= first && !last;
    saw_middle |= !first && !last;
    total += got;
    ++pieces;
  }
  EXPECT_TRUE(saw_head && saw_embedding && saw_middle) << pieces << " pieces";
  // The pieces still do the whole stage's backward.
  const models::CommModel comm(s.hardware);
  EXPECT_NEAR(total, models::model_stage_costs(*s.model, s.parallel, compute, comm).backward[0],
              1e-9 * pieces);
}

TEST(StepBuilder, AProfilesSlowdownReplacesTheHardwares) {
  Scenario s = gpt_125m(1, 2, 2);
  s.hardware.compute_slowdown_during_comm = 0.05;
  EXPECT_EQ(build_step(s).compute_slowdown_during_comm, 0.05);
  s.profile = models::CostProfile{};
  EXPECT_EQ(build_step(s).compute_slowdown_during_comm, 0.05);  // a profile without one
  s.profile->compute_slowdown_during_comm = 0.0;
  EXPECT_EQ(build_step(s).compute_slowdown_during_comm, 0.0);  // measured: none
  s.profile->compute_slowdown_during_comm = 3.0;
  const Step step = build_step(s);
  EXPECT_EQ(step.compute_slowdown_during_comm, 3.0);
  // evaluate() simulates with it: the same makespan as the simulator given 3.0 by hand, and
  // longer than without a slow-down, since data-parallel reductions overlap the backward.
  const Evaluation e = evaluate(s);
  EXPECT_EQ(
      e.result.makespan,
      sim::simulate(step.graph, step.durations, {.compute_slowdown_during_comm = 3.0}).makespan);
  EXPECT_GT(e.result.makespan, sim::simulate(step.graph, step.durations, {}).makespan);
}

// Note [pipeline scatter/gather] (lowering/intra_layer.h): each tensor-parallel rank sends 1/tp
// of the boundary tensor (b·s·h elements) and the receiving stage all-gathers the whole of it
// over its tensor-parallel group; expected from the communication model's formulas directly.
/// Checks that every forward of `step` runs the layers `expected` gives its stage; returns how
/// many forwards there are.
int expect_forward_layers(const Step& step,
                          const std::map<std::int32_t, ir::LayerRange>& expected) {
  int forwards = 0;
  for (const ir::Task& t : step.graph.tasks()) {
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase != ir::Phase::kForward) continue;
    ++forwards;
    EXPECT_EQ(t.layers, expected.at(t.stage.value())) << t.label;
  }
  return forwards;
}

// Note [uneven stages]: gpt3-125m's 12 layers on pp 4 with 2 on the first and the last rank
// leave 4 each for ranks 1 and 2. The forwards run those layer ranges; a middle stage's forward
// is 4 layers' time and its activation stash 4 layers' bytes, the first stage's 2 layers'.
TEST(StepBuilder, UnevenStagesRunTheirOwnLayerCounts) {
  Scenario s = gpt_125m(1, 4, 1);
  s.parallel.first_stage_layers = 2;
  s.parallel.last_stage_layers = 2;
  const Step step = build_step(s);
  const models::LayerShape shape = models::layer_shape(*s.model, s.parallel);
  const double per_layer = models::layer_activation_bytes(*s.model, shape, s.parallel.recompute);
  const models::LayerPhaseCosts layer = models::layer_phase_costs(
      *s.model, shape, s.parallel.recompute, models::ComputeModel(s.hardware, s.model->dtype));
  ASSERT_EQ(step.costs.stages(), 4U);
  EXPECT_DOUBLE_EQ(step.costs.forward[1], 4 * layer.forward.seconds);
  EXPECT_DOUBLE_EQ(step.costs.forward[2], 4 * layer.forward.seconds);
  const std::map<std::int32_t, ir::LayerRange> expected{
      {0, {0, 2}}, {1, {2, 6}}, {2, {6, 10}}, {3, {10, 12}}};
  EXPECT_EQ(expect_forward_layers(step, expected), 16);
  for (const ir::Buffer& b : step.graph.data().buffers) {
    if (b.name == "activation s0 mb0") {
      EXPECT_EQ(b.bytes, static_cast<std::int64_t>(2 * per_layer));
    }
    if (b.name == "activation s1 mb0") {
      EXPECT_EQ(b.bytes, static_cast<std::int64_t>(4 * per_layer));
    }
  }
  // The V placement: zb-v puts stages 0 and 3 on rank 0, 1 and 2 on rank 1. With 4 layers on
  // rank 0 and 8 on rank 1, chunk by chunk: 2, 4, 4, 2.
  Scenario v = gpt_125m(1, 2, 1);
  v.schedule = {.name = "zb-v"};
  v.parallel.vp = 2;
  v.parallel.first_stage_layers = 4;
  v.parallel.last_stage_layers = 8;
  const Step vstep = build_step(v);
  const std::map<std::int32_t, ir::LayerRange> vexpected{
      {0, {0, 2}}, {1, {2, 6}}, {2, {6, 10}}, {3, {10, 12}}};
  EXPECT_GT(expect_forward_layers(vstep, vexpected), 0);
}

// pipeline_layers: gpt3-125m's 12 layers as 4, 4, 3, 1 (a split first/last counts cannot express).
// The forwards run those ranges, and the step is the one the same counts in first/last form
// would give where they can: 2, 4, 4, 2 simulates as first 2, last 2 does (time, stage costs,
// memory).
TEST(StepBuilder, AListOfEveryRanksLayersRunsItsOwnRanges) {
  Scenario s = gpt_125m(1, 4, 1);
  s.parallel.pipeline_layers = {4, 4, 3, 1};
  const Step step = build_step(s);
  const std::map<std::int32_t, ir::LayerRange> expected{
      {0, {0, 4}}, {1, {4, 8}}, {2, {8, 11}}, {3, {11, 12}}};
  EXPECT_EQ(expect_forward_layers(step, expected), 16);
  Scenario ends = gpt_125m(1, 4, 1);
  ends.parallel.first_stage_layers = 2;
  ends.parallel.last_stage_layers = 2;
  Scenario listed = gpt_125m(1, 4, 1);
  listed.parallel.pipeline_layers = {2, 4, 4, 2};
  const Evaluation a = evaluate(ends);
  const Evaluation b = evaluate(listed);
  EXPECT_EQ(a.result.makespan, b.result.makespan);
  EXPECT_EQ(a.step.costs.forward, b.step.costs.forward);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
}

// account_for_embedding/loss_in_pipeline_split (Note [uneven stages]), interleaved: 10 layers +
// embedding + loss = 12 over pp 3 · vp 2 give every virtual stage 2 layers, the first and the
// last 1, so rank 0 runs stages 0 and 3 (1 + 2 layers), rank 2 stages 2 and 5 (2 + 1). The
// forwards run those ranges, and each stage's forward time is its own layers'.
TEST(StepBuilder, AnAccountedSplitGivesTheFirstAndLastVirtualStagesALayerLess) {
  Scenario s = gpt_125m(1, 3, 1);
  s.model->layers = 10;
  s.schedule = {.name = "interleaved-1f1b"};
  s.parallel.vp = 2;
  s.parallel.num_microbatches = 6;
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;
  const Step step = build_step(s);
  const std::map<std::int32_t, ir::LayerRange> expected{{0, {0, 1}}, {1, {1, 3}}, {2, {3, 5}},
                                                        {3, {5, 7}}, {4, {7, 9}}, {5, {9, 10}}};
  EXPECT_EQ(expect_forward_layers(step, expected), 36);  // 6 stages × 6 microbatches
  const models::LayerPhaseCosts layer = models::layer_phase_costs(
      *s.model, models::layer_shape(*s.model, s.parallel), s.parallel.recompute,
      models::ComputeModel(s.hardware, s.model->dtype));
  EXPECT_DOUBLE_EQ(step.costs.forward[1], 2 * layer.forward.seconds);
  EXPECT_DOUBLE_EQ(step.costs.forward[4], 2 * layer.forward.seconds);
  // With one chunk per rank it is Megatron's first/last split: 12 + 2 over pp 7 is 2 each, the
  // edges 1, which simulates exactly as first 1, last 1.
  Scenario accounted = gpt_125m(1, 7, 1);
  accounted.parallel.account_for_embedding_in_pipeline_split = true;
  accounted.parallel.account_for_loss_in_pipeline_split = true;
  Scenario edges = gpt_125m(1, 7, 1);
  edges.parallel.first_stage_layers = 1;
  edges.parallel.last_stage_layers = 1;
  const Evaluation a = evaluate(accounted);
  const Evaluation b = evaluate(edges);
  EXPECT_EQ(a.result.makespan, b.result.makespan);
  EXPECT_EQ(a.step.costs.forward, b.step.costs.forward);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
  // Megatron defines it for its looped placement; a V schedule is refused, naming why.
  Scenario v = gpt_125m(1, 2, 1);
  v.schedule = {.name = "zb-v"};
  v.parallel.vp = 2;
  v.parallel.account_for_loss_in_pipeline_split = true;
  v.model->layers = 11;  // 11 + 1 over 4 virtual stages
  EXPECT_THAT([&] { (void)build_step(v); },
              ::testing::ThrowsMessage<InvalidConfig>(::testing::HasSubstr("looped placement")));
}

// zero_per_tensor_collectives (Note [per-tensor host work]): a ZeRO-3 collective of `count`
// calls pays count latencies on bytes/count each, plus 6 us of host time per call and rank of the
// group (dp = 16 on 2 nodes). gpt3-125m's tensors: per layer 12, of which 4 weight matrices are
// partitioned (above 1e5 elements) and 8 biases and norm parameters persist; the tied word
// embedding and the positions are partitioned, the final norm's 2 persist. So the forward
// gathers make 12·4 + 2 = 50 calls (the layers stay resident for the backward, which gathers
// nothing), the reduce-scatters 12·12 + 2 + 2 = 148, the post-step gather 12·8 + 2 = 98.
TEST(StepBuilder, PerTensorZeroCollectivesPayHostTimePerCallAndRank) {
  Scenario s = gpt_125m(1, 1, 16);
  s.parallel.num_microbatches = 1;
  s.sync = {.policy = sync::SyncPolicy::kZero3, .zero_per_tensor_collectives = true};
  const Step step = build_step(s);
  const models::CommModel comm(s.hardware);
  int gather_calls = 0;
  int reduce_calls = 0;
  int persistent_calls = 0;
  for (std::int32_t i = 0; i < step.graph.num_tasks(); ++i) {
    const ir::Task& t = step.graph.task(ir::TaskId{i});
    const auto* c = std::get_if<ir::Collective>(&t.op);
    if (c == nullptr) continue;
    const models::GroupPlacement& g = step.group_placements[c->group.index()];
    ASSERT_EQ(g, (models::GroupPlacement{.ranks = 16, .nodes = 2})) << t.label;
    double expected = c->count * comm.collective_time(op_named_as(c->op), c->bytes / c->count, g);
    expected += static_cast<double>(c->count) * 16 * 6e-6;
    EXPECT_EQ(step.durations[static_cast<std::size_t>(i)], sim::from_seconds(expected)) << t.label;
    if (c->op == ir::CollectiveOp::kReduceScatter) {
      reduce_calls += c->count;
    } else if (t.label == "zero3 AG persistent params after step") {
      persistent_calls += c->count;
    } else {
      gather_calls += c->count;
    }
  }
  EXPECT_EQ(gather_calls, 50);
  EXPECT_EQ(reduce_calls, 148);
  EXPECT_EQ(persistent_calls, 98);
  // Without the option the same gathers are one call each, with no host time.
  s.sync.zero_per_tensor_collectives = false;
  const Step coalesced = build_step(s);
  for (std::int32_t i = 0; i < coalesced.graph.num_tasks(); ++i) {
    const ir::Task& t = coalesced.graph.task(ir::TaskId{i});
    const auto* c = std::get_if<ir::Collective>(&t.op);
    if (c == nullptr) continue;
    EXPECT_EQ(c->count, 1);
    EXPECT_EQ(coalesced.durations[static_cast<std::size_t>(i)],
              sim::from_seconds(comm.collective_time(op_named_as(c->op), c->bytes,
                                                     coalesced.group_placements[c->group.index()])))
        << t.label;
  }
}

TEST(StepBuilder, ThePipelineScatterGatherSendsAPieceAndAllGathersItAfterEachReceive) {
  Scenario s = gpt_125m(4, 2, 2);  // pipeline neighbours 8 ranks apart: across nodes
  // b·s·h elements of bf16.
  ASSERT_EQ(models::element_bytes(s.model->dtype), 2.0);
  const std::int64_t whole = 1 * 128 * s.model->hidden * 2;
  const Step plain = build_step(s);
  s.parallel.scatter_gather_p2p = true;
  const Step step = build_step(s);
  const models::CommModel comm(s.hardware);
  ASSERT_FALSE(step.p2p_same_node);
  const auto count_transfers = [](const Step& st, std::int64_t bytes) {
    int n = 0;
    for (const ir::Task& t : st.graph.tasks()) {
      if (const auto* r = std::get_if<ir::Recv>(&t.op)) n += r->bytes == bytes ? 1 : 0;
      if (const auto* x = std::get_if<ir::Send>(&t.op)) n += x->bytes == bytes ? 1 : 0;
    }
    return n;
  };
  const auto is_gather = [](const ir::Task& t) {
    return std::holds_alternative<ir::Collective>(t.op) && t.label.ends_with(" recv)");
  };
  // 1F1B over 2 stages and 4 microbatches: 4 activations forward, 4 gradients back.
  EXPECT_EQ(count_transfers(plain, whole), 16);
  EXPECT_EQ(count_transfers(step, whole / 4), 16);
  int gathers = 0;
  for (std::int32_t i = 0; i < step.graph.num_tasks(); ++i) {
    const ir::Task& t = step.graph.task(ir::TaskId{i});
    const sim::Time d = step.durations[static_cast<std::size_t>(i)];
    if (t.kind() == ir::TaskKind::kRecv) {
      EXPECT_EQ(d, sim::from_seconds(comm.p2p_time(whole / 4, false)));
    }
    if (!is_gather(t)) continue;
    ++gathers;
    const auto& c = std::get<ir::Collective>(t.op);
    EXPECT_EQ(c.op, ir::CollectiveOp::kAllGather);
    EXPECT_EQ(c.bytes, whole);
    EXPECT_EQ(c.count, 1);
    EXPECT_TRUE(step.graph.data().groups[c.group.index()].name.starts_with("tp"));
    EXPECT_EQ(step.group_placements[c.group.index()],
              (models::GroupPlacement{.ranks = 4, .nodes = 1}));
    EXPECT_EQ(d, sim::from_seconds(comm.collective_time(models::CommOp::kAllGather, whole,
                                                        {.ranks = 4, .nodes = 1})));
    // It follows a receive, and whatever computes with the received tensor waits for it.
    ASSERT_EQ(t.deps.size(), 1U);
    const ir::TaskId recv = t.deps[0];
    EXPECT_EQ(step.graph.task(recv).kind(), ir::TaskKind::kRecv);
    for (const ir::Task& other : step.graph.tasks()) {
      const bool uses_recv = std::ranges::find(other.deps, recv) != other.deps.end();
      if (uses_recv && other.kind() == ir::TaskKind::kCompute) {
        EXPECT_THAT(other.deps, ::testing::Contains(ir::TaskId{i})) << other.label;
      }
    }
  }
  EXPECT_EQ(gathers, 8);
  // The sent output is held whole until its send completes.
  for (const ir::Buffer& b : step.graph.data().buffers) {
    if (b.name.starts_with("output")) {
      EXPECT_EQ(b.bytes, whole) << b.name;
    }
  }
  // Every tensor-parallel peer in the graph: each gathers with its group.
  EXPECT_NO_THROW((void)build_step(s, Replication::kFull));
  // Sequence parallelism splits the boundary tensor already: nothing to gather.
  s.parallel.sequence_parallel = true;
  const Step sp = build_step(s);
  EXPECT_EQ(count_transfers(sp, whole / 4), 16);
  EXPECT_EQ(std::ranges::count_if(sp.graph.tasks(), is_gather), 0);
}

}  // namespace
}  // namespace metron::scenario
