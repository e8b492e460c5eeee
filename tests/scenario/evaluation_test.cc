// Scenarios built and simulated end to end, against the schedule formulas of docs/SCHEDULES.md §5
// and Megatron's FLOPs formula, and the symmetric mode against the full graph.

#include "metron/scenario/evaluation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/models/stage_costs.h"
#include "metron/scenario/step_builder.h"

namespace metron::scenario {
namespace {

/// p stages with explicit F, B (ms), zero-time p2p posted ahead.
Scenario explicit_costs(const std::string& schedule, std::int64_t p, std::int64_t m,
                        const std::string& costs) {
  return scenario_from_json(R"({"parallel": {"pp": )" + std::to_string(p) +
                                R"(, "num_microbatches": )" + std::to_string(m) +
                                R"(}, "schedule": {"name": ")" + schedule +
                                R"(", "p2p": "async"}, "costs": )" + costs + "}",
                            "s.json");
}

TEST(Evaluate, OneFOneBTakesMPlusPMinusOneSlotsWithExplicitCosts) {
  // docs/SCHEDULES.md §5: 1F1B's bubble is (p−1)(F+B); the step lasts (m+p−1)(F+B) = 11 · 3 ms.
  const Evaluation e = evaluate(explicit_costs("1f1b", 4, 8, R"({"F": 1, "B": 2})"));
  EXPECT_DOUBLE_EQ(e.iteration_time_s, 33e-3);
  EXPECT_NEAR(e.bubble_fraction, 3.0 / 11.0, 1e-12);  // (p−1)/(m+p−1)
  ASSERT_TRUE(e.stage_span_bubble_rate.has_value());
  EXPECT_NEAR(*e.stage_span_bubble_rate, 9.0 / 33.0, 1e-12);  // stage 0 spans the whole step
  EXPECT_EQ(e.tokens_per_s, 0);                               // no model: unknown
}

TEST(Evaluate, ZeroBubbleVHasNoStageSpanBubbleWhenFIAndWAreEqual) {
  // docs/SCHEDULES.md §5: ZB-V's per-stage span is m(F+B) when F = I = W.
  const Evaluation e = evaluate(explicit_costs("zb-v", 4, 8, R"({"F": 1, "I": 1, "W": 1})"));
  ASSERT_TRUE(e.stage_span_bubble_rate.has_value());
  EXPECT_NEAR(*e.stage_span_bubble_rate, 0.0, 1e-12);
}

TEST(Evaluate, InterleavingDividesTheBubbleByTheChunks) {
  // docs/SCHEDULES.md §5: the bubble is (p−1)(F+B)/v with F, B a whole rank's times. Here p = 4,
  // v = 2 chunk stages of F = 1, B = 2 ms each, so a rank's F + B = 6 ms and its bubble
  // 3 · 6 / 2 = 9 ms; its work is m · v · 3 = 48 ms: 57 ms in all.
  Scenario s = explicit_costs("interleaved-1f1b", 4, 8, R"({"F": 1, "B": 2})");
  s.parallel.vp = 2;
  const Evaluation e = evaluate(s);
  EXPECT_DOUBLE_EQ(e.iteration_time_s, 57e-3);
}

// With one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) the device dispatches in issue order:
// a send posted after a forward holds back the next compute until the send can start, which it
// cannot before its receiver is ready, so transfers stop overlapping compute.
TEST(Evaluate, OneHardwareQueueSerialisesTransfersBehindCompute) {
  Scenario s = explicit_costs("1f1b", 4, 8, R"({"F": 1, "B": 2, "p2p": 0.5})");
  const Evaluation eight = evaluate(s);
  s.hardware.hardware_queues = 1;
  const Evaluation one = evaluate(s);
  EXPECT_GT(one.iteration_time_s, eight.iteration_time_s);
  for (std::int32_t r = 0; r < one.step.graph.num_ranks(); ++r) {
    EXPECT_EQ(one.step.graph.rank(ir::RankId{r}).hardware_queues, 1);
  }
}

Scenario small_model(std::int64_t dp) {
  Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {.pp = 2, .dp = dp, .microbatch_size = 1, .global_batch = 4 * dp, .seq_len = 512};
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  return s;
}

TEST(Evaluate, SymmetricModeAgreesExactlyWithTheFullGraph) {
  const Scenario s = small_model(4);
  const Evaluation sym = evaluate(s, Replication::kSymmetric);
  const Evaluation full = evaluate(s, Replication::kFull);
  EXPECT_EQ(sym.step.graph.num_ranks(), 2);
  EXPECT_EQ(full.step.graph.num_ranks(), 8);
  EXPECT_EQ(sym.result.makespan, full.result.makespan);
  for (std::size_t r = 0; r < 2; ++r) {
    const sim::RankMetrics& a = sym.result.ranks[r];
    for (std::size_t replica = 0; replica < 4; ++replica) {
      const sim::RankMetrics& b = full.result.ranks[replica * 2 + r];
      EXPECT_EQ(a.compute_busy, b.compute_busy) << r << " " << replica;
      EXPECT_EQ(a.bubble, b.bubble) << r << " " << replica;
      EXPECT_EQ(a.comm_total, b.comm_total) << r << " " << replica;
      EXPECT_EQ(a.comm_exposed, b.comm_exposed) << r << " " << replica;
      EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << r << " " << replica;
    }
  }
  EXPECT_DOUBLE_EQ(sym.mfu, full.mfu);
  EXPECT_DOUBLE_EQ(sym.bubble_fraction, full.bubble_fraction);
  // The gradient all-reduce is there, and charged as a 4-rank ring in both.
  EXPECT_GT(sym.result.ranks[0].comm_total, 0);
}

TEST(Evaluate, FullModeGivesTensorParallelPeersTheirRanksAndAgreesWithSymmetric) {
  // tp 2, pp 2, dp 2: the full graph holds all 8 GPUs, each tp group its two peers, and every
  // peer runs what the symmetric graph's one rank runs.
  Scenario s = small_model(2);
  s.parallel.tp = 2;
  const Evaluation sym = evaluate(s, Replication::kSymmetric);
  const Evaluation full = evaluate(s, Replication::kFull);
  ASSERT_EQ(sym.step.graph.num_ranks(), 2);
  ASSERT_EQ(full.step.graph.num_ranks(), 8);
  EXPECT_EQ(sym.result.makespan, full.result.makespan);
  for (std::int32_t r = 0; r < 8; ++r) {
    const sim::RankMetrics& a = sym.result.ranks[static_cast<std::size_t>(r % 2)];
    const sim::RankMetrics& b = full.result.ranks[static_cast<std::size_t>(r)];
    EXPECT_EQ(a.compute_busy, b.compute_busy) << r;
    EXPECT_EQ(a.comm_exposed, b.comm_exposed) << r;
    EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << r;
    // The symmetric graph's one member stands for the whole group: the same wire bytes as a
    // member of the full graph's real group (by group, whatever its id in either graph).
    std::vector<std::int64_t> sym_sent;
    std::vector<std::int64_t> full_sent;
    for (const auto& [group, bytes] : a.bytes_sent) sym_sent.push_back(bytes);
    for (const auto& [group, bytes] : b.bytes_sent) full_sent.push_back(bytes);
    std::ranges::sort(sym_sent);
    std::ranges::sort(full_sent);
    EXPECT_EQ(sym_sent, full_sent) << r;
    EXPECT_GT(sym_sent.back(), 0);
  }
  for (const ir::Group& group : full.step.graph.data().groups) {
    // tp, dp: two peers; embedding: the tied embeddings' pair, pipeline ranks 0 and 1.
    const std::size_t expected = group.name.starts_with("tp") || group.name.starts_with("dp") ||
                                         group.name.starts_with("embedding")
                                     ? 2
                                     : 1;
    EXPECT_EQ(group.ranks.size(), expected) << group.name;
  }
  EXPECT_DOUBLE_EQ(sym.mfu, full.mfu);
}

// tp_comm_overlap moves the same tensor-parallel bytes but runs all but one ring step of each
// collective beside the layer's compute: the step is faster and less of it is exposed
// communication, and the graph holds the overlapped collectives beside the compute tasks.
TEST(Evaluate, TensorParallelOverlapHidesTensorParallelCommunication) {
  Scenario s = small_model(1);
  s.parallel.tp = 4;
  s.parallel.sequence_parallel = true;
  const Evaluation plain = evaluate(s);
  s.parallel.tp_comm_overlap = true;
  const Evaluation overlapped = evaluate(s);
  EXPECT_LT(overlapped.iteration_time_s, plain.iteration_time_s);
  EXPECT_LT(overlapped.exposed_comm_fraction, plain.exposed_comm_fraction);
  std::int64_t plain_sent = 0;
  std::int64_t overlapped_sent = 0;
  for (const auto& [group, bytes] : plain.result.ranks[0].bytes_sent) plain_sent += bytes;
  for (const auto& [group, bytes] : overlapped.result.ranks[0].bytes_sent) overlapped_sent += bytes;
  EXPECT_EQ(overlapped_sent, plain_sent);
}

TEST(Evaluate, ThroughputAndMfuFollowMegatronsFormula) {
  const Scenario s = default_scenario();
  const Evaluation e = evaluate(s);
  const double t = e.iteration_time_s;
  ASSERT_GT(t, 0);
  // 1,536 samples of 2,048 tokens per iteration.
  EXPECT_NEAR(e.tokens_per_s * t, 1536.0 * 2048.0, 1e-6);
  // Model FLOPs without recompute: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (Narayanan et al.).
  const double b = 1536, seq = 2048, l = 96, h = 12288, v = 50257;
  const double flops = 72 * b * seq * l * h * h * (1 + seq / (6 * h) + v / (12 * l * h));
  // Vocabulary padding to a multiple of tp (50,264 over 8 ranks) moves it by < 1e-4.
  EXPECT_NEAR(e.mfu, flops / (t * 1024 * 989.4e12), 1e-4 * e.mfu);
  EXPECT_GT(e.bubble_fraction, 0);
  EXPECT_LT(e.bubble_fraction, 1);
  const nlohmann::json json = nlohmann::json::parse(result_json(e));
  EXPECT_DOUBLE_EQ(json.at("iteration_time_ms").get<double>(), t * 1e3);
  EXPECT_EQ(json.at("per_rank").size(), 16U);
  EXPECT_TRUE(json.at("stage_span_bubble_rate").is_null());
}

// Issue 14: a modelled time beyond a day (here a GPU of 1 FLOP/s) is refused naming the task and
// the limit, before it becomes integer nanoseconds that a step's sum could overflow.
TEST(Evaluate, RefusesATaskTimeBeyondADayNamingTheTask) {
  Scenario s = small_model(1);
  s.hardware.gpu.peak_flops[models::Precision::kBf16] = 1;
  s.hardware.gpu.peak_flops[models::Precision::kFp16] = 1;
  EXPECT_THAT([&] { (void)build_step(s); },
              ::testing::ThrowsMessage<InvalidConfig>(::testing::AllOf(
                  ::testing::HasSubstr("task 0 (rank 0"),
                  ::testing::HasSubstr("expected between 0 and 86400 s (a day, the limit of one "
                                       "task's time)"))));
  // Explicit and full replication: the step's size is bounded before the graph is built.
  Scenario many = small_model(4096);
  many.parallel.global_batch.reset();
  many.parallel.num_microbatches = 4096;
  EXPECT_THAT(
      [&] { (void)build_step(many, Replication::kFull); },
      ::testing::ThrowsMessage<InvalidConfig>(::testing::HasSubstr(
          "--full simulates tp·dp·microbatches·pp·vp = 1·4096·4096·2·1 = 33554432 forwards; "
          "expected at most 16777216")));
}

}  // namespace
}  // namespace metron::scenario
