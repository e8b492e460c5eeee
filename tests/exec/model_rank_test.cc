// The model payload on step graphs (issue 21): every rank of a scenario's graph on a thread of
// the test, with the executor's core and the CPU backend's streams, moving real activations and
// gradients through an in-process mailbox; the run must train the model as the single-process
// reference does (training_check.h), and a run that hands a microbatch's activation to another
// microbatch must fail the check.

#include "metron/exec/model_rank.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/tiny_models.h"
#include "metron/base/error.h"
#include "metron/exec/cpu_backend.h"
#include "metron/exec/gpt_of_model.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/models/hardware_presets.h"
#include "metron/scenario/step_builder.h"
#include "metron/sync/bucket_plan.h"

namespace metron::exec {
namespace {

/// Transfers between the test's rank threads: a send leaves its values under (from, to, tag), the
/// matching receive takes them.
class Mailbox {
 public:
  void send(std::int32_t from, std::int32_t to, std::int32_t tag, std::span<const float> data) {
    {
      const std::lock_guard lock(mutex_);
      mail_[{from, to, tag}].assign(data.begin(), data.end());
    }
    changed_.notify_all();
  }
  void recv(std::int32_t from, std::int32_t to, std::int32_t tag, std::span<float> data) {
    std::unique_lock lock(mutex_);
    const Key key{from, to, tag};
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return mail_.contains(key); })) {
      throw BackendError("mailbox: nothing came from rank " + std::to_string(from));
    }
    const std::vector<float> values = std::move(mail_[key]);
    mail_.erase(key);
    if (values.size() != data.size()) throw BackendError("mailbox: sizes differ");
    std::copy(values.begin(), values.end(), data.begin());
  }

 private:
  using Key = std::tuple<std::int32_t, std::int32_t, std::int32_t>;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, std::vector<float>> mail_;
};

/// Collectives between the test's rank threads, over whole fp32 buffers as GlooWorld::
/// collective_floats takes them: each member leaves a copy of its buffer under (group, ordinal),
/// and once all are there each computes its result from them in member order. A reduce leaves
/// NaN on the members other than its root (whose buffer Gloo leaves undefined), so that a payload
/// that used them would fail its check.
class Collectives {
 public:
  explicit Collectives(const ir::Graph& graph) : graph_(graph) {}

  void run(std::int32_t rank, std::int32_t group, std::int64_t ordinal, const ir::Collective& c,
           std::span<float> data) {
    const std::vector<ir::RankId>& members =
        graph_.data().groups[static_cast<std::size_t>(group)].ranks;
    const auto size = members.size();
    const auto me = static_cast<std::size_t>(
        std::find(members.begin(), members.end(), ir::RankId{rank}) - members.begin());
    std::unique_lock lock(mutex_);
    Round& round = rounds_[{group, ordinal}];
    round.inputs.resize(size);
    round.inputs[me].assign(data.begin(), data.end());
    ++round.arrived;
    changed_.notify_all();
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return round.arrived == size; })) {
      throw BackendError("collectives: a member did not come");
    }
    const std::size_t chunk = data.size() / size;
    const auto root = static_cast<std::size_t>(std::find(members.begin(), members.end(), c.root) -
                                               members.begin());
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (c.op == ir::CollectiveOp::kAllGather) {
        data[i] = round.inputs[i / chunk][i];
      } else if (c.op == ir::CollectiveOp::kBroadcast) {
        data[i] = round.inputs[root][i];
      } else if (c.op == ir::CollectiveOp::kReduce && me != root) {
        data[i] = std::numeric_limits<float>::quiet_NaN();
      } else if (c.op == ir::CollectiveOp::kAllReduce || c.op == ir::CollectiveOp::kReduce ||
                 i / chunk == me) {
        float sum = 0;
        for (const std::vector<float>& input : round.inputs) sum += input[i];
        data[i] = sum;
      }
    }
    if (++round.left == size) rounds_.erase({group, ordinal});
  }

 private:
  struct Round {
    std::vector<std::vector<float>> inputs;
    std::size_t arrived = 0;
    std::size_t left = 0;
  };
  const ir::Graph& graph_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<std::int32_t, std::int64_t>, Round> rounds_;
};

struct Config {
  std::string schedule;
  std::int64_t pp = 2;
  std::int64_t vp = 1;
  std::int64_t microbatches = 4;
  std::int64_t dp = 1;
  std::string sync = "ddp";
  bool overlap_grad_reduce = false;
  bool warmup = false;  ///< the first iteration's graph (fairscale: start-up broadcasts)
  /// Megatron: gathers in the next forward's pre-hooks, small buckets (the forward cut at them).
  bool overlap_param_gather = false;
  /// zero3: every tensor partitioned (persistence threshold 0), so layers are gathered before
  /// use, several per prefetch.
  bool partitioned = false;
  /// The LM head reuses the word embeddings: the last stage's copy and the first stage's sum
  /// their gradients before the step (Note [embedding gradients]).
  bool tied = false;
};

// gtest looks this name up to print a parameter.
void PrintTo(const Config& c, std::ostream* out) {  // NOLINT(readability-identifier-naming)
  *out << c.schedule << " pp " << c.pp << " vp " << c.vp << " m " << c.microbatches << " dp "
       << c.dp << " " << c.sync << (c.overlap_grad_reduce ? " overlap-grad-reduce" : "")
       << (c.warmup ? " warmup" : "") << (c.overlap_param_gather ? " overlap-param-gather" : "")
       << (c.partitioned ? " partitioned" : "") << (c.tied ? " tied" : "");
}

scenario::Scenario scenario_of(const Config& c) {
  scenario::Scenario s;
  s.model = models::testing::tiny_gelu(4);
  s.model->dtype = models::Precision::kFp32;
  s.model->tied_embeddings = c.tied;
  s.hardware = models::hardware_preset("cpu-local");
  s.parallel = {.tp = 1, .pp = c.pp, .dp = c.dp, .vp = c.vp, .microbatch_size = 2, .seq_len = 4};
  s.parallel.num_microbatches = c.microbatches;
  s.schedule = {.name = c.schedule};
  s.sync = {.policy = *sync::parse_sync_policy(c.sync)};
  if (c.overlap_grad_reduce) s.sync.overlap_grad_reduce = true;
  if (c.warmup) s.sync.iteration = sync::Iteration::kWarmup;
  if (c.overlap_param_gather) {
    s.sync.overlap_grad_reduce = true;
    s.sync.overlap_param_gather = true;
    s.sync.bucket_size = 500;
  }
  // Small buckets, so that a backward is cut at bucket boundaries and buckets are several.
  if (c.sync == "ddp") s.sync.bucket_size = 2048;
  // fairscale: elements per owner bucket; the larger tensors are reduced on their own.
  if (c.sync == "fairscale-sdp") s.sync.bucket_size = 300;
  // zero3: IPG buckets of 3000 elements, each reduce-scattered after every microbatch.
  if (c.sync.starts_with("zero")) s.sync.bucket_size = 3000;
  if (c.partitioned) s.sync.zero_param_persistence_threshold = 0;
  return s;
}

/// How the test's transfers misbehave.
enum class Fault { kNone, kSwapMicrobatches, kDropBucket };

/// Trains `steps` steps of the scenario's graph, every rank on a thread; returns replica 0's
/// record and the setup it trained.
std::pair<TrainingRecord, TrainingSetup> train(const Config& c, std::int64_t steps,
                                               Fault fault = Fault::kNone) {
  const scenario::Scenario s = scenario_of(c);
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
  const ir::Graph& graph = step.graph;
  const TrainingSetup setup{.model = gpt_config_of(*s.model, s.parallel, 7),
                            .steps = steps,
                            .microbatches = c.microbatches * c.dp};
  const ModelSync plan{
      .input = step.sync_input,
      .buckets = c.dp > 1 ? step.sync_plan : std::vector<std::vector<sync::PlannedBucket>>{}};
  Collectives collectives(graph);
  const std::vector<StageSlice> slices = stage_slices(*s.model, scenario::model_split(s));
  Mailbox mailbox;
  std::vector<RankRecord> records(static_cast<std::size_t>(graph.num_ranks()));
  std::vector<std::string> errors(records.size());
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    threads.emplace_back([&, r] {
      try {
        ModelRank model(graph, ir::RankId{r}, step.pipeline_ranks, setup, slices, plan);
        RankExecutor executor(graph, rank_program(graph, ir::RankId{r}));
        // The tags of the first stage's activation sends of microbatches 0 and 1, which the
        // fault swaps: each is then received as the other microbatch's activation.
        std::map<std::int32_t, std::int32_t> swap;
        for (const ProgramStep& p : executor.program().steps) {
          const ir::Task& t = graph.task(p.task);
          if (fault == Fault::kSwapMicrobatches && r == 0 &&
              std::holds_alternative<ir::Send>(t.op) && t.stage.value() == 0 &&
              t.microbatch.value() < 2) {
            swap[t.microbatch.value()] = p.tag;
          }
        }
        const auto tag_of = [&](std::int32_t tag) {
          if (swap.size() == 2 && tag == swap[0]) return swap[1];
          if (swap.size() == 2 && tag == swap[1]) return swap[0];
          return tag;
        };
        ModelTransport transport{
            .send = [&, r](std::int32_t peer, std::span<const float> data,
                           std::int32_t tag) { mailbox.send(r, peer, tag_of(tag), data); },
            .recv = [&, r](std::int32_t peer, std::span<float> data,
                           std::int32_t tag) { mailbox.recv(peer, r, tag, data); },
            .collective =
                [&, r](std::int32_t group, std::int64_t ordinal, const ir::Collective& op,
                       std::span<float> data) {
                  // The fault: each group's first collective reduces nothing (every member's
                  // result is its own gradients), as if its bucket had been dropped.
                  const std::vector<float> kept(data.begin(), data.end());
                  collectives.run(r, group, ordinal, op, data);
                  if (fault == Fault::kDropBucket && ordinal == 0) {
                    std::copy(kept.begin(), kept.end(), data.begin());
                  }
                },
        };
        CpuBackend backend(executor.program(), model.work(transport), std::chrono::seconds(60));
        for (std::int64_t i = 0; i < steps; ++i) executor.run(backend, i);
        records[static_cast<std::size_t>(r)] = model.record();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return {replica_record(records, 0), setup};
}

class ModelRankSchedules : public ::testing::TestWithParam<Config> {};

TEST_P(ModelRankSchedules, TrainsAsTheSingleProcessReference) {
  const auto [run, setup] = train(GetParam(), 2);
  const CheckReport report = check_training(run, reference_training(setup), setup);
  EXPECT_TRUE(report.ok) << (report.problems.empty() ? "" : report.problems.front());
  // Every microbatch's loss was recorded once, by the last stage.
  for (const std::vector<float>& step : run.losses) {
    for (const float loss : step) EXPECT_TRUE(std::isfinite(loss));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ModelRankSchedules,
    ::testing::Values(
        Config{.schedule = "1f1b"}, Config{.schedule = "gpipe"},
        Config{.schedule = "interleaved-1f1b", .vp = 2}, Config{.schedule = "looped-bfs", .vp = 2},
        Config{.schedule = "zb-h1"}, Config{.schedule = "zb-h2"},
        Config{.schedule = "zb-v", .vp = 2}, Config{.schedule = "1f1b", .pp = 4},
        Config{.schedule = "1f1b", .dp = 2, .sync = "ddp"},
        // Backwards from the highest microbatch down: DDP reduces after the last
        // one run (a sync pass that reduced after microbatch 3 failed this).
        Config{.schedule = "looped-bfs", .vp = 2, .dp = 2, .sync = "ddp"},
        Config{.schedule = "zb-h1", .dp = 2, .sync = "megatron-distopt"},
        Config{.schedule = "interleaved-1f1b",
               .vp = 2,
               .dp = 2,
               .sync = "megatron-ddp",
               .overlap_grad_reduce = true},
        Config{.schedule = "zb-v", .vp = 2, .dp = 2, .sync = "megatron-distopt"},
        // Reduces to each tensor's owner, OSS steps the owned tensors and
        // broadcasts them; with two chunks an owner's tensors span both stages.
        Config{.schedule = "1f1b", .dp = 2, .sync = "fairscale-sdp"},
        Config{.schedule = "interleaved-1f1b",
               .vp = 2,
               .dp = 2,
               .sync = "fairscale-sdp",
               .warmup = true},
        Config{.schedule = "zb-h1", .pp = 1, .dp = 4, .sync = "fairscale-sdp"},
        // Forwards cut at gather points run at their last piece; after the last
        // step each rank holds only its shard current, and the record is
        // consolidated from the owners.
        Config{
            .schedule = "1f1b", .dp = 2, .sync = "megatron-distopt", .overlap_param_gather = true},
        Config{.schedule = "1f1b", .dp = 2, .sync = "fsdp2"},
        Config{.schedule = "interleaved-1f1b", .vp = 2, .dp = 2, .sync = "fsdp1"},
        Config{.schedule = "zb-h1", .dp = 2, .sync = "fsdp2"},
        // Backwards from the highest microbatch down: FSDP reduces in the last one run.
        Config{.schedule = "looped-bfs", .vp = 2, .dp = 2, .sync = "fsdp2"},
        Config{.schedule = "looped-bfs",
               .vp = 2,
               .dp = 2,
               .sync = "zero1",
               .overlap_grad_reduce = true},
        // F&B units: a forward and another microbatch's backward in one task.
        Config{.schedule = "dualpipe-v", .vp = 2},
        Config{.schedule = "dualpipe-v", .vp = 2, .dp = 2, .sync = "megatron-distopt"},
        // Two directions, each model stage run twice (rank r: stages r and pp-1-r), the
        // copies' gradients summed before the step (Note [stage copies]).
        Config{.schedule = "dualpipe", .vp = 2},
        Config{.schedule = "dualpipe", .pp = 4, .vp = 2, .microbatches = 8},
        Config{.schedule = "dualpipe", .vp = 2, .dp = 2, .sync = "zero3"},
        // OSS owners over both stages of a rank, alike for the two copies of a stage.
        Config{.schedule = "dualpipe", .vp = 2, .dp = 2, .sync = "fairscale-sdp"},
        // Small buckets, gathered in each chunk's first forward: the copy of pipeline rank 0's
        // bucketed chunk is bucketed alike, and the second direction's first forward is
        // microbatch m/2's.
        Config{.schedule = "dualpipe",
               .vp = 2,
               .dp = 2,
               .sync = "megatron-distopt",
               .overlap_param_gather = true},
        // Gradients reduce-scattered per microbatch into per-tensor partitions, each rank
        // stepping its partitions, the persistent tensors gathered after the step.
        Config{.schedule = "1f1b", .dp = 2, .sync = "zero3"},
        Config{.schedule = "interleaved-1f1b", .vp = 2, .dp = 2, .sync = "zero3"},
        Config{.schedule = "zb-h1", .pp = 1, .dp = 4, .sync = "zero3"},
        Config{.schedule = "1f1b", .dp = 2, .sync = "zero3", .partitioned = true},
        // All-reduced buckets (after every microbatch for ZeRO-2), each rank stepping its share
        // of the flat parameter group, gathered after the step.
        Config{.schedule = "1f1b", .dp = 2, .sync = "zero1"},
        Config{.schedule = "interleaved-1f1b", .vp = 2, .dp = 2, .sync = "zero2"},
        Config{.schedule = "interleaved-1f1b",
               .vp = 2,
               .dp = 2,
               .sync = "zero3",
               .warmup = true,
               .partitioned = true},
        // Tied embeddings: the copies' gradients summed after the data-parallel sync, each
        // copy stepping with the sum (the distributed optimizer with its shard of each).
        Config{.schedule = "1f1b", .tied = true},
        Config{.schedule = "1f1b", .pp = 4, .dp = 2, .sync = "ddp", .tied = true},
        Config{.schedule = "interleaved-1f1b",
               .vp = 2,
               .dp = 2,
               .sync = "megatron-distopt",
               .tied = true},
        // Both ends on rank 0 (V), or on both ranks twice (DualPipe): summed on the rank.
        Config{.schedule = "zb-v", .vp = 2, .dp = 2, .sync = "megatron-distopt", .tied = true},
        Config{.schedule = "dualpipe", .vp = 2, .tied = true}),
    [](const ::testing::TestParamInfo<Config>& param) {
      std::string name = param.param.schedule + "_pp" + std::to_string(param.param.pp) + "_dp" +
                         std::to_string(param.param.dp) + "_" + param.param.sync +
                         (param.param.warmup ? "_warmup" : "") +
                         (param.param.overlap_param_gather ? "_overlap_param_gather" : "") +
                         (param.param.partitioned ? "_partitioned" : "") +
                         (param.param.tied ? "_tied" : "");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(ModelRank, ASwappedMicrobatchFailsTheCheck) {
  const auto [run, setup] = train({.schedule = "1f1b"}, 1, Fault::kSwapMicrobatches);
  const CheckReport report = check_training(run, reference_training(setup), setup);
  EXPECT_FALSE(report.ok);
}

TEST(ModelRank, ADroppedBucketFailsTheCheck) {
  for (const char* policy : {"megatron-ddp", "fairscale-sdp"}) {
    const auto [run, setup] =
        train({.schedule = "1f1b", .dp = 2, .sync = policy}, 1, Fault::kDropBucket);
    const CheckReport report = check_training(run, reference_training(setup), setup);
    EXPECT_FALSE(report.ok) << policy;
  }
}

TEST(ModelRank, DualPipesCopiesThatAreNotSummedFailTheCheck) {
  // Without data parallelism the copies' sum is each rank's only collective: dropped, each copy
  // steps with its own direction's gradients only, and the two copies of a stage train apart.
  const auto [run, setup] = train({.schedule = "dualpipe", .vp = 2}, 1, Fault::kDropBucket);
  const CheckReport report = check_training(run, reference_training(setup), setup);
  EXPECT_FALSE(report.ok);
  ASSERT_FALSE(report.problems.empty());
  // The record holds both copies of every stage: the second under its own name.
  EXPECT_TRUE(run.parameters.contains(std::string(kStageCopyPrefix) + "final_norm.weight"));
  EXPECT_TRUE(run.parameters.contains("final_norm.weight"));
}

TEST(ModelRank, TiedCopiesThatAreNotSummedFailTheCheck) {
  // Without data parallelism the embedding sum is the only collective of ranks 0 and 1:
  // dropped, the word embeddings step with the embedding's gradient only and the head's copy
  // with the head's, and both differ from the reference's one tied tensor.
  const auto [run, setup] = train({.schedule = "1f1b", .tied = true}, 1, Fault::kDropBucket);
  const CheckReport report = check_training(run, reference_training(setup), setup);
  EXPECT_FALSE(report.ok);
  // The copy is in the record, and checked against the word embeddings.
  EXPECT_TRUE(run.parameters.contains(std::string(kTiedHeadCopy)));
  EXPECT_THAT(report.problems, ::testing::Contains(::testing::HasSubstr("output.weight")));
  EXPECT_THAT(report.problems, ::testing::Contains(::testing::HasSubstr("embedding.word")));
}

/// The reason ModelRank gives for refusing `s`'s graph.
std::string refusal(const scenario::Scenario& s) {
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
  const TrainingSetup setup{.model = gpt_config_of(*s.model, s.parallel, 7),
                            .microbatches = 4 * s.parallel.dp};
  try {
    check_model_payload(step.graph, step.pipeline_ranks, setup, stage_slices(*s.model, s.parallel),
                        {.input = step.sync_input, .buckets = step.sync_plan});
  } catch (const InvalidConfig& e) {
    return e.what();
  }
  return "";
}

TEST(ModelRank, RefusesWhatItCannotRunByName) {
  Config c{.schedule = "1f1b", .dp = 2, .sync = "megatron-distopt"};
  scenario::Scenario s = scenario_of(c);
  s.sync.comm_hook = sync::CommHook::kBf16Compress;
  s.sync.policy = sync::SyncPolicy::kDdp;
  EXPECT_THAT(refusal(s), ::testing::HasSubstr("carries bf16"));
  // A tied model trained by a graph built for the untied one: no sum of the copies.
  s = scenario_of({.schedule = "1f1b"});
  const scenario::Step untied = scenario::build_step(s, scenario::Replication::kFull);
  s.model->tied_embeddings = true;
  const TrainingSetup tied{.model = gpt_config_of(*s.model, s.parallel, 7), .microbatches = 4};
  EXPECT_THAT(
      [&] {
        check_model_payload(untied.graph, untied.pipeline_ranks, tied,
                            stage_slices(*s.model, s.parallel));
      },
      ::testing::ThrowsMessage<InvalidConfig>(
          ::testing::HasSubstr("the copies would train apart")));
  // A bf16 graph's transfers carry half the bytes of the fp32 values.
  s = scenario_of(c);
  s.model->dtype = models::Precision::kBf16;
  const scenario::Step bf16 = scenario::build_step(s, scenario::Replication::kFull);
  const TrainingSetup one{.model = gpt_config_of(*s.model, s.parallel, 7), .microbatches = 4};
  EXPECT_THROW(ModelRank(bf16.graph, ir::RankId{0}, bf16.pipeline_ranks, one,
                         stage_slices(*s.model, s.parallel)),
               InvalidConfig);
}

TEST(ModelRank, RecordsSurviveTheirEncoding) {
  RankRecord record{.replica = 3};
  record.record.losses = {{1.5F, std::numeric_limits<float>::quiet_NaN()}, {2.5F, 0.25F}};
  record.record.parameters["layers.0.mlp.fc1.weight"] = {1, 2, 3};
  record.record.parameters["output.weight"] = {};
  record.stale["layers.0.mlp.fc1.weight"] = {0, 2};
  const RankRecord back = decode_record(encode_record(record));
  EXPECT_EQ(back.replica, 3);
  EXPECT_EQ(back.record.parameters, record.record.parameters);
  EXPECT_EQ(back.stale, record.stale);
  ASSERT_EQ(back.record.losses.size(), 2U);
  EXPECT_EQ(back.record.losses[1], record.record.losses[1]);
  EXPECT_TRUE(std::isnan(back.record.losses[0][1]));
  const std::string bytes = encode_record(record);
  EXPECT_THROW(decode_record(bytes.substr(0, bytes.size() - 1)), InvalidConfig);
  EXPECT_THROW(decode_record(bytes + "x"), InvalidConfig);
}

TEST(ModelRank, AReplicasStaleElementsComeFromTheReplicaThatHoldsThemCurrent) {
  // Two replicas of one rank each, each stepping half of "w" (FSDP's shards): replica 0 holds
  // elements 2 and 3 stale, replica 1 elements 0 and 1; "b" is stale at element 1 on both, so
  // no replica holds it current.
  RankRecord first{.replica = 0};
  first.record.parameters = {{"w", {1, 2, -3, -4}}, {"b", {5, 6}}};
  first.stale = {{"w", {2, 3}}, {"b", {1}}};
  RankRecord second{.replica = 1};
  second.record.parameters = {{"w", {-1, -2, 3, 4}}, {"b", {5, 7}}};
  second.stale = {{"w", {0, 1}}, {"b", {1}}};
  const std::vector<RankRecord> ranks{first, second};
  for (std::int32_t d = 0; d < 2; ++d) {
    const TrainingRecord r = replica_record(ranks, d);
    EXPECT_EQ(r.parameters.at("w"), (std::vector<float>{1, 2, 3, 4})) << d;
    EXPECT_EQ(r.parameters.at("b")[0], 5.0F);
    EXPECT_TRUE(std::isnan(r.parameters.at("b")[1])) << d;
  }
}

}  // namespace
}  // namespace metron::exec
