// `metron run` as a user meets it (issue 16): a real run on the CPU backend (forked ranks, Gloo,
// libtorch) whose result JSON lines up with `simulate --json` key by key and whose traces pass
// the Perfetto and HTA rules; the same run under torchrun and mpirun; and the refusals (exit 2)
// that must come before any process starts.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "metron/base/file_io.h"
#include "support/cli_runner.h"
#include "support/free_port.h"

namespace metron {
namespace {

using ::testing::AllOf;
using testing::Cli;
using ::testing::HasSubstr;
using testing::Outcome;
using ::testing::StartsWith;
using Json = nlohmann::json;

const std::string kData = std::string(METRON_SOURCE_DIR) + "/tests/cli/data/";
/// A 4-layer model of hidden 256 at sequence 128 on 2 pipeline ranks × 2 replicas: a step of
/// about a tenth of a second on two cores.
const std::string kSmallRun = "--model " + kData +
                              "flags-small-model.json --hardware cpu-local --pp 2 --dp 2 -m 2 "
                              "--schedule 1f1b --sync megatron-ddp --iterations 2 --warmup 1";

const std::string kTwoRanks = "--model " + kData +
                              "flags-small-model.json --hardware cpu-local --pp 2 -m 2 "
                              "--iterations 1 --warmup 0";

/// The keys of a JSON object, recursively through objects ("per_rank" through its first entry).
std::set<std::string> keys(const Json& j, const std::string& prefix = "") {
  std::set<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    out.insert(prefix + it.key());
    // Group names differ with what a rank communicates: only their maps' keys are compared.
    if (it.value().is_object() && it.key() != "bytes_sent" && it.key() != "collective_bytes" &&
        it.key() != "bubble_ms") {
      for (const std::string& k : keys(it.value(), prefix + it.key() + ".")) out.insert(k);
    }
    if (it.key() == "per_rank" && !it.value().empty()) {
      for (const std::string& k : keys(it.value()[0], "per_rank[].")) out.insert(k);
    }
  }
  return out;
}

TEST_F(Cli, RunExecutesAStepWithTheKeysOfSimulateAndTracesThatPassTheRules) {
  const Outcome r = metron("run " + kSmallRun + " --json " + path("run.json") + " --trace " +
                           path("run-trace.json") + " --trace-dir " + path("ranks"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("4 ranks on the cpu backend, median of 2 iterations"),
                           HasSubstr("executed              4 ranks")));
  const Outcome s = metron("simulate " + kSmallRun.substr(0, kSmallRun.find(" --iterations")) +
                           " --full --json " + path("sim.json"));
  ASSERT_EQ(s.code, 0) << s.err;
  const Json run = Json::parse(read_file(path("run.json")));
  Json sim = Json::parse(read_file(path("sim.json")));
  std::set<std::string> run_keys = keys(run);
  std::erase_if(run_keys, [](const std::string& k) { return k.starts_with("measured"); });
  EXPECT_EQ(run_keys, keys(sim));
  EXPECT_EQ(run["per_rank"].size(), 4U);
  EXPECT_EQ(run["measured"]["iteration_times_ms"].size(), 2U);
  // The median iteration is the one reported.
  const double median =
      run["measured"]["iteration_times_ms"][run["measured"]["median_iteration"].get<std::size_t>()];
  EXPECT_DOUBLE_EQ(run["iteration_time_ms"].get<double>(), median);
  for (const Json& rank : run["per_rank"]) {
    EXPECT_GT(rank["compute_ms"].get<double>(), 0);
    EXPECT_LE(rank["compute_ms"].get<double>(), median);
  }
  EXPECT_EQ(metron("check-trace " + path("run-trace.json")).code, 0);
  const Outcome hta = metron("check-trace --hta " + path("ranks"));
  EXPECT_EQ(hta.code, 0) << hta.err;
  EXPECT_TRUE(std::filesystem::exists(path("ranks/rank-3.json")));
}

// The same step predicted and measured, compared as traces and as results (issue 17's
// `metron compare`; its numbers are checked against hand computations in the traces tests).
TEST_F(Cli, CompareSetsAPredictionAgainstAMeasurement) {
  const std::string flags = kTwoRanks.substr(0, kTwoRanks.find(" --iterations")) +
                            " --tp 1 --dp 1 --vp 1 --seq 128 -b 1 --no-sp --schedule 1f1b "
                            "--sync megatron-ddp";
  ASSERT_EQ(metron("simulate " + flags + " --full --trace " + path("p.json") + " --json " +
                   path("pr.json"))
                .code,
            0);
  const Outcome run = metron("run " + flags + " --iterations 1 --warmup 0 --compare --trace " +
                             path("m.json") + " --json " + path("mr.json"));
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, AllOf(HasSubstr("predicted (metron simulate) against measured"),
                             HasSubstr("duration error by task kind")));
  const Outcome traces = metron("compare " + path("p.json") + " " + path("m.json") +
                                " --top 3 --trace " + path("both.json"));
  ASSERT_EQ(traces.code, 0) << traces.err;
  EXPECT_THAT(traces.out, AllOf(HasSubstr("iteration time"), HasSubstr("rank 1\n"),
                                HasSubstr("the 3 tasks that differ most")));
  EXPECT_EQ(metron("check-trace " + path("both.json")).code, 0);
  const Outcome results = metron("compare " + path("pr.json") + " " + path("mr.json"));
  ASSERT_EQ(results.code, 0) << results.err;
  EXPECT_THAT(results.out, AllOf(HasSubstr("iteration time"), HasSubstr("rank 1\n  compute  ")));
  const Outcome mixed = metron("compare " + path("p.json") + " " + path("mr.json"));
  EXPECT_EQ(mixed.code, 2);
  EXPECT_THAT(mixed.err, HasSubstr("one is a trace and one a result"));
}

/// Every "profile_key" in a JSON document.
void profile_keys(const Json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    if (j.contains("profile_key")) out.insert(j["profile_key"].get<std::string>());
    for (const auto& [key, value] : j.items()) profile_keys(value, out);
  } else if (j.is_array()) {
    for (const Json& value : j) profile_keys(value, out);
  }
}

// `metron profile` measures exactly the step's distinct operations: those `metron cost --ops`
// lists for the model's layer, embedding and head, plus each pipeline rank's optimizer step
// (its Adam over that rank's parameters); and `simulate --profile` prices with them.
TEST_F(Cli, ProfileMeasuresTheStepsDistinctOperations) {
  const std::string model =
      "--model " + kData + "flags-small-model.json --hardware cpu-local --tp 1 --seq 128 -b 1";
  const Outcome profile = metron("profile " + model +
                                 " --pp 2 --dp 1 --vp 1 -m 2 --schedule 1f1b --repetitions 1 "
                                 "--warmup 0 --slowdown-seconds 0 -o " +
                                 path("profile.json"));
  ASSERT_EQ(profile.code, 0) << profile.err;
  std::set<std::string> measured;
  const Json written = Json::parse(read_file(path("profile.json")));
  for (const Json& e : written["compute"]) {
    EXPECT_GE(e["time_ms"].get<double>(), 0);
    measured.insert(e["key"].get<std::string>());
  }
  const Outcome cost = metron("cost " + model + " --pp 2 --ops --json");
  ASSERT_EQ(cost.code, 0) << cost.err;
  std::set<std::string> listed;
  profile_keys(Json::parse(cost.out), listed);
  std::set<std::string> extra;
  std::set_difference(measured.begin(), measured.end(), listed.begin(), listed.end(),
                      std::inserter(extra, extra.end()));
  EXPECT_TRUE(std::includes(measured.begin(), measured.end(), listed.begin(), listed.end()))
      << listed.size() << " listed, " << measured.size() << " measured";
  ASSERT_EQ(extra.size(), 2U);  // one Adam per pipeline rank (their parameter counts differ)
  for (const std::string& k : extra) EXPECT_THAT(k, StartsWith("elementwise:adam:"));
  const std::string flags = model + " --pp 2 --dp 1 --vp 1 -m 2 --schedule 1f1b --no-sp";
  const Outcome plain = metron("simulate " + flags + " --json " + path("a.json"));
  const Outcome priced = metron("simulate " + flags + " --profile " + path("profile.json") +
                                " --json " + path("b.json") + " --save-scenario " + path("s.json"));
  ASSERT_EQ(priced.code, 0) << priced.err;
  EXPECT_NE(Json::parse(read_file(path("a.json")))["iteration_time_ms"],
            Json::parse(read_file(path("b.json")))["iteration_time_ms"]);
  // The scenario keeps the profile: it predicts the same again.
  const Outcome again = metron("simulate " + path("s.json") + " --json " + path("c.json"));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(Json::parse(read_file(path("b.json")))["iteration_time_ms"],
            Json::parse(read_file(path("c.json")))["iteration_time_ms"]);
}

// With fewer GPUs than ranks (CI's machines have none), --backend cuda says why it cannot run:
// the GPU a rank needs and how many this machine has, or that this build has no CUDA backend.
// Exit 2, an input error.
TEST_F(Cli, RunOnCudaWithoutEnoughGpusSaysWhy) {
  const Outcome cuda = metron("run " + kSmallRun + " --backend cuda");
  if (cuda.code == 0) GTEST_SKIP() << "this machine has a GPU for each of the 4 ranks";
  EXPECT_EQ(cuda.code, 2) << cuda.err;
  EXPECT_THAT(cuda.err,
              ::testing::AnyOf(HasSubstr(" of this machine, which has "),
                               HasSubstr("--backend cuda: this metron was built without the CUDA")))
      << cuda.err;
}

TEST_F(Cli, RunRefusesBeforeStartingAnything) {
  const Outcome nproc = metron("run " + kSmallRun + " --nproc 3");
  EXPECT_EQ(nproc.code, 2);
  EXPECT_THAT(nproc.err, HasSubstr("--nproc 3: the graph has 4 ranks; expected --nproc 4"));
  const Outcome big = metron("run --model gpt3-175b --tp 8 --pp 16 --dp 8");
  EXPECT_EQ(big.code, 2);
  EXPECT_THAT(big.err, HasSubstr("1024 ranks"));
  // A graph that deadlocks under the ordering rules: refused with every blocked task named.
  const Outcome convert =
      metron("graph convert " + kData + "swapped-receives.txt " + path("dl.json") + " --to json");
  ASSERT_EQ(convert.code, 0) << convert.err;
  const Outcome deadlock = metron("run " + path("dl.json") + " --timeout 5");
  EXPECT_EQ(deadlock.code, 2);
  EXPECT_THAT(deadlock.err, AllOf(StartsWith("metron: error: deadlock: no task can make progress"),
                                  HasSubstr("rank 0 stream \"pp-recv-1\"")));
}

TEST_F(Cli, RunExecutesAGraphFile) {
  ASSERT_EQ(metron("schedule --pp 2 -m 4 --format json -o " + path("g.json")).code, 0);
  const Outcome r = metron("run " + path("g.json") + " --iterations 1 --json " + path("r.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("executed              2 ranks"));
  EXPECT_EQ(Json::parse(read_file(path("r.json")))["per_rank"].size(), 2U);
}

using testing::free_port;

TEST_F(Cli, TorchrunLaunchesTwoRanks) {
  if (std::system("command -v torchrun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "torchrun is not installed (Debian's python3-torch; scripts/setup.sh)";
  }
  // Debian's torchrun 1.13 under Python 3.11 fails unless --redirects and --tee are 1 or 2: its
  // Std flag parser loops over the IntFlag's members, which no longer include 0 and 3.
  const std::string command =
      "torchrun --no_python --redirects 1 --tee 1 --log_dir " + path("logs") +
      " --nnodes 1 --nproc_per_node 2 --master_addr "
      "127.0.0.1 --master_port " +
      std::to_string(free_port()) + " " + std::string(METRON_BINARY) + " run " + kTwoRanks +
      " --json " + path("r.json") + " >" + path("out") + " 2>" + path("err");
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(path("err"));
  EXPECT_THAT(read_file(path("out")), HasSubstr("2 ranks on the cpu backend"));
  EXPECT_EQ(Json::parse(read_file(path("r.json")))["per_rank"].size(), 2U);
}

TEST_F(Cli, MpirunLaunchesTwoRanks) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "mpirun is not installed (Debian's openmpi-bin; scripts/setup.sh)";
  }
  const std::string command =
      "mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=" +
      std::to_string(free_port()) + " " + std::string(METRON_BINARY) + " run " + kTwoRanks +
      " --json " + path("r.json") + " >" + path("out") + " 2>" + path("err");
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(path("err"));
  EXPECT_THAT(read_file(path("out")), HasSubstr("2 ranks on the cpu backend"));
  EXPECT_EQ(Json::parse(read_file(path("r.json")))["per_rank"].size(), 2U);
}

// srun is not installed here: its environment is what a Slurm step gives each task, so two
// processes with that environment are two ranks of an srun launch.
TEST_F(Cli, SlurmEnvironmentRunsOneRankPerProcess) {
  const std::string port = std::to_string(free_port());
  const auto rank = [&](int r) {
    return "SLURM_PROCID=" + std::to_string(r) +
           " SLURM_NTASKS=2 SLURM_JOB_NODELIST='localhost' MASTER_PORT=" + port + " " +
           std::string(METRON_BINARY) + " run " + kTwoRanks + " --json " + path("r.json") + " >" +
           path("out" + std::to_string(r)) + " 2>" + path("err" + std::to_string(r));
  };
  write_file_atomically(path("srun.sh"), rank(0) + " &\nfirst=$!\n" + rank(1) +
                                             "\nsecond=$?\nwait $first && exit $second\n");
  ASSERT_EQ(std::system(("bash " + path("srun.sh")).c_str()), 0)
      << read_file(path("err0")) << read_file(path("err1"));
  EXPECT_THAT(read_file(path("out0")), HasSubstr("2 ranks on the cpu backend"));
  EXPECT_EQ(read_file(path("out1")), "");  // rank 0 reports
  EXPECT_EQ(Json::parse(read_file(path("r.json")))["per_rank"].size(), 2U);
}

TEST_F(Cli, ALaunchersEnvironmentMustFitTheGraph) {
  const Outcome size = metron_with_env(
      "RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999", "run " + kTwoRanks);
  EXPECT_EQ(size.code, 2);
  EXPECT_THAT(size.err, HasSubstr("torchrun started 3 processes; the graph has 2 ranks"));
  const Outcome garbled = metron_with_env("SLURM_PROCID=x SLURM_NTASKS=2", "run " + kTwoRanks);
  EXPECT_EQ(garbled.code, 2);
  EXPECT_THAT(garbled.err,
              HasSubstr("environment variable SLURM_PROCID: expected a non-negative integer"));
  const Outcome port = metron_with_env(
      "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=65535", "run " + kTwoRanks);
  EXPECT_EQ(port.code, 2);
  EXPECT_THAT(port.err, HasSubstr("environment variable MASTER_PORT: expected a port from 1 to "
                                  "65534 (metron's store listens on MASTER_PORT + 1); got "
                                  "'65535'"));
  const Outcome incomplete = metron_with_env("RANK=0 WORLD_SIZE=2", "run " + kTwoRanks);
  EXPECT_EQ(incomplete.code, 2);
  EXPECT_THAT(incomplete.err, HasSubstr("environment variable MASTER_ADDR: expected it set"));
}

}  // namespace
}  // namespace metron
