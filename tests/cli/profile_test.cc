// `metron profile`'s communication and `--sweep` as a user meets them (issue 17): a profile lists
// exactly the graph's distinct collectives and transfers, keyed as the cost model looks them up
// (enumerated here independently from the graph `metron schedule` writes and the placement worked
// out by hand); `simulate --profile` charges a hand-written profile's times exactly; the measured
// slow-down replaces the hardware's; and the sweep writes a hardware document that loads. Times
// are only checked to be positive and finite: the machine is shared and noisy.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "metron/base/file_io.h"
#include "support/cli_runner.h"

namespace metron {
namespace {

using ::testing::AllOf;
using testing::Cli;
using ::testing::HasSubstr;
using testing::Outcome;
using ::testing::StartsWith;
using Json = nlohmann::json;

const std::string kData = std::string(METRON_SOURCE_DIR) + "/tests/cli/data/";

/// A machine of one GPU per node: every group of n ranks spans n nodes, and pipeline neighbours
/// never share one.
const std::string kOnePerNode =
    R"({"name": "one-per-node", "gpu": {"name": "g", "peak_flops": {"bf16": 1e12, "fp32": 1e12},)"
    R"( "hbm_bandwidth": 1e11, "hbm_capacity": 10000000000}, "gpus_per_node": 1,)"
    R"( "intra_node": {"bandwidth": 1e10, "latency": 1e-6},)"
    R"( "inter_node": {"bandwidth": 1e9, "latency": 1e-5, "topology": "t"}})";

/// (op, ranks, nodes, bytes per call): a profile's collective key.
using Key = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>;

/// The graph's distinct collectives as the cost model keys them, each group placed by its kind
/// with `placement` (worked out by hand for the scenario), and its distinct transfer sizes.
struct Communication {
  std::map<Key, std::int64_t> collectives;  ///< key → a count it is issued with
  std::set<std::int64_t> p2p;
};

Communication enumerate(
    const Json& graph,
    const std::map<std::string, std::pair<std::int64_t, std::int64_t>>& placement) {
  Communication out;
  for (const Json& task : graph["tasks"]) {
    if (task["kind"] == "collective") {
      const std::string group = graph["groups"][task["group"].get<std::size_t>()]["name"];
      const std::string kind = group.substr(0, group.find_first_of("0123456789"));
      const std::int64_t count = task.value("count", 1);
      const std::int64_t bytes = task["bytes"].get<std::int64_t>() / count;
      const auto [ranks, nodes] = placement.at(kind);
      if (bytes > 0) out.collectives[{task["op"].get<std::string>(), ranks, nodes, bytes}] = count;
    } else if (task["kind"] == "send" && task["bytes"].get<std::int64_t>() > 0) {
      out.p2p.insert(task["bytes"].get<std::int64_t>());
    }
  }
  return out;
}

class Profile : public Cli {
 protected:
  /// The scenario's flags for profile and simulate, and the same scenario for `schedule`.
  std::string flags(const std::string& hardware, int tp, int pp, int dp) {
    return "--model " + kData + "flags-small-model.json --hardware " + hardware + " --tp " +
           std::to_string(tp) + " --pp " + std::to_string(pp) + " --dp " + std::to_string(dp) +
           " -m 2 --seq 128 -b 1 --no-sp --vp 1 --schedule 1f1b --p2p async --sync megatron-ddp";
  }
  Json graph(const std::string& hardware, int tp, int pp, int dp) {
    const Outcome s =
        metron("schedule --schedule 1f1b --model " + kData + "flags-small-model.json --hardware " +
               hardware + " --tp " + std::to_string(tp) + " --pp " + std::to_string(pp) + " --dp " +
               std::to_string(dp) + " -m 2 --p2p async --sync megatron-ddp --format json -o " +
               path("graph.json"));
    EXPECT_EQ(s.code, 0) << s.err;
    return Json::parse(read_file(path("graph.json")));
  }
};

std::set<Key> keys_of(const Json& profile) {
  std::set<Key> out;
  for (const Json& e : profile["collectives"]) {
    EXPECT_TRUE(std::isfinite(e["time_ms"].get<double>()) && e["time_ms"].get<double>() > 0) << e;
    out.insert({e["op"].get<std::string>(), e["ranks"].get<std::int64_t>(),
                e["nodes"].get<std::int64_t>(), e["bytes"].get<std::int64_t>()});
  }
  return out;
}

TEST_F(Profile, ListsExactlyTheGraphsDistinctCollectivesAndTransfers) {
  // tp 2 × pp 2 on one GPU per node: a tensor-parallel pair spans 2 nodes, and so does every
  // pipeline transfer. The layer's all-reduces are tasks of `count` calls, keyed per call.
  write_file_atomically(path("hw.json"), kOnePerNode);
  const Communication expected = enumerate(graph(path("hw.json"), 2, 2, 1), {{"tp", {2, 2}}});
  ASSERT_FALSE(expected.collectives.empty());
  ASSERT_FALSE(expected.p2p.empty());
  const Outcome p =
      metron("profile " + flags(path("hw.json"), 2, 2, 1) +
             " --repetitions 1 --warmup 0 --slowdown-seconds 0 -o " + path("profile.json"));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_THAT(p.err, HasSubstr("metron profile: 4 ranks time their compute operations at once"));
  const Json profile = Json::parse(read_file(path("profile.json")));
  std::set<Key> want;
  for (const auto& [key, count] : expected.collectives) want.insert(key);
  EXPECT_EQ(keys_of(profile), want);
  std::set<std::pair<std::int64_t, bool>> p2p;
  for (const Json& e : profile["p2p"]) {
    EXPECT_GT(e["time_ms"].get<double>(), 0) << e;
    p2p.insert({e["bytes"].get<std::int64_t>(), e["same_node"].get<bool>()});
  }
  std::set<std::pair<std::int64_t, bool>> want_p2p;
  for (const std::int64_t bytes : expected.p2p) want_p2p.insert({bytes, false});
  EXPECT_EQ(p2p, want_p2p);
  EXPECT_GE(profile["compute_slowdown_during_comm"].get<double>(), 0);
  EXPECT_FALSE(profile["compute"].empty());
}

TEST_F(Profile, DataParallelGradientsAreKeyedOnTheirNode) {
  // dp 2 on DGX H100s (8 GPUs a node): the replicas' gradient all-reduces stay in one node.
  const Communication expected = enumerate(graph("dgx-h100", 1, 1, 2), {{"dp", {2, 1}}});
  ASSERT_FALSE(expected.collectives.empty());
  const Outcome p =
      metron("profile " + flags("dgx-h100", 1, 1, 2) +
             " --repetitions 1 --warmup 0 --slowdown-seconds 0 -o " + path("profile.json"));
  ASSERT_EQ(p.code, 0) << p.err;
  const Json profile = Json::parse(read_file(path("profile.json")));
  std::set<Key> want;
  for (const auto& [key, count] : expected.collectives) want.insert(key);
  EXPECT_EQ(keys_of(profile), want);
  EXPECT_TRUE(profile["p2p"].empty());
}

/// The slices of a trace by graph task id: (name, duration in ns).
std::map<std::int64_t, std::pair<std::string, std::int64_t>> slices_by_task(const Json& trace) {
  std::map<std::int64_t, std::pair<std::string, std::int64_t>> out;
  for (const Json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("task")) continue;
    out[e["args"]["task"].get<std::int64_t>()] = {e["name"].get<std::string>(),
                                                  std::llround(e["dur"].get<double>() * 1000)};
  }
  return out;
}

TEST_F(Profile, SimulateChargesAHandWrittenProfilesCollectiveAndTransferTimesExactly) {
  write_file_atomically(path("hw.json"), kOnePerNode);
  const Json g = graph(path("hw.json"), 2, 2, 1);
  const Communication c = enumerate(g, {{"tp", {2, 2}}});
  // A time for each key: 11 µs, 22 µs, ...; 7 µs for every transfer.
  Json profile = {{"collectives", Json::array()}, {"p2p", Json::array()}};
  std::map<Key, std::int64_t> ns;
  for (const auto& [key, count] : c.collectives) {
    ns[key] = 11000 * static_cast<std::int64_t>(ns.size() + 1);
    profile["collectives"].push_back({{"op", std::get<0>(key)},
                                      {"ranks", std::get<1>(key)},
                                      {"nodes", std::get<2>(key)},
                                      {"bytes", std::get<3>(key)},
                                      {"time_ms", static_cast<double>(ns[key]) / 1e6}});
  }
  for (const std::int64_t bytes : c.p2p) {
    profile["p2p"].push_back({{"bytes", bytes}, {"same_node", false}, {"time_ms", 0.007}});
  }
  write_file_atomically(path("hand.json"), profile.dump());
  const Outcome s = metron("simulate " + flags(path("hw.json"), 2, 2, 1) + " --profile " +
                           path("hand.json") + " --trace " + path("t.json"));
  ASSERT_EQ(s.code, 0) << s.err;
  // `schedule` and `simulate` build the same graph, so a task has one id in both (checked
  // through the slice's name).
  const auto slices = slices_by_task(Json::parse(read_file(path("t.json"))));
  int collectives = 0;
  int transfers = 0;
  for (const Json& task : g["tasks"]) {
    const std::int64_t id = task["id"];
    if (task["kind"] == "collective") {
      const std::int64_t count = task.value("count", 1);
      const std::int64_t bytes = task["bytes"];
      const Key key{task["op"].get<std::string>(), 2, 2, bytes / count};
      ASSERT_TRUE(slices.contains(id)) << task;
      EXPECT_THAT(slices.at(id).first, AllOf(StartsWith(task["op"].get<std::string>()),
                                             HasSubstr("bytes=" + std::to_string(bytes))));
      // count calls, each taking its measured time
      EXPECT_EQ(slices.at(id).second, count * ns.at(key)) << task;
      ++collectives;
    } else if (task["kind"] == "send" || task["kind"] == "recv") {
      ASSERT_TRUE(slices.contains(id)) << task;
      EXPECT_THAT(slices.at(id).first, StartsWith(task["kind"] == "send" ? "SEND" : "RECV"));
      EXPECT_EQ(slices.at(id).second, 7000) << task;
      ++transfers;
    }
  }
  EXPECT_GT(collectives, 0);
  EXPECT_GT(transfers, 0);
}

TEST_F(Profile, AProfilesSlowdownReplacesTheHardwares) {
  // The same step with the slow-down given by the hardware, or by a profile over a hardware
  // without one: the same prediction; and a different one without any.
  // The same holds for the communication slow-down during compute.
  write_file_atomically(path("hw.json"), kOnePerNode);
  const auto iteration_ms = [&](const std::string& hardware, const std::string& extra) {
    const Outcome s =
        metron("simulate " + flags(hardware, 1, 2, 2) + extra + " --json " + path("r.json"));
    EXPECT_EQ(s.code, 0) << s.err;
    return Json::parse(read_file(path("r.json")))["iteration_time_ms"].get<double>();
  };
  const double none = iteration_ms(path("hw.json"), "");
  for (const char* key : {"compute_slowdown_during_comm", "comm_slowdown_during_compute"}) {
    SCOPED_TRACE(key);
    Json slow = Json::parse(kOnePerNode);
    slow[key] = 0.5;
    write_file_atomically(path("slow.json"), slow.dump());
    write_file_atomically(path("p.json"), Json{{key, 0.5}}.dump());
    const double by_hardware = iteration_ms(path("slow.json"), "");
    const double by_profile = iteration_ms(path("hw.json"), " --profile " + path("p.json"));
    EXPECT_EQ(by_profile, by_hardware);
    EXPECT_GT(by_profile, none);
  }
  write_file_atomically(path("bad.json"), R"({"compute_slowdown_during_comm": 11})");
  const Outcome bad =
      metron("simulate " + flags(path("hw.json"), 1, 2, 2) + " --profile " + path("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("compute_slowdown_during_comm: expected a number between 0 "
                                 "and 10, got 11"));
}

TEST_F(Profile, SweepWritesAHardwareDocumentThatLoads) {
  const Outcome s = metron(
      "profile --sweep -o " + path("hw.json") +
      " --sweep-gemm-max 64 --sweep-add-max 4096 --sweep-message-max 4194304 --repetitions 2 "
      "--warmup 0 --slowdown-seconds 0.1");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_THAT(s.err, HasSubstr("metron profile --sweep: 11 all-reduce sizes"));
  const Json doc = Json::parse(read_file(path("hw.json")));
  const Json& hw = doc["hardware"];
  const auto sane = [](const Json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
  };
  for (const char* dtype : {"fp32", "bf16", "fp16", "fp8"}) {
    EXPECT_TRUE(sane(hw["gpu"]["peak_flops"][dtype])) << dtype;
    EXPECT_EQ(hw["gpu"]["peak_flops"][dtype], hw["gpu"]["peak_flops"]["fp32"]);  // all fp32
  }
  EXPECT_TRUE(sane(hw["gpu"]["hbm_bandwidth"]));
  EXPECT_TRUE(sane(hw["gpu"]["hbm_capacity"]));
  EXPECT_TRUE(sane(hw["intra_node"]["bandwidth"]));
  EXPECT_GE(hw["intra_node"]["latency"].get<double>(), 0);
  EXPECT_EQ(hw["inter_node"]["topology"], "loopback");
  EXPECT_EQ(hw["inter_node"]["bandwidth"], hw["intra_node"]["bandwidth"]);
  EXPECT_GE(hw["compute_slowdown_during_comm"].get<double>(), 0);
  // Loose sanity: a CPU core does between 0.1 and 10,000 GFLOP/s.
  EXPECT_GT(hw["gpu"]["peak_flops"]["fp32"].get<double>(), 1e8);
  EXPECT_LT(hw["gpu"]["peak_flops"]["fp32"].get<double>(), 1e13);
  const Json& m = doc["measurement"];
  EXPECT_EQ(m["command"], "metron profile --sweep -o " + path("hw.json") +
                              " --repetitions 2 --warmup 0 --slowdown-seconds 0.1 --sweep-gemm-max "
                              "64 --sweep-add-max 4096 --sweep-message-max 4194304");
  EXPECT_TRUE(m.contains("date"));
  EXPECT_TRUE(m.contains("machine"));
  // The model's time of each grid point is the 2-rank ring all-reduce 2α + S/β of the fitted
  // link (Note [collective costs]).
  ASSERT_EQ(m["all_reduce_2_processes"].size(), 11U);  // 4 B, 16 B, ... 4 MiB
  const double alpha = hw["intra_node"]["latency"];
  const double beta = hw["intra_node"]["bandwidth"];
  for (const Json& point : m["all_reduce_2_processes"]) {
    EXPECT_TRUE(sane(point["measured_s"])) << point;
    const double bytes = point["bytes"];
    EXPECT_NEAR(point["model_s"].get<double>(), 2 * alpha + bytes / beta, 1e-12) << point;
  }
  // The document loads as it is wherever a hardware file does.
  const Outcome sim =
      metron("simulate --model gpt3-125m --tp 1 --dp 1 --pp 2 -m 4 --hardware " + path("hw.json"));
  EXPECT_EQ(sim.code, 0) << sim.err;
}

TEST_F(Profile, SweepRefusesScenarioFlagsAndTheGridNeedsTheSweep) {
  const Outcome tp = metron("profile --sweep --tp 2 -o " + path("hw.json"));
  EXPECT_EQ(tp.code, 2);
  EXPECT_THAT(tp.err, HasSubstr("--tp: --sweep measures this machine, not a scenario"));
  const Outcome sync = metron("profile --sweep --sync ddp -o " + path("hw.json"));
  EXPECT_EQ(sync.code, 2);
  EXPECT_THAT(sync.err, HasSubstr("--sync: --sweep measures this machine"));
  const Outcome grid = metron("profile --sweep-gemm-max 64 -o " + path("p.json"));
  EXPECT_EQ(grid.code, 2);
  EXPECT_THAT(grid.err, HasSubstr("--sweep-gemm-max: expected it only with --sweep"));
  const Outcome small = metron("profile --sweep --sweep-message-max 8 -o " + path("hw.json"));
  EXPECT_EQ(small.code, 2);
  EXPECT_THAT(small.err, AllOf(HasSubstr("--sweep-message-max"), HasSubstr("16")));
  EXPECT_FALSE(std::filesystem::exists(path("hw.json")));
}

// Without a GPU (CI's machines), --backend cuda says why it cannot profile and writes nothing:
// no visible device, or no CUDA backend in this build. A GPU sweep is bench/cuda_profile's job.
TEST_F(Profile, OnCudaWithoutAGpuSaysWhyAndWritesNothing) {
  const Outcome cuda = metron("profile --backend cuda --hardware dgx-h100 -o " + path("p.json"));
  if (cuda.code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(cuda.code, 2) << cuda.err;
  EXPECT_THAT(cuda.err,
              ::testing::AnyOf(HasSubstr("--backend cuda: no CUDA device is visible"),
                               HasSubstr("--backend cuda: this metron was built without the CUDA")))
      << cuda.err;
  EXPECT_FALSE(std::filesystem::exists(path("p.json")));
  const Outcome sweep = metron("profile --backend cuda --sweep -o " + path("hw.json"));
  EXPECT_EQ(sweep.code, 2);
  EXPECT_THAT(sweep.err, HasSubstr("--backend cuda"));
  EXPECT_FALSE(std::filesystem::exists(path("hw.json")));
}

}  // namespace
}  // namespace metron
