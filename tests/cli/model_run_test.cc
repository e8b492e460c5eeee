// `metron run --payload model` as a user meets it (issue 21): real worker processes train a GPT
// by a schedule's step graph, with activations and gradients moved by Gloo (and gradients
// reduced, parameters gathered over replicas by the sync policy's buckets), and --check trains
// the single-process reference beside it; the refusals (exit 2) come before any process starts.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "metron/base/file_io.h"
#include "support/cli_runner.h"

namespace metron {
namespace {

using ::testing::AllOf;
using testing::Cli;
using ::testing::HasSubstr;
using testing::Outcome;
using Json = nlohmann::json;

TEST_F(Cli, RunWithTheModelPayloadTrainsAsTheSingleProcessReference) {
  // Zero Bubble V: I and W apart, and the V's turn from stage 1 to stage 2 on the same rank.
  const Outcome r = metron("run --payload model --check --schedule zb-v --pp 2 --iterations 2 " +
                           std::string("--warmup 1 --json ") + path("model.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("training (model payload: 4 layers, hidden 64"),
                           HasSubstr("check against the single-process reference (1 replica): "
                                     "passed")));
  const Json training = Json::parse(read_file(path("model.json")))["training"];
  EXPECT_EQ(training["steps"], 3);  // warm-up iterations train too
  ASSERT_EQ(training["mean_loss"].size(), 3U);
  EXPECT_TRUE(training["check"]["ok"].get<bool>());
  for (std::size_t t = 0; t < 3; ++t) {
    const double run = training["mean_loss"][t];
    const double reference = training["check"]["reference_mean_loss"][t];
    EXPECT_NEAR(run, reference, 1e-5 * reference);
  }
  // Every microbatch of every step has its loss (4 per step, from the last stage).
  for (const Json& step : training["losses"]) EXPECT_EQ(step.size(), 4U);
}

TEST_F(Cli, RunWithTheModelPayloadSyncsRealGradientsOverReplicas) {
  // 2 replicas of a 2-stage pipeline, 4 processes: Megatron's distributed optimizer (gradients
  // reduce-scattered, each replica stepping its shard, parameters all-gathered), DDP's
  // all-reduced buckets under zero-bubble H1 (small buckets: the backward cut at their edges),
  // fairscale's reduces to each tensor's owner, whose OSS shard alone steps, then broadcasts
  // from every owner (two chunks per rank: an owner's tensors span both stages), and FSDP2's
  // per-layer gathers and reduce-scatters (the run ends with each rank holding its shard
  // current: the check consolidates the replicas' records), and ZeRO-3's per-layer gathers of
  // its partitioned tensors, reduce-scatters after every microbatch into per-tensor partitions
  // and the gather of its persistent tensors after the step; and DualPipe's two directions,
  // whose copies of each stage sum their gradients over the pair of ranks holding them.
  for (const std::string flags :
       {"--sync megatron-distopt", "--sync ddp --bucket-size 20000 --schedule zb-h1",
        "--sync fairscale-sdp --bucket-size 5000 --schedule interleaved-1f1b --vp 2",
        "--sync fsdp2 --schedule zb-h1",
        "--sync zero3 --bucket-size 5000 --zero-param-persistence-threshold 1000",
        "--sync megatron-distopt --schedule dualpipe -m 4"}) {
    const Outcome r = metron("run --payload model --check --pp 2 --dp 2 --iterations 1 " +
                             std::string("--warmup 1 ") + flags);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.err;
    EXPECT_THAT(r.out,
                HasSubstr("check against the single-process reference (2 replicas): passed"));
  }
}

TEST_F(Cli, RunWithTheModelPayloadSumsTiedEmbeddingsOverTheirPipelineRanks) {
  // The default model with its head tied to the word embeddings, 2 replicas of 2 stages under
  // Megatron's distributed optimizer: each replica's first and last rank sum their copies'
  // gradients over a Gloo group of their own after the reduce-scatters (Note [embedding
  // gradients]).
  write_file_atomically(
      path("tied.json"),
      R"({"name": "gpt-tiny-tied", "layers": 4, "hidden": 64, "heads": 4, "vocab": 256,
                 "seq_len": 32, "dtype": "fp32", "tied_embeddings": true,
                 "make_vocab_size_divisible_by": 1})");
  const Outcome r = metron("run --payload model --check --pp 2 --dp 2 --iterations 2 " +
                           std::string("--sync megatron-distopt --model ") + path("tied.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("check against the single-process reference (2 replicas): passed"));
}

TEST_F(Cli, RunWithTheModelPayloadRefusesWhatItCannotTrainBeforeStarting) {
  ASSERT_EQ(metron("schedule --pp 2 -m 4 --format json -o " + path("g.json")).code, 0);
  const std::pair<std::string, std::string> refusals[] = {
      {"--check", "--check: the timing payload computes no values to check"},
      {"--payload model --dp 2 --sync fsdp2 --hsdp-shard-size 1", "HSDP"},
      {"--payload model --tp 2", "the payload runs tp = cp = ep = 1"},
      {path("g.json") + " --payload model", "a graph file names no model to train"},
      {"--payload model --model gpt3-125m --dp 2 --sync fsdp2",
       "the copies' gradients cannot be summed after the sync"},
  };
  for (const auto& [flags, reason] : refusals) {
    const Outcome r = metron("run " + flags);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_THAT(r.err, HasSubstr(reason)) << flags;
  }
}

}  // namespace
}  // namespace metron
