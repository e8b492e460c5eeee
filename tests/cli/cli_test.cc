// The metron command as a user meets it: exit codes (0 success, 1 runtime failure, 2 bad input),
// `metron: error: ...` on stderr, and outputs that are never half-written.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "metron/base/file_io.h"
#include "support/cli_runner.h"

namespace metron {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kSource = METRON_SOURCE_DIR;
const std::string kExample = kSource + "/examples/1f1b-2stage-dp2.json";
const std::string kExampleText = kSource + "/examples/1f1b-2stage-dp2.txt";
const std::string kData = kSource + "/tests/cli/data/";

using testing::Cli;
using testing::Outcome;

TEST_F(Cli, VersionAndHelpSucceed) {
  Outcome v = metron("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_THAT(v.out, StartsWith("metron 0."));
  Outcome h = metron("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_THAT(h.out, AllOf(HasSubstr("graph"), HasSubstr("Exit codes: 0 success, 1 runtime "
                                                         "failure, 2 bad input")));
  Outcome hc = metron("graph convert --help");
  EXPECT_EQ(hc.code, 0);
  EXPECT_THAT(hc.out, HasSubstr("written\natomically"));
}

// Note [two programs] (cli/cli_main.h): metron lists run and profile, hands them with the same
// arguments to metron-exec (their own options answer), and says what is missing when metron-exec
// is not beside it.
TEST_F(Cli, RunAndProfileAreHandedToTheExecutorProgram) {
  const Outcome h = metron("--help");
  EXPECT_THAT(h.out, AllOf(HasSubstr("run"), HasSubstr("Execute one training step for real"),
                           HasSubstr("profile"), HasSubstr("write a cost profile")));
  const Outcome run_help = metron("run --help");
  EXPECT_EQ(run_help.code, 0) << run_help.err;
  EXPECT_THAT(run_help.out, AllOf(HasSubstr("--iterations"), HasSubstr("--backend")));
  const Outcome profile_help = metron("profile --help");
  EXPECT_EQ(profile_help.code, 0) << profile_help.err;
  EXPECT_THAT(profile_help.out, HasSubstr("--repetitions"));
  // Bad input to run is metron-exec's to refuse, with the same exit code and message prefix.
  const Outcome bad = metron("run --iterations 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, AllOf(StartsWith("metron: error: "), HasSubstr("--iterations")));

  // A copy of metron alone: the other commands work, run names what it misses.
  const std::filesystem::path alone = dir_ / "alone" / "metron";
  std::filesystem::create_directories(alone.parent_path());
  std::filesystem::copy_file(METRON_BINARY, alone);
  const int graph = std::system((alone.string() + " graph check --quiet " + kExample).c_str());
  EXPECT_EQ(graph, 0);
  const std::string err = path("alone.err");
  const int run = std::system((alone.string() + " run --iterations 1 2>" + err).c_str());
  ASSERT_TRUE(WIFEXITED(run));
  EXPECT_EQ(WEXITSTATUS(run), 1);
  EXPECT_THAT(read_file(err), AllOf(StartsWith("metron: error: 'metron run' runs in metron-exec"),
                                    HasSubstr((alone.parent_path() / "metron-exec").string())));
}

TEST_F(Cli, CheckSummarisesAValidGraphAndItsRows) {
  Outcome r = metron("graph check " + kExample);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(r.out, AllOf(HasSubstr("valid task graph"), HasSubstr("ranks     4"),
                           HasSubstr("tasks     72: 36 compute, 16 send, 16 recv, 4 collective"),
                           HasSubstr("no deadlock: every task completes in 16 unit steps"),
                           HasSubstr("rank 1: 1RECV_F0@0 1F0 1B0 1SEND_B0@0")));
  EXPECT_THAT(metron("graph check --quiet " + kExample).out, IsEmpty());
}

TEST_F(Cli, CheckReportsEveryProblemAndExitsWithTwo) {
  Outcome r = metron("graph check " + kData + "unmatched-send.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(
      r.err,
      AllOf(StartsWith("metron: error: invalid graph: 1 problem\n"),
            HasSubstr("unmatched send: task 3 (rank 0, stage 0, chunk 0, microbatch 1): send of "
                      "activation 0 bytes to rank 1 (tag 2)")));
}

TEST_F(Cli, CheckReportsADeadlockWithEveryBlockedTask) {
  Outcome r = metron("graph check " + kData + "swapped-receives.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, AllOf(StartsWith("metron: error: deadlock: no task can make progress"),
                           HasSubstr("rank 0 stream \"pp-recv-1\""),
                           HasSubstr("rank 1 stream \"pp-send-0\"")));
}

TEST_F(Cli, MalformedJsonNamesLineAndColumn) {
  Outcome r = metron("graph check " + kData + "missing-comma.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, StartsWith("metron: error: " + kData + "missing-comma.json:3:"));
  EXPECT_THAT(r.err, HasSubstr("malformed JSON"));
}

TEST_F(Cli, BadArgumentsAreBadInput) {
  EXPECT_EQ(metron("").code, 2);
  Outcome unknown = metron("simulte");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.err,
            "metron: error: unknown command 'simulte'; run 'metron --help' for usage\n");
  Outcome missing = metron("graph check " + path("nope.json"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read '" + path("nope.json") + "': No such file"));
  Outcome format = metron("graph convert " + kExample + " - --to yaml");
  EXPECT_EQ(format.code, 2);
  EXPECT_THAT(format.err, HasSubstr("--to: yaml not in {json,text,csv}"));
}

TEST_F(Cli, ConvertJsonToTextGivesTheExampleText) {
  Outcome r = metron("graph convert " + kExample + " " + path("step.txt"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(path("step.txt")), read_file(kExampleText));
  EXPECT_EQ(metron("graph convert " + kExample + " - --to text").out, read_file(kExampleText));
}

TEST_F(Cli, ConvertTextToJsonAndBackIsStable) {
  ASSERT_EQ(metron("graph convert " + kExampleText + " " + path("step.json")).code, 0);
  ASSERT_EQ(metron("graph convert " + path("step.json") + " " + path("again.txt")).code, 0);
  EXPECT_EQ(read_file(path("again.txt")), read_file(kExampleText));
  EXPECT_EQ(metron("graph check -q " + path("step.json")).code, 0);
}

TEST_F(Cli, ConvertReadsStandardInputAndGuessesJson) {
  Outcome r = metron("graph convert - - --to text", read_file(kExample));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(kExampleText));
}

TEST_F(Cli, FailedConvertLeavesTheOutputUntouched) {
  write_file_atomically(path("out.json"), "previous content");
  Outcome r = metron("graph convert " + kData + "unmatched-send.txt " + path("out.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(read_file(path("out.json")), "previous content");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}),
            3);  // + stdout, stderr
}

// Issue 14: an output path that cannot be written is the user's to fix (exit 2), not a runtime
// failure.
TEST_F(Cli, UnwritableOutputIsTheUsersError) {
  Outcome r = metron("graph convert " + kExample + " " + path("no-such-folder/out.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, StartsWith("metron: error: cannot write '" + path("no-such-folder/out.json")));
}

TEST_F(Cli, SchedulePrintsEachRanksOrder) {
  // Megatron 1F1B, p = 4, m = 6: rank r warms up with p − r − 1 forwards, alternates F and B for
  // the remaining forwards, then drains the backwards.
  Outcome r = metron("schedule --schedule 1f1b --pp 4 --microbatches 6");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "rank 0: 0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5\n"
            "rank 1: 1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1B4 1B5\n"
            "rank 2: 2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2B5\n"
            "rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5\n");
}

TEST_F(Cli, ScheduleGridHasOneLinePerUnitStep) {
  // F = 1 and B = 2 steps: (m + p − 1)(F + B) = (2 + 2 − 1) · 3 = 9 steps plus the header.
  Outcome r = metron("schedule --schedule 1f1b --pp 2 -m 2 --format grid");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "step  rank 0  rank 1\n"
            "   0  0F0     .\n"
            "   1  0F1     1F0\n"
            "   2  .       1B0\n"
            "   3  .       |\n"
            "   4  0B0     1F1\n"
            "   5  |       1B1\n"
            "   6  .       |\n"
            "   7  0B1     .\n"
            "   8  |       .\n");
}

TEST_F(Cli, ScheduleWithCommsAndAsJsonLowersToAValidGraph) {
  Outcome text = metron("schedule --schedule 1f1b --pp 2 -m 2 --with-comms");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, AllOf(HasSubstr("0SEND_F0"), HasSubstr("1RECV_F0"), HasSubstr("1SEND_B0"),
                              HasSubstr("0RECV_B0")));
  Outcome json = metron("schedule --schedule 1f1b --pp 2 -m 4 --with-comms --format json -o " +
                        path("step.json"));
  EXPECT_EQ(json.code, 0) << json.err;
  Outcome check = metron("graph check " + path("step.json"));
  EXPECT_EQ(check.code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("no deadlock"));
}

TEST_F(Cli, EncoderDecoderSplitDoublesTheTransfersAfterTheSplit) {
  // 1F1B on 4 stages, 4 microbatches: 3 boundaries x 4 microbatches x (activation + gradient)
  // = 24 transfers, plus a second tensor across the one boundary after split stage 2 (2 -> 3):
  // 4 x 2 more, so 32 sends.
  Outcome r = metron(
      "schedule --pp 4 -m 4 --with-comms --format json --encoder-decoder-split 2 "
      "-o " +
      path("t5.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(metron("graph check " + path("t5.json")).out,
              HasSubstr("tasks     100: 36 compute, 32 send, 32 recv"));
  Outcome text = metron("schedule --pp 4 -m 4 --encoder-decoder-split 2");
  EXPECT_EQ(text.code, 2);
  EXPECT_THAT(text.err, HasSubstr("expected --format json"));
}

// Note [uneven stages]: Llama 3 405B's 126 layers on pp 16 as Meta ran them, 7 on the first and
// the last rank and 8 on the others; a split that does not add up is refused with its sums.
TEST_F(Cli, SimulateSplitsLayersUnevenlyOverThePipeline) {
  const std::string flags =
      "simulate --model llama3-405b --hardware dgx-h100 --gpus 16384 --tp 8 --pp 16 --dp 128 "
      "--vp 1 --schedule 1f1b --global-batch 2048 --seq 8192 --sp";
  Outcome r = metron(flags + " --first-stage-layers 7 --last-stage-layers 7");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layers per rank       7, 8 x 14, 7"));
  Outcome bad = metron(flags + " --first-stage-layers 5");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("layers (126) - first_stage_layers (5) = 121 must split evenly, "
                                 "at least one each, over the 15 other pipeline ranks"));
  // Every rank's count, as a list: 8 on fifteen ranks and 6 on the last.
  Outcome listed = metron(flags + " --pipeline-layers 8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,6");
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("layers per rank       8 x 15, 6"));
  Outcome sum = metron(flags + " --pipeline-layers 8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8");
  EXPECT_EQ(sum.code, 2);
  EXPECT_THAT(sum.err,
              HasSubstr("pipeline_layers add up to 128; expected the model's layers (126)"));
  Outcome both = metron(flags + " --pipeline-layers 126 --first-stage-layers 7");
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("expected one way to split the layers, got two"));
  // Megatron's other way: the embedding and the loss counted as layers, (126 + 2) / 16 = 8 per
  // rank and one less on the edges; interleaved, the ranks hold the same, their edge chunks 3.
  const std::string accounted =
      " --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split";
  Outcome megatron = metron(flags + accounted);
  EXPECT_EQ(megatron.code, 0) << megatron.err;
  EXPECT_THAT(megatron.out, HasSubstr("layers per rank       7, 8 x 14, 7"));
  Outcome interleaved = metron(
      "simulate --model llama3-405b --hardware dgx-h100 --gpus 16384 --tp 8 --pp 16 --dp 128 "
      "--vp 2 --schedule interleaved-1f1b --global-batch 2048 --seq 8192 --sp" +
      accounted);
  EXPECT_EQ(interleaved.code, 0) << interleaved.err;
  EXPECT_THAT(interleaved.out, HasSubstr("layers per rank       7, 8 x 14, 7"));
  Outcome two = metron(flags + accounted + " --first-stage-layers 7");
  EXPECT_EQ(two.code, 2);
  EXPECT_THAT(two.err, HasSubstr("expected one way to split the layers, got two"));
}

TEST_F(Cli, PresetsListsEveryModelWithItsSize) {
  Outcome r = metron("presets models");
  EXPECT_EQ(r.code, 0) << r.err;
  // GPT-3 175B: 96 layers, hidden 12288 (Brown et al. Table 2.1); its shapes give 174.6B
  // parameters, the figure usually quoted behind the rounded "175B".
  EXPECT_THAT(r.out,
              AllOf(StartsWith("name"), HasSubstr("gpt3-175b          174.6B      96   12288"),
                    HasSubstr("llama3-405b"), HasSubstr("megatron-1t")));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 28);  // header + 27 presets
  Outcome json = metron("presets --json");
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 27);
  EXPECT_EQ(metron("presets gpus").code, 2);
}

TEST_F(Cli, PresetsListsHardware) {
  Outcome r = metron("presets hardware");
  EXPECT_EQ(r.code, 0) << r.err;
  // DGX H100: 8 GPUs, 989.4 TFLOP/s bf16 dense, 80 GB at 3.35 TB/s (NVIDIA H100 datasheet);
  // NVLink4 at NCCL's 370 GB/s and a ConnectX-7 NIC's 47.5 GB/s share of 380 GB/s per node.
  EXPECT_THAT(r.out,
              AllOf(StartsWith("name         gpus/node  bf16 TFLOP/s  HBM GB  HBM TB/s  intra GB/s"
                               "  inter GB/s\n"),
                    HasSubstr("dgx-a100"),
                    HasSubstr("dgx-h100             8         989.4      80      3.35         370"
                              "        47.5\n"),
                    HasSubstr("h200-node"), HasSubstr("cpu-local")));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5);  // header + 4 presets
  Outcome json = metron("presets hardware --json");
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 4);
  EXPECT_THAT(json.out, StartsWith(R"({"name":"dgx-a100","gpu":{"name":"A100-SXM4-80GB",)"));
  EXPECT_EQ(metron("presets gpus").code, 2);
}

TEST_F(Cli, ScheduleReadsAUsersOrderFromPyTorchCsv) {
  write_file_atomically(path("zb1p.csv"),
                        "0F0,0F1,,0I0,0W0,0F2,0I1,0W1,0I2,0W2\n"
                        ",1F0,1I0,1F1,1W0,1I1,1F2,1W1,1I2,1W2\n");
  Outcome r = metron("schedule --order " + path("zb1p.csv") + " --format csv");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0F0,0F1,0I0,0W0,0F2,0I1,0W1,0I2,0W2\n1F0,1I0,1F1,1W0,1I1,1F2,1W1,1I2,1W2\n");
  Outcome both = metron("schedule --order " + path("zb1p.csv") + " --schedule gpipe");
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("--schedule excludes --order"));
}

TEST_F(Cli, ZbAutoTakesStageTimesFromAScenario) {
  write_file_atomically(path("s.json"),
                        R"({"costs": {"F": [1, 1], "I": [1, 1], "W": [1, 1], "p2p": 0}})");
  Outcome r = metron("schedule --schedule zb-auto --pp 2 -m 4 --scenario " + path("s.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 1: 1F0 "));
  write_file_atomically(path("bad.json"), R"({"costs": {"F": ["fast"]}})");
  Outcome bad = metron("schedule --schedule zb-auto --pp 2 -m 4 --scenario " + path("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("bad.json: costs.F[0]: expected a number >= 0, got \"fast\""));
}

// One GPT-3 175B layer at tp 8 with sequence parallelism, b = 1, s = 2048 (h = 12288, a = 96).
TEST_F(Cli, CostReportsTheLayerByMegatronsAndKorthikantisFormulas) {
  Outcome r = metron(
      "cost --model gpt3-175b --hardware dgx-h100 --tp 8 --sp -b 1 --seq 2048 --dp 8 "
      "--policy megatron-distopt --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const double b = 1, s = 2048, h = 12288, a = 96, t = 8;
  // Forward matrix FLOPs of a layer, Narayanan et al. SC'21: 24bsh² + 4bs²h, split over t.
  const nlohmann::json& forward = report.at("layer").at(0);
  EXPECT_EQ(forward.at("phase"), "forward");
  EXPECT_DOUBLE_EQ(forward.at("flops").get<double>(), (24 * b * s * h * h + 4 * b * s * s * h) / t);
  // The backward does twice the forward's matrix FLOPs.
  EXPECT_DOUBLE_EQ(report.at("layer").at(3).at("flops").get<double>(),
                   2 * (24 * b * s * h * h + 4 * b * s * s * h) / t);
  // Korthikanti et al., tensor + sequence parallel: sbh/t · (34 + 5as/h) bytes.
  EXPECT_DOUBLE_EQ(report.at("layer_activation_bytes").get<double>(),
                   s * b * h / t * (34 + 5 * a * s / h));
  // megatron-distopt with bf16 weights: 2 + 4 + 12/d bytes per parameter, d = dp = 8.
  const nlohmann::json& only = report.at("ranks").at(0);
  const auto params = only.at("parameters").get<double>();
  EXPECT_DOUBLE_EQ(only.at("weight_bytes").get<double>(), 2 * params);
  EXPECT_DOUBLE_EQ(only.at("gradient_bytes").get<double>(), 4 * params);
  EXPECT_DOUBLE_EQ(only.at("optimizer_bytes").get<double>(), 12 * params / 8);

  Outcome text = metron("cost --model gpt3-175b --hardware dgx-h100 --tp 8 --sp --pp 4 --ops");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, AllOf(HasSubstr("One transformer layer, one microbatch, one GPU:"),
                              HasSubstr("Model state per GPU, pp 4, dp 1, policy ddp"),
                              HasSubstr("  first "), HasSubstr("  middle "), HasSubstr("  last "),
                              HasSubstr("attention-scores"), HasSubstr("qkv-wgrad")));
}

// The per-rank memory of an uneven split. A middle pipeline rank holds only layers (no embedding,
// no head), so its parameters are proportional to its layers: GPT-3 175B's 96 layers as
// 23, 25, 25, 23 give the middle ranks 25/24 of an even split's middle rank.
TEST_F(Cli, CostReportsEachRanksLayersOfAnUnevenSplit) {
  const std::string args = "cost --model gpt3-175b --tp 8 --sp --pp 4 --json";
  const Outcome even = metron(args);
  const Outcome listed = metron(args + " --pipeline-layers 23,25,25,23");
  const Outcome edges = metron(args + " --first-stage-layers 23 --last-stage-layers 23");
  ASSERT_EQ(even.code, 0) << even.err;
  ASSERT_EQ(listed.code, 0) << listed.err;
  ASSERT_EQ(edges.code, 0) << edges.err;
  const nlohmann::json even_ranks = nlohmann::json::parse(even.out).at("ranks");
  const nlohmann::json listed_ranks = nlohmann::json::parse(listed.out).at("ranks");
  ASSERT_EQ(even_ranks.size(), 3U);    // first, a middle one, last
  ASSERT_EQ(listed_ranks.size(), 4U);  // every rank of a listed split
  std::vector<std::int64_t> layers;
  for (const nlohmann::json& rank : listed_ranks) layers.push_back(rank.at("layers"));
  EXPECT_EQ(layers, (std::vector<std::int64_t>{23, 25, 25, 23}));
  EXPECT_EQ(even_ranks.at(1).at("layers"), 24);
  EXPECT_DOUBLE_EQ(listed_ranks.at(1).at("parameters").get<double>(),
                   even_ranks.at(1).at("parameters").get<double>() * 25 / 24);
  // The first/last form gives the same ranks as the list (its middle one is rank pp/2 = 2).
  const nlohmann::json edge_ranks = nlohmann::json::parse(edges.out).at("ranks");
  EXPECT_EQ(edge_ranks.at(0), listed_ranks.at(0));
  EXPECT_EQ(edge_ranks.at(1), listed_ranks.at(2));
  EXPECT_EQ(edge_ranks.at(2), listed_ranks.at(3));
  // Both forms at once, or a split that does not add up: exit 2, naming what is wrong.
  const Outcome both = metron(args + " --pipeline-layers 24,24,24,24 --first-stage-layers 20");
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("expected one way to split the layers, got two"));
  const Outcome short_split = metron(args + " --pipeline-layers 24,24,24,23");
  EXPECT_EQ(short_split.code, 2);
  EXPECT_THAT(short_split.err, HasSubstr("95"));
}

TEST_F(Cli, FusedAttentionStoresNoScoresAndRunsOneKernel) {
  // gpt3-1.3b at b 1, s 2048, bf16, no parallelism: the unfused layer stores
  // sbh·(34 + 5as/h) = 2048·2048·(34 + 80) bytes = 456 MiB; fused, 34·sbh plus the fp32
  // log-sum-exp 4·a·s = 136 MiB + 128 KiB.
  const Outcome unfused = metron("cost --model gpt3-1.3b --hardware dgx-h100 --ops");
  const Outcome fused =
      metron("cost --model gpt3-1.3b --hardware dgx-h100 --ops --attention fused");
  ASSERT_EQ(unfused.code, 0) << unfused.err;
  ASSERT_EQ(fused.code, 0) << fused.err;
  EXPECT_THAT(unfused.out, HasSubstr("activations stored until the backward: 456.0 MiB"));
  EXPECT_THAT(fused.out, HasSubstr("activations stored until the backward: 136.1 MiB"));
  EXPECT_THAT(fused.out, HasSubstr("fused attention"));
  EXPECT_THAT(fused.out, HasSubstr("attention-backward"));
  EXPECT_THAT(fused.out, Not(HasSubstr("softmax")));
  EXPECT_THAT(unfused.out, HasSubstr("softmax"));
}

TEST_F(Cli, Fp8CastsTheLinearGemmsAndStoresTheirInputsInOneByte) {
  // gpt3-1.3b at b 1, s 2048, bf16: FP8 keeps the QKV, projection, up and down inputs in one
  // byte, sbh·(34 − 7 + 80) = 2048·2048·107 bytes = 428 MiB (456 MiB without).
  const Outcome fp8 = metron("cost --model gpt3-1.3b --hardware dgx-h100 --ops --fp8 delayed");
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_THAT(fp8.out, HasSubstr("activations stored until the backward: 428.0 MiB"));
  EXPECT_THAT(fp8.out, HasSubstr("fp8 (delayed scaling)"));
  EXPECT_THAT(fp8.out, AllOf(HasSubstr("qkv-weight-cast"), HasSubstr("mlp-down-grad-cast")));
  // An A100 has no FP8 tensor cores: a typed error naming what is missing.
  const Outcome a100 = metron("cost --model gpt3-1.3b --hardware dgx-a100 --fp8 delayed");
  EXPECT_EQ(a100.code, 2);
  EXPECT_THAT(a100.err, AllOf(HasSubstr("dgx-a100"), HasSubstr("fp8"), HasSubstr("parallel.fp8")));
  EXPECT_THAT(a100.err, Not(HasSubstr("unexpected")));
}

TEST_F(Cli, Fp8MakesTheSimulatedStepFasterAtTheSameModelFlops) {
  const std::string flags =
      " --model gpt3-1.3b --hardware dgx-h100 --gpus 8 --tp 1 --pp 1 --vp 1 --dp 8 --global-batch "
      "64 --schedule 1f1b";
  const Outcome bf16 = metron("simulate --json " + path("bf16.json") + flags);
  const Outcome fp8 = metron("simulate --fp8 delayed --json " + path("fp8.json") + flags);
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  const nlohmann::json a = nlohmann::json::parse(read_file(path("bf16.json")));
  const nlohmann::json b = nlohmann::json::parse(read_file(path("fp8.json")));
  EXPECT_LT(b["iteration_time_ms"].get<double>(), a["iteration_time_ms"].get<double>());
  // The model FLOPs are the same, so the FLOP rate rises as the time falls.
  EXPECT_NEAR(
      b["model_tflops_per_gpu"].get<double>() * b["iteration_time_ms"].get<double>(),
      a["model_tflops_per_gpu"].get<double>() * a["iteration_time_ms"].get<double>(),
      1e-6 * a["model_tflops_per_gpu"].get<double>() * a["iteration_time_ms"].get<double>());
}

TEST_F(Cli, CostTakesMeasuredOpTimesFromAProfile) {
  // gpt3-125m's QKV projection at b = 1, s = 2048, tp = 1: [2048 x 768] · [768 x 3·768].
  write_file_atomically(path("profile.json"),
                        R"({"compute": [{"key": "gemm:2048x2304x768", "dtype": "bf16",)"
                        R"( "time_ms": 5.0}]})");
  const std::string args = "cost --model gpt3-125m --hardware dgx-a100 -b 1 --seq 2048 --json";
  Outcome plain = metron(args);
  Outcome profiled = metron(args + " --profile " + path("profile.json"));
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(profiled.code, 0) << profiled.err;
  const nlohmann::json before = nlohmann::json::parse(plain.out).at("layer").at(0);
  const nlohmann::json after = nlohmann::json::parse(profiled.out).at("layer").at(0);
  const auto op_time = [](const nlohmann::json& phase, const std::string& name) {
    for (const auto& op : phase.at("ops")) {
      if (op.at("name") == name) return op.at("time_ms").get<double>();
    }
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(op_time(after, "qkv"), 5.0);
  EXPECT_DOUBLE_EQ(op_time(after, "mlp-up"), op_time(before, "mlp-up"));
  EXPECT_NEAR(after.at("time_ms").get<double>(),
              before.at("time_ms").get<double>() - op_time(before, "qkv") + 5.0, 1e-9);
}

TEST_F(Cli, CostRejectsImpossibleInputWithExitTwo) {
  Outcome model = metron("cost --model gpt3-175");
  EXPECT_EQ(model.code, 2);
  EXPECT_THAT(model.err, HasSubstr("did you mean \"gpt3-175b\""));
  Outcome heads = metron("cost --model gpt3-175b --tp 5");
  EXPECT_EQ(heads.code, 2);
  EXPECT_THAT(heads.err, HasSubstr("heads (96) must be divisible by tp (5)"));
  Outcome policy = metron("cost --policy zero4");
  EXPECT_EQ(policy.code, 2);
  EXPECT_THAT(policy.err, HasSubstr("unknown policy 'zero4'"));
  // An A100 has no fp8 Tensor Cores, so an fp8 model has no peak to be timed against.
  write_file_atomically(path("tiny-fp8.json"),
                        R"({"name": "tiny-fp8", "layers": 2, "hidden": 64, "heads": 4,)"
                        R"( "vocab": 100, "seq_len": 32, "dtype": "fp8"})");
  Outcome fp8 = metron("cost --hardware dgx-a100 --model " + path("tiny-fp8.json"));
  EXPECT_EQ(fp8.code, 2);
  EXPECT_THAT(fp8.err, AllOf(HasSubstr("fp8"), HasSubstr("dgx-a100")));
  write_file_atomically(path("bad-profile.json"), R"({"compute": [{"key": "x"}]})");
  Outcome profile = metron("cost --profile " + path("bad-profile.json"));
  EXPECT_EQ(profile.code, 2);
  EXPECT_THAT(profile.err, HasSubstr("bad-profile.json: compute[0]"));
}

TEST_F(Cli, SimulateRunsTheDefaultScenarioAndWritesACleanTrace) {
  Outcome r = metron("simulate --trace " + path("t.json") + " --json " + path("r.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out,
              AllOf(HasSubstr("gpt3-175b on 1024 x dgx-h100: tp 8 pp 16 dp 8 vp 2"),
                    HasSubstr("iteration time"), HasSubstr("MFU"), HasSubstr("pipeline bubble"),
                    HasSubstr("exposed communication"), HasSubstr("rank  15")));
  Outcome check = metron("check-trace " + path("t.json"));
  EXPECT_EQ(check.code, 0) << check.err;
  const nlohmann::json result = nlohmann::json::parse(read_file(path("r.json")));
  for (const char* key :
       {"iteration_time_ms", "tokens_per_s", "mfu", "model_tflops_per_gpu", "bubble_fraction",
        "stage_span_bubble_rate", "peak_memory_bytes_max", "per_rank"}) {
    EXPECT_TRUE(result.contains(key)) << key;
  }
  const nlohmann::json& rank = result.at("per_rank").at(3);
  for (const char* key :
       {"rank", "tp", "pp", "dp", "compute_ms", "idle_ms", "bubble_ms", "comm_ms",
        "comm_exposed_ms", "comm_overlapped_ms", "bytes_sent", "peak_memory_bytes"}) {
    EXPECT_TRUE(rank.contains(key)) << key;
  }
  EXPECT_EQ(rank.at("pp"), 3);
}

// --sync X on a built-in scenario is X's defaults in every command (simulate's built-in is
// megatron-distopt with both overlaps, which run's is not); on a scenario file, naming the file's
// own policy keeps the file's knobs, and naming another starts from its defaults.
TEST_F(Cli, SyncFlagStartsFromThePolicysDefaultsUnlessAFileSetItsKnobs) {
  const auto saved_sync = [&](const std::string& args) {
    const Outcome r = metron("simulate " + args + " --save-scenario " + path("saved.json"));
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(read_file(path("saved.json"))).at("sync");
  };
  const nlohmann::json builtin = saved_sync("");
  ASSERT_EQ(builtin.at("policy"), "megatron-distopt");
  ASSERT_EQ(builtin.at("overlap_grad_reduce"), true);  // the premise: the built-in has overlaps
  // A saved scenario leaves out knobs at their defaults (false).
  const nlohmann::json named = saved_sync("--sync megatron-distopt");
  EXPECT_FALSE(named.value("overlap_grad_reduce", false));
  EXPECT_FALSE(named.value("overlap_param_gather", false));
  // A file with the overlaps keeps them when its own policy is named again.
  ASSERT_EQ(metron("simulate --save-scenario " + path("with.json")).code, 0);
  const nlohmann::json kept = saved_sync(path("with.json") + " --sync megatron-distopt");
  EXPECT_EQ(kept.at("overlap_grad_reduce"), true);
  EXPECT_EQ(kept.at("overlap_param_gather"), true);
  EXPECT_EQ(saved_sync(path("with.json") + " --sync zero1").at("policy"), "zero1");
}

TEST_F(Cli, ValidatePredictsWhatSimulatePredictsForTheSameScenario) {
  const std::string scenario =
      R"({"model": "gpt3-1.3b", "hardware": "dgx-a100", "parallel": {"tp": 2, "pp": 2, "dp": 2,
          "vp": 1, "microbatch_size": 1, "global_batch": 16}, "schedule": {"name": "1f1b"}})";
  write_file_atomically(path("s.json"), scenario);
  write_file_atomically(
      path("cases.json"),
      R"({"cases": [{"id": "mine", "group": "my cluster", "source": {"title": "log",
                 "ref": "step 100"}, "published": {"quantity": "iteration_time_s", "value": 2.0},
                 "scenario": )" +
          scenario + "}]}");
  const Outcome simulated = metron("simulate " + path("s.json") + " --json " + path("sim.json"));
  ASSERT_EQ(simulated.code, 0) << simulated.err;
  const Outcome validated =
      metron("validate " + path("cases.json") + " -q --json " + path("v.json"));
  ASSERT_EQ(validated.code, 0) << validated.err;
  EXPECT_THAT(validated.out, HasSubstr("my cluster"));
  const double simulated_s =
      nlohmann::json::parse(read_file(path("sim.json"))).at("iteration_time_ms").get<double>() /
      1e3;
  const nlohmann::json v = nlohmann::json::parse(read_file(path("v.json")));
  EXPECT_NEAR(v.at("cases")[0].at("predicted").get<double>(), simulated_s, simulated_s * 1e-9);
  EXPECT_NEAR(v.at("cases")[0].at("error").get<double>(), (simulated_s - 2.0) / 2.0, 1e-9);
  // The shipped runs, one group of them; a filter that matches nothing is the user's mistake.
  const Outcome shipped = metron("validate -q --only t2_ptd_174");
  ASSERT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_THAT(shipped.out, HasSubstr("narayanan21_t2_ptd_174.6B_1536gpu"));
  EXPECT_THAT(shipped.out, HasSubstr("arXiv:2104.04473, Table 2"));
  EXPECT_THAT(shipped.out, Not(HasSubstr("narayanan21_t1_")));
  const Outcome none = metron("validate -q --only nosuchrun");
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err, HasSubstr("--only nosuchrun"));
  write_file_atomically(path("bad.json"), R"({"cases": [{"id": "x"}]})");
  const Outcome bad = metron("validate -q " + path("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("cases[0] (x): group: missing"));
}

TEST_F(Cli, ModelFlagOnTheBuiltInTrainsAtTheModelsOwnSequenceLength) {
  // The built-in is GPT-3 at 2,048 tokens; llama3-8b's preset trains at 8,192. Tokens per step =
  // global batch 1,536 x the sequence, so the two lengths differ by 4x in the printed line.
  const auto saved_seq = [&](const std::string& args) {
    const Outcome r = metron("simulate " + args + " --save-scenario " + path("seq.json"));
    EXPECT_EQ(r.code, 0) << r.err;
    const nlohmann::json parallel =
        nlohmann::json::parse(read_file(path("seq.json"))).at("parallel");
    const auto seq = parallel.find("seq_len");
    return seq == parallel.end() || seq->is_null() ? std::int64_t{0} : seq->get<std::int64_t>();
  };
  EXPECT_EQ(saved_seq("--model llama3-8b --tp 8 --pp 4 --vp 1 --schedule 1f1b"), 0);  // unset
  EXPECT_EQ(saved_seq("--model llama3-8b --tp 8 --pp 4 --vp 1 --schedule 1f1b --seq 1024"), 1024);
  const Outcome r =
      metron("simulate --model llama3-8b --tp 8 --pp 4 --vp 1 --schedule 1f1b --json " +
             path("seq_result.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json result = nlohmann::json::parse(read_file(path("seq_result.json")));
  const double tokens_per_step =
      result.at("tokens_per_s").get<double>() * result.at("iteration_time_ms").get<double>() / 1e3;
  EXPECT_NEAR(tokens_per_step, 1536.0 * 8192.0, 1536.0 * 8192.0 * 1e-6);
}

TEST_F(Cli, SimulateFlagsDescribeAScenarioThatSimulatesTheSameFromItsFile) {
  const std::string flags =
      "simulate --model gpt3-1.3b --hardware dgx-a100 --gpus 32 --tp 2 --pp 4 -b 2 "
      "--global-batch 64 --seq 1024 --schedule zb-h1";
  Outcome first =
      metron(flags + " --json " + path("a.json") + " --save-scenario " + path("s.json"));
  ASSERT_EQ(first.code, 0) << first.err;
  // dp fills the GPUs the model-parallel sizes leave: 32 / (2·4) = 4.
  EXPECT_THAT(first.out, HasSubstr("tp 2 pp 4 dp 4"));
  const nlohmann::json scenario = nlohmann::json::parse(read_file(path("s.json")));
  EXPECT_EQ(scenario.at("parallel").at("dp"), 4);
  EXPECT_EQ(scenario.at("schedule").at("name"), "zb-h1");
  Outcome again = metron("simulate " + path("s.json") + " --json " + path("b.json") + " --trace " +
                         path("t1.json"));
  ASSERT_EQ(again.code, 0) << again.err;
  // Deterministic: the same scenario gives byte-identical results and traces.
  EXPECT_EQ(read_file(path("a.json")), read_file(path("b.json")));
  ASSERT_EQ(metron("simulate " + path("s.json") + " --trace " + path("t2.json")).code, 0);
  EXPECT_EQ(read_file(path("t1.json")), read_file(path("t2.json")));
  const nlohmann::json result = nlohmann::json::parse(read_file(path("a.json")));
  // The critical path runs from the step's start to its end.
  const nlohmann::json& path_tasks = result.at("critical_path");
  ASSERT_FALSE(path_tasks.empty());
  EXPECT_EQ(path_tasks.front().at("start_ms").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(path_tasks.back().at("end_ms").get<double>(),
                   result.at("iteration_time_ms").get<double>());
}

TEST_F(Cli, SimulateTakesExplicitStageCosts) {
  // 1F1B on 4 stages, 8 microbatches, F = 1 ms, B = 2 ms: (m + p − 1)(F + B) = 33 ms.
  write_file_atomically(path("costs.json"), R"({"parallel": {"pp": 4, "num_microbatches": 8},)"
                                            R"( "schedule": {"name": "1f1b", "p2p": "async"},)"
                                            R"( "costs": {"F": 1, "B": 2}})");
  Outcome r = metron("simulate " + path("costs.json") + " --json " + path("r.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("iteration time        33.000 ms"));
  const nlohmann::json result = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_NEAR(result.at("stage_span_bubble_rate").get<double>(), 9.0 / 33.0, 1e-12);
}

TEST_F(Cli, SimulateRejectsBadScenariosWithExitTwo) {
  write_file_atomically(path("typo.json"), R"({"parallel": {"pp": 2}, "shedule": {}})");
  Outcome typo = metron("simulate " + path("typo.json"));
  EXPECT_EQ(typo.code, 2);
  EXPECT_THAT(typo.err, HasSubstr("shedule: unknown key"));
  Outcome layers = metron("simulate --pp 5 --gpus 40");
  EXPECT_EQ(layers.code, 2);
  EXPECT_THAT(layers.err, HasSubstr("layers (96) must be divisible by pp·vp (5·2 = 10)"));
  Outcome schedule = metron("simulate --schedule 1f2b");
  EXPECT_EQ(schedule.code, 2);
  EXPECT_THAT(schedule.err, HasSubstr("1f2b"));
  EXPECT_FALSE(fs::exists(path("never.json")));
  Outcome nothing = metron("simulate --pp 5 --gpus 40 --json " + path("never.json"));
  EXPECT_EQ(nothing.code, 2);
  EXPECT_FALSE(fs::exists(path("never.json")));
}

TEST_F(Cli, SimulateWritesPerRankAndChakraTracesThatTheirCheckersAccept) {
  // tp 2, pp 2, dp 2 on 8 GPUs: the graph holds pipeline ranks 0 and 1, which are world ranks
  // 0 and tp·dp = 4 in Megatron's order, so the per-rank files are rank-0.json and rank-4.json.
  const std::string flags =
      "simulate --model gpt3-1.3b --hardware dgx-a100 --tp 2 --pp 2 --dp 2 -m 4 --schedule 1f1b";
  Outcome r = metron(flags + " --json " + path("r.json") + " --trace " + path("m.json") +
                     " --trace-dir " + path("ranks") + " --chakra " + path("et"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("per-rank traces"), HasSubstr("chakra traces")));
  EXPECT_TRUE(fs::exists(path("ranks/rank-0.json")));
  EXPECT_TRUE(fs::exists(path("ranks/rank-4.json")));
  for (const char* file : {"et/metron.0.et", "et/metron.1.et", "et/metron.comm_group.json"}) {
    EXPECT_TRUE(fs::exists(path(file))) << file;
  }
  Outcome hta = metron("check-trace --hta " + path("ranks"));
  EXPECT_EQ(hta.code, 0) << hta.err;
  Outcome chakra = metron("check-trace " + path("et"));
  EXPECT_EQ(chakra.code, 0) << chakra.err;
  EXPECT_EQ(metron("check-trace " + path("m.json")).code, 0);

  // The merged trace's HBM counter peaks at the peak memory the result reports (state plus
  // activations), per rank.
  const nlohmann::json result = nlohmann::json::parse(read_file(path("r.json")));
  const nlohmann::json merged = nlohmann::json::parse(read_file(path("m.json")));
  for (const nlohmann::json& rank : result.at("per_rank")) {
    double peak = 0;
    for (const nlohmann::json& e : merged.at("traceEvents")) {
      if (e.at("ph") == "C" && e.at("pid") == rank.at("rank")) {
        peak = std::max(peak, e.at("args").at("allocated_bytes").get<double>());
      }
    }
    EXPECT_NEAR(peak, rank.at("peak_memory_bytes").get<double>(), 1.0) << rank.at("rank");
  }

  // A damaged Chakra file is caught, and a folder that cannot be made is exit 2, writing nothing.
  const std::string et = read_file(path("et/metron.1.et"));
  write_file_atomically(path("et/metron.1.et"), et.substr(0, et.size() - 3));
  Outcome broken = metron("check-trace " + path("et"));
  EXPECT_EQ(broken.code, 2);
  EXPECT_THAT(broken.err, HasSubstr("metron.1.et"));
  Outcome one = metron("check-trace " + path("et/metron.0.et"));
  EXPECT_EQ(one.code, 2);
  EXPECT_THAT(one.err, HasSubstr("expected their folder: metron check-trace " + path("et")));
  write_file_atomically(path("plain"), "x");
  Outcome folder =
      metron(flags + " --json " + path("never.json") + " --trace-dir " + path("plain/sub"));
  EXPECT_EQ(folder.code, 2);
  EXPECT_THAT(folder.err, HasSubstr("--trace-dir: cannot create the folder"));
  EXPECT_FALSE(fs::exists(path("never.json")));
}

TEST_F(Cli, ScheduleRejectsImpossibleCombinationsWithExitTwo) {
  Outcome unknown = metron("schedule --schedule 1f2b --pp 2 -m 2");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown schedule \"1f2b\"; expected one of none, gpipe"));
  Outcome group = metron("schedule --schedule interleaved-1f1b --pp 4 --vp 2 -m 10");
  EXPECT_EQ(group.code, 2);
  EXPECT_THAT(group.err, StartsWith("metron: error: schedule \"interleaved-1f1b\""));
  Outcome layers = metron("schedule --schedule 1f1b --pp 4 -m 4 --layers 10");
  EXPECT_EQ(layers.code, 2);
  EXPECT_THAT(layers.err, HasSubstr("10"));
  Outcome missing = metron("schedule --schedule 1f1b -m 4");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--pp and --microbatches are required (or --order FILE)"));
}

TEST_F(Cli, CheckTraceAcceptsACleanTrace) {
  write_file_atomically(
      path("clean.json"),
      "{\"distributedInfo\": {\"rank\": 1}, \"traceEvents\": [\n"
      R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}},)"
      "\n"
      R"({"ph": "X", "cat": "compute", "name": "F0", "pid": 1, "tid": 7, "ts": 0, "dur": 2}]})");
  Outcome r = metron("check-trace " + path("clean.json") + " --hta");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, path("clean.json") + ": ok (2 events)\n");
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(metron("check-trace --help").out,
              AllOf(HasSubstr("tid never 0"), HasSubstr("--hta")));
}

TEST_F(Cli, CheckTraceListsEveryViolationAndExitsWithTwo) {
  // Two slices on one row that overlap ([0, 10] and [5, 15] µs), and a tid 0.
  write_file_atomically(
      path("broken.json"),
      "{\"traceEvents\": [\n"
      R"({"ph": "X", "cat": "c", "name": "F2", "pid": 1, "tid": 7, "ts": 0, "dur": 10},)"
      "\n"
      R"({"ph": "X", "cat": "c", "name": "F3", "pid": 1, "tid": 7, "ts": 5, "dur": 10},)"
      "\n"
      R"({"ph": "X", "cat": "c", "name": "W", "pid": 1, "tid": 0, "ts": 0, "dur": 1}]})");
  Outcome r = metron("check-trace " + path("broken.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, AllOf(StartsWith("metron: error: " + path("broken.json") +
                                      ": 2 violations of the trace rules\n"),
                           HasSubstr("\n  - traceEvents[2] (X \"W\", pid 1 tid 0): tid 0"),
                           HasSubstr("\n  - traceEvents[1] (X \"F3\", pid 1 tid 7): overlaps "
                                     "traceEvents[0] (X \"F2\") on the same row without nesting")));
  // The same file passes neither with --hta: distributedInfo is missing too.
  EXPECT_THAT(metron("check-trace --hta " + path("broken.json")).err, HasSubstr("3 violations"));
  // A directory: each file checked, named in its violations.
  Outcome directory = metron("check-trace " + dir_.string());
  EXPECT_EQ(directory.code, 2);
  EXPECT_THAT(directory.err, HasSubstr("  - broken.json: traceEvents[2]"));
  Outcome missing = metron("check-trace " + path("nope.json"));
  EXPECT_EQ(missing.code, 2);  // a missing input is bad input, as for every command
  EXPECT_THAT(missing.err, HasSubstr("cannot read '" + path("nope.json") + "'"));
}

TEST_F(Cli, PlanHelpDescribesTheSpaceAndTheOutputs) {
  Outcome r = metron("plan --help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("--trace-top"), HasSubstr("--explain"), HasSubstr("--csv"),
                           HasSubstr("Search space"), HasSubstr("--schedules"),
                           HasSubstr("1f1b,interleaved-1f1b,zb-h1,zb-h2,zb-v,dualpipe-v")));
}

TEST_F(Cli, PlanRejectsBadListsNamingTheFlagAndWritesNothing) {
  const std::string csv = " --csv " + path("plan.csv");
  Outcome zero = metron("plan --tp 0" + csv);
  EXPECT_EQ(zero.code, 2);
  EXPECT_THAT(zero.err, HasSubstr("--tp: expected integers >= 1 separated by commas, got '0'"));
  Outcome policy = metron("plan --sync megatron-distopt,nonsense" + csv);
  EXPECT_EQ(policy.code, 2);
  EXPECT_THAT(policy.err,
              AllOf(HasSubstr("--sync: expected ddp|megatron-ddp"), HasSubstr("got 'nonsense'")));
  Outcome schedule = metron("plan --schedules 1f1b,1f2b" + csv);
  EXPECT_EQ(schedule.code, 2);
  EXPECT_THAT(schedule.err, AllOf(HasSubstr("--schedules: "), HasSubstr("1f2b")));
  Outcome sp = metron("plan --sp maybe" + csv);
  EXPECT_EQ(sp.code, 2);
  EXPECT_THAT(sp.err, HasSubstr("--sp: expected on, off or both, got 'maybe'"));
  Outcome empty = metron("plan --pp 2,,4" + csv);
  EXPECT_EQ(empty.code, 2);
  EXPECT_THAT(empty.err, HasSubstr("--pp: expected integers >= 1"));
  Outcome headroom = metron("plan --memory-headroom 1" + csv);
  EXPECT_EQ(headroom.code, 2);
  EXPECT_THAT(headroom.err, HasSubstr("--memory-headroom"));
  EXPECT_FALSE(fs::exists(path("plan.csv")));
}

// gpt3-1.3b on 16 A100s, tp and pp in {1, 2}, 1F1B, no recompute, microbatch 1 or 2: 32
// configurations, a fraction of a second.
const std::string kTinyPlanButTp =
    "plan --model gpt3-1.3b --hardware dgx-a100 --gpus 16 --global-batch 64 --seq 1024 "
    "--pp 1,2 --schedules 1f1b --recompute none --microbatch-size 1,2 --top 3";
const std::string kTinyPlan = kTinyPlanButTp + " --tp 1,2";

TEST_F(Cli, PlanWritesTheRankingTracesAndScenariosOfTheBest) {
  Outcome r = metron(kTinyPlan + " --csv " + path("plan.csv") + " --json " + path("plan.json") +
                     " --trace-top 1 --save-scenario-top 1 --trace-dir " + path("best"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());  // not a terminal: no progress bar
  EXPECT_THAT(r.out, AllOf(StartsWith("gpt3-1.3b on dgx-a100, up to 16 GPUs"),
                           HasSubstr("\n   1  "), HasSubstr("enumerated 32 configurations")));
  const std::string csv = read_file(path("plan.csv"));
  const auto lines = std::count(csv.begin(), csv.end(), '\n');
  const nlohmann::json json = nlohmann::json::parse(read_file(path("plan.json")));
  const nlohmann::json& ranked = json.at("ranked");
  ASSERT_FALSE(ranked.empty());
  EXPECT_LE(ranked.size(), 3U);
  EXPECT_EQ(lines, static_cast<std::ptrdiff_t>(ranked.size()) + 1);  // + header
  EXPECT_EQ(json.at("stats").at("enumerated"), 32);
  // The trace of the best passes the trace rules; its scenario simulates to the ranked figures.
  Outcome check = metron("check-trace " + path("best/plan-trace-1.json"));
  EXPECT_EQ(check.code, 0) << check.err;
  EXPECT_FALSE(fs::exists(path("best/plan-trace-2.json")));
  Outcome again =
      metron("simulate " + path("best/plan-scenario-1.json") + " --json " + path("r.json"));
  ASSERT_EQ(again.code, 0) << again.err;
  const nlohmann::json result = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_DOUBLE_EQ(result.at("tokens_per_s").get<double>(),
                   ranked.at(0).at("tokens_per_s").get<double>());
  EXPECT_EQ(nlohmann::json::parse(read_file(path("best/plan-scenario-1.json"))),
            ranked.at(0).at("scenario"));
  // --quiet prints nothing and still writes what is asked for.
  Outcome quiet = metron(kTinyPlan + " -q --explain --csv " + path("quiet.csv"));
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_THAT(quiet.out, IsEmpty());
  EXPECT_EQ(read_file(path("quiet.csv")), csv);
}

TEST_F(Cli, PlanSearchesTheKernelOptionsItIsAllowed) {
  // Both attention kernels double the 32 configurations; each row says which it ranks.
  Outcome r = metron(kTinyPlan + " --attention unfused,fused --json " + path("plan.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("enumerated 64 configurations"));
  const nlohmann::json ranked = nlohmann::json::parse(read_file(path("plan.json"))).at("ranked");
  ASSERT_FALSE(ranked.empty());
  for (const nlohmann::json& row : ranked) {
    EXPECT_EQ(row.at("scenario").at("parallel").at("attention"), row.at("attention"));
  }
  // FP8 on the A100, which has no fp8 peak: refused before the search, naming both.
  Outcome fp8 = metron(kTinyPlan + " --fp8 off,delayed --csv " + path("fp8.csv"));
  EXPECT_EQ(fp8.code, 2);
  EXPECT_THAT(fp8.err, AllOf(HasSubstr("fp8 \"delayed\" needs a GPU with an fp8 peak"),
                             HasSubstr("dgx-a100")));
  EXPECT_FALSE(fs::exists(path("fp8.csv")));
  Outcome kernel = metron(kTinyPlan + " --attention flash");
  EXPECT_EQ(kernel.code, 2);
  EXPECT_THAT(kernel.err, HasSubstr("--attention: expected unfused or fused"));
  Outcome overlap = metron(kTinyPlan + " --tp-comm-overlap yes");
  EXPECT_EQ(overlap.code, 2);
  EXPECT_THAT(overlap.err, HasSubstr("--tp-comm-overlap: expected on, off or both"));
}

TEST_F(Cli, PlanExplainsWhatItDropped) {
  // tp 3 cannot divide gpt3-1.3b's 16 heads.
  Outcome r = metron(kTinyPlanButTp + " --tp 1,3 --explain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("Dropped, by reason:\n"), HasSubstr("  tensor-parallel: "),
                           HasSubstr("    tp=3: heads (16)")));
}

TEST_F(Cli, PlanPlacesTheConfigurationTheUserNamesAndRefusesOneItCannotRead) {
  // The ranking's best, named in words as its table prints it, places first with the same time.
  Outcome best = metron(kTinyPlan + " --json " + path("plan.json"));
  ASSERT_EQ(best.code, 0) << best.err;
  const nlohmann::json ranked = nlohmann::json::parse(read_file(path("plan.json"))).at("ranked");
  const std::string name = ranked.at(0).at("configuration").get<std::string>();
  Outcome r = metron(kTinyPlan + " --compare-with \"" + name + "\" --json " + path("c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("compared with " + name), HasSubstr("it ranks #1; nothing")));
  const nlohmann::json compared = nlohmann::json::parse(read_file(path("c.json"))).at("compared");
  EXPECT_EQ(compared.at("rank"), 1);
  EXPECT_EQ(compared.at("iteration_time_ms"), ranked.at(0).at("iteration_time_ms"));
  // A word that is no field: exit 2 before the search, naming it, and nothing written.
  Outcome bad = metron(kTinyPlan + " --compare-with \"tp2 pp2 fast\" --json " + path("b.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("'fast' is not a configuration field"));
  EXPECT_FALSE(fs::exists(path("b.json")));
}

}  // namespace
}  // namespace metron
