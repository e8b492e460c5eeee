// The trace layouts of metron::timelines against independent expectations: per-rank files pass
// HTA's rules, and what HTA computes from them (merged kernel intervals by kernel class, as
// hta/analyzers/breakdown_analysis.py does, recomputed here over the parsed JSON) is the
// simulator's compute and communication figures; every kernel has one launch before it; the
// collective args follow the world layout; the HBM counter peaks at the rank's peak memory.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/world_layout.h"
#include "metron/sim/trace_export.h"
#include "metron/timelines/kineto_names.h"
#include "metron/timelines/kineto_trace.h"
#include "metron/timelines/merged_trace.h"
#include "metron/traces/chrome_trace_writer.h"
#include "metron/traces/trace_checker.h"

namespace metron::timelines {
namespace {

using ::testing::IsEmpty;
using Json = nlohmann::json;
using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// pp 2, tp 2, dp 2 GPT-3 125M on a DGX A100, Megatron DDP: tp and dp collectives, p2p, and the
/// static memory of weights and optimizer state.
scenario::Scenario tp_dp_scenario() {
  scenario::Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {
      .tp = 2, .pp = 2, .dp = 2, .microbatch_size = 1, .global_batch = 16, .seq_len = 512};
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  return s;
}

/// Static bytes per graph rank, as evaluate() adds them to the peak.
std::vector<std::int64_t> static_bytes(const scenario::Evaluation& e) {
  std::vector<std::int64_t> out;
  for (std::size_t r = 0; r < e.result.ranks.size(); ++r) {
    out.push_back(std::llround(e.peak_memory_bytes[r]) - e.result.ranks[r].peak_memory_bytes);
  }
  return out;
}

/// Microseconds with three decimals back to integer nanoseconds.
std::int64_t ns(const Json& us) { return std::llround(us.get<double>() * 1000.0); }

std::int64_t union_length(Intervals v) {
  std::sort(v.begin(), v.end());
  std::int64_t total = 0;
  std::int64_t start = 0;
  std::int64_t end = -1;
  for (const auto& [s, e] : v) {
    if (s > end) {
      total += std::max<std::int64_t>(0, end - start);
      start = s;
    }
    end = std::max(end, e);
  }
  return total + std::max<std::int64_t>(0, end - start);
}

/// What HTA's temporal breakdown and comm/compute overlap see: kernels (GPU events with a
/// stream) split by name, nccl... being communication (hta/common/types.py).
struct KernelFigures {
  std::int64_t compute = 0;
  std::int64_t comm = 0;
  std::int64_t comm_exposed = 0;
};

KernelFigures kernel_figures(const Json& trace) {
  Intervals compute;
  Intervals comm;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.contains("args") || !e.at("args").contains("stream")) continue;
    const std::int64_t start = ns(e.at("ts"));
    const std::pair<std::int64_t, std::int64_t> span{start, start + ns(e.at("dur"))};
    (e.at("name").get<std::string>().starts_with("nccl") ? comm : compute).push_back(span);
  }
  Intervals both = compute;
  both.insert(both.end(), comm.begin(), comm.end());
  const std::int64_t c = union_length(compute);
  const std::int64_t all = union_length(both);
  return {.compute = c, .comm = union_length(comm), .comm_exposed = all - c};
}

struct Simulated {
  scenario::Evaluation evaluation;
  WorldLayout layout;
  std::vector<Json> ranks;  ///< parsed per-rank files
  std::vector<std::string> texts;
};

Simulated simulate_tp_dp() {
  Simulated s{.evaluation = scenario::evaluate(tp_dp_scenario())};
  const scenario::Evaluation& e = s.evaluation;
  s.layout = scenario::world_layout(e.scenario, e.step.graph);
  const std::vector<traces::TraceDocument> docs =
      sim::simulation_rank_traces(e.step.graph, e.result, {{"tool", std::string("metron")}},
                                  {.static_memory_bytes = static_bytes(e), .layout = s.layout});
  for (const traces::TraceDocument& d : docs) {
    s.texts.push_back(traces::to_chrome_json(d));
    s.ranks.push_back(Json::parse(s.texts.back()));
  }
  return s;
}

TEST(RankTraces, PassHtasRulesOneFilePerWorldRank) {
  const Simulated s = simulate_tp_dp();
  ASSERT_EQ(s.texts.size(), 2U);  // symmetric mode: one pipeline of two ranks
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "metron_rank_traces";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (std::size_t r = 0; r < s.texts.size(); ++r) {
    EXPECT_THAT(traces::check_chrome_trace(s.texts[r], {.hta = true}), IsEmpty()) << r;
    const std::int64_t world = s.layout.world_rank[r];
    EXPECT_EQ(s.ranks[r].at("distributedInfo").at("rank"), world);
    EXPECT_EQ(s.ranks[r].at("distributedInfo").at("world_size"), 8);
    EXPECT_EQ(s.ranks[r].at("distributedInfo").at("backend"), "nccl");
    std::ofstream(dir / rank_trace_file_name(world)) << s.texts[r];
  }
  EXPECT_EQ(rank_trace_file_name(3), "rank-3.json");
  EXPECT_THAT(traces::check_chrome_trace_directory(dir.string(), {.hta = true}), IsEmpty());
}

TEST(RankTraces, KernelIntervalsReproduceTheSimulatorsFigures) {
  const Simulated s = simulate_tp_dp();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    SCOPED_TRACE(r);
    const sim::RankMetrics& m = s.evaluation.result.ranks[r];
    const KernelFigures k = kernel_figures(s.ranks[r]);
    EXPECT_EQ(k.compute, m.compute_busy);
    EXPECT_EQ(k.comm, m.comm_total);
    EXPECT_EQ(k.comm_exposed, m.comm_exposed);
    EXPECT_GT(m.comm_total, 0);
  }
}

TEST(RankTraces, EveryKernelHasOneLaunchNoLaterThanItAndLaunchesDoNotOverlap) {
  const Simulated s = simulate_tp_dp();
  for (const Json& trace : s.ranks) {
    std::map<std::int64_t, std::int64_t> kernel_start;
    std::map<std::int64_t, std::vector<std::int64_t>> launch_start;
    Intervals launches;
    std::map<std::int64_t, std::int64_t> flow_start;
    std::map<std::int64_t, std::int64_t> flow_end;
    for (const Json& e : trace.at("traceEvents")) {
      if (e.at("ph") == "s") flow_start[e.at("id")] = ns(e.at("ts"));
      if (e.at("ph") == "f") {
        flow_end[e.at("id")] = ns(e.at("ts"));
        EXPECT_EQ(e.at("bp"), "e");
      }
      if (e.at("ph") != "X") continue;
      if (e.at("cat") == "kernel") {
        EXPECT_TRUE(kernel_start.emplace(e.at("args").at("correlation"), ns(e.at("ts"))).second);
      } else if (e.at("name") == "cudaLaunchKernel") {
        EXPECT_EQ(e.at("cat"), "cuda_runtime");
        EXPECT_FALSE(e.at("args").contains("stream"));
        launch_start[e.at("args").at("correlation")].push_back(ns(e.at("ts")));
        launches.emplace_back(ns(e.at("ts")), ns(e.at("ts")) + ns(e.at("dur")));
      }
    }
    ASSERT_FALSE(kernel_start.empty());
    EXPECT_EQ(kernel_start.size(), launch_start.size());
    for (const auto& [correlation, start] : kernel_start) {
      ASSERT_EQ(launch_start[correlation].size(), 1U) << correlation;
      EXPECT_LE(launch_start[correlation][0], start) << correlation;
      ASSERT_TRUE(flow_start.contains(correlation) && flow_end.contains(correlation));
      EXPECT_LE(flow_start[correlation], flow_end[correlation]);
    }
    std::sort(launches.begin(), launches.end());
    for (std::size_t i = 1; i < launches.size(); ++i) {
      EXPECT_GE(launches[i].first, launches[i - 1].second);
      EXPECT_GE(launches[i].first, 0);
    }
  }
}

TEST(RankTraces, CollectiveArgsFollowTheWorldLayout) {
  const Simulated s = simulate_tp_dp();
  const ir::Graph& g = s.evaluation.step.graph;
  std::map<std::string, std::int64_t> seen;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Json& e : s.ranks[r].at("traceEvents")) {
      if (e.at("ph") != "X" || e.at("cat") != "kernel") continue;
      const Json& a = e.at("args");
      if (!a.contains("Collective name")) {
        EXPECT_FALSE(e.at("name").get<std::string>().starts_with("nccl"));
        continue;
      }
      const ir::Task& t = g.task(ir::TaskId{a.at("task").get<std::int32_t>()});
      const std::string name = a.at("Collective name");
      ++seen[name];
      EXPECT_TRUE(e.at("name").get<std::string>().starts_with("ncclDevKernel_"));
      if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
        const GroupNaming& group = s.layout.groups[c->group.index()];
        std::string ranks = "[";
        for (std::int64_t m : group.world_ranks)
          ranks += (ranks == "[" ? "" : ", ") + std::to_string(m);
        EXPECT_EQ(a.at("Group size"), std::ssize(group.world_ranks));
        EXPECT_EQ(a.at("Process Group Ranks"), ranks + "]");
        EXPECT_EQ(a.at("Process Group Name"), group.pg_name);
        EXPECT_EQ(a.at("Process Group Description"), group.description);
        EXPECT_EQ(a.at("dtype"), std::string(kineto_dtype(c->dtype)));
        const std::int64_t elements = c->bytes / dtype_size(c->dtype);
        const auto n = std::ssize(group.world_ranks);
        EXPECT_EQ(a.at("In msg nelems"),
                  c->op == ir::CollectiveOp::kAllGather ? elements / n : elements);
        EXPECT_EQ(a.at("Out msg nelems"),
                  c->op == ir::CollectiveOp::kReduceScatter ? elements / n : elements);
        // The real group, not the graph's one-member stand-in.
        const std::string& graph_group = g.group(c->group).name;
        if (graph_group.starts_with("tp") || graph_group.starts_with("dp")) {
          EXPECT_EQ(a.at("Group size"), 2);
        }
      } else {
        // p2p goes through the rank's pipeline group: pp 2 ranks, tp·dp = 4 apart.
        const GroupNaming& pipeline = s.layout.pipeline_groups[r];
        EXPECT_EQ(a.at("Group size"), 2);
        EXPECT_EQ(a.at("Process Group Description"), "PIPELINE_MODEL_PARALLEL_GROUP");
        EXPECT_EQ(a.at("Process Group Name"), pipeline.pg_name);
        EXPECT_EQ(a.at("Process Group Ranks"), "[" + std::to_string(s.layout.world_rank[0]) + ", " +
                                                   std::to_string(s.layout.world_rank[1]) + "]");
        const std::int64_t self = s.layout.world_rank[r];
        EXPECT_EQ(a.at(name == "send" ? "Src Rank" : "Dst Rank"), self);
      }
    }
  }
  EXPECT_GT(seen["allreduce"], 0);
  EXPECT_GT(seen["send"], 0);
  EXPECT_GT(seen["recv"], 0);
}

TEST(RankTraces, TheHbmCounterPeaksAtTheRanksPeakMemory) {
  const Simulated s = simulate_tp_dp();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    double peak = 0;
    for (const Json& e : s.ranks[r].at("traceEvents")) {
      if (e.at("ph") == "C" && e.at("name") == "HBM") {
        peak = std::max(peak, e.at("args").at("allocated_bytes").get<double>());
        EXPECT_NE(e.at("tid"), 0);
      }
    }
    EXPECT_EQ(std::llround(peak), std::llround(s.evaluation.peak_memory_bytes[r])) << r;
  }
}

TEST(MergedTrace, KeepsThePerfettoRulesAndPeaksAtThePeakMemory) {
  const scenario::Evaluation e = scenario::evaluate(tp_dp_scenario());
  const std::string json = traces::to_chrome_json(
      sim::simulation_trace(e.step.graph, e.result, {},
                            {.static_memory_bytes = static_bytes(e),
                             .layout = scenario::world_layout(e.scenario, e.step.graph)}));
  EXPECT_THAT(traces::check_chrome_trace(json), IsEmpty());
  const Json trace = Json::parse(json);
  std::map<std::int64_t, double> peak;
  std::map<std::int64_t, std::int64_t> flow_starts;
  for (const Json& ev : trace.at("traceEvents")) {
    if (ev.at("ph") == "C") {
      double& p = peak[ev.at("pid")];
      p = std::max(p, ev.at("args").at("allocated_bytes").get<double>());
      EXPECT_EQ(ev.at("tid"), 1);  // the named host row
    }
    if (ev.contains("flow_out")) flow_starts[ev.at("bind_id")] = ns(ev.at("ts"));
    if (ev.contains("flow_in")) {
      ASSERT_TRUE(flow_starts.contains(ev.at("bind_id")));  // written after its start
      EXPECT_LE(flow_starts[ev.at("bind_id")], ns(ev.at("ts")));
    }
  }
  for (std::size_t r = 0; r < e.peak_memory_bytes.size(); ++r) {
    EXPECT_EQ(std::llround(peak[static_cast<std::int64_t>(r)]),
              std::llround(e.peak_memory_bytes[r]));
  }
}

TEST(Timeline, IssueTimesAreTheEndOfTheLastHostWait) {
  const scenario::Evaluation e = scenario::evaluate(tp_dp_scenario());
  const ir::Graph& g = e.step.graph;
  const Timeline t = sim::simulation_timeline(g, e.result);
  const std::vector<std::int64_t> issue = issue_times(g, t);
  for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
    std::int64_t now = 0;
    for (ir::TaskId id : g.issue_order(ir::RankId{r})) {
      EXPECT_EQ(issue[id.index()], now);
      EXPECT_LE(issue[id.index()], t.tasks[id.index()].start_ns);
      if (g.task(id).kind() == ir::TaskKind::kHostWait) now = t.tasks[id.index()].end_ns;
    }
  }
}

TEST(Timeline, InputsThatDoNotFitTheGraphAreRefused) {
  const scenario::Evaluation e = scenario::evaluate(tp_dp_scenario());
  Timeline t = sim::simulation_timeline(e.step.graph, e.result);
  WorldLayout layout = graph_world_layout(e.step.graph);
  layout.world_rank[0] = 99;
  EXPECT_THROW((void)rank_traces(e.step.graph, t, layout, {}), InvalidConfig);
  t.tasks.pop_back();
  EXPECT_THROW((void)merged_trace(e.step.graph, t, graph_world_layout(e.step.graph), {}),
               InvalidConfig);
}

TEST(Timeline, GraphWorldLayoutNamesGroupsFromOne) {
  const scenario::Evaluation e = scenario::evaluate(tp_dp_scenario());
  const WorldLayout layout = graph_world_layout(e.step.graph);
  EXPECT_EQ(layout.world_size, e.step.graph.num_ranks());
  ASSERT_FALSE(layout.groups.empty());
  EXPECT_EQ(layout.groups[0].pg_name, "1");
  EXPECT_EQ(layout.groups[0].description, e.step.graph.data().groups[0].name);
}

/// Writes the per-rank files and metron's own figures of the tp/dp step under
/// $METRON_HTA_TRACE_DIR for scripts/hta_check.py, a local check with the real HTA
/// (docs/TRACES.md §2.8). Skipped when the variable is unset.
TEST(RankTraces, WritesTracesForTheLocalHtaCheck) {
  const char* out = std::getenv("METRON_HTA_TRACE_DIR");
  if (out == nullptr) GTEST_SKIP() << "METRON_HTA_TRACE_DIR is not set";
  const Simulated s = simulate_tp_dp();
  const std::filesystem::path dir(out);
  std::filesystem::create_directories(dir);
  Json figures = Json::object();
  for (std::size_t r = 0; r < s.texts.size(); ++r) {
    const std::int64_t world = s.layout.world_rank[r];
    std::ofstream(dir / rank_trace_file_name(world)) << s.texts[r];
    const sim::RankMetrics& m = s.evaluation.result.ranks[r];
    figures[std::to_string(world)] = {{"makespan_ns", s.evaluation.result.makespan},
                                      {"compute_busy_ns", m.compute_busy},
                                      {"comm_total_ns", m.comm_total},
                                      {"comm_exposed_ns", m.comm_exposed},
                                      {"idle_ns", m.idle}};
  }
  std::ofstream(dir / "metron_figures.txt") << figures.dump(2) << "\n";
}

}  // namespace
}  // namespace metron::timelines
