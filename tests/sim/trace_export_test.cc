// The simulator's traces (Note [merged trace layout], Note [kineto trace layout] in
// metron/timelines/) for lowered schedules: they pass the trace checker (the per-rank files with
// HTA's rules), the merged one carries one flow arrow per transfer, and its bubble slices are the
// metrics'.

#include "metron/sim/trace_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <variant>

#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"
#include "metron/traces/chrome_trace_writer.h"
#include "metron/traces/trace_checker.h"

namespace metron::sim {
namespace {

using ::testing::IsEmpty;

/// F = 1 µs, B = 2 µs, I = W = 1 µs, every transfer 100 ns.
std::vector<Time> durations(const ir::Graph& g) {
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()), 0);
  for (std::size_t i = 0; i < d.size(); ++i) {
    const ir::Task& t = g.tasks()[i];
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      d[i] = c->phase == ir::Phase::kBackward ? 2000 : 1000;
    } else if (t.is_communication()) {
      d[i] = 100;
    }
  }
  return d;
}

ir::Graph step(const char* schedule, std::int32_t vp) {
  return lowering::lower(
      pipeline::generate_order({.name = schedule, .pp = 4, .vp = vp, .microbatches = 8}),
      {.p2p = lowering::P2PMode::kAsync});
}

TEST(SimulationTrace, EveryScheduleGivesATraceThePerfettoRulesAccept) {
  for (const auto& [name, vp] : std::vector<std::pair<const char*, std::int32_t>>{
           {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"zb-v", 2}, {"dualpipe-v", 2}}) {
    SCOPED_TRACE(name);
    const ir::Graph g = step(name, vp);
    const SimResult r = simulate(g, durations(g));
    const std::string json =
        traces::to_chrome_json(simulation_trace(g, r, {{"schedule", std::string(name)}}));
    EXPECT_THAT(traces::check_chrome_trace(json), IsEmpty());
  }
}

TEST(SimulationTrace, EveryScheduleGivesPerRankTracesHtasRulesAccept) {
  for (const auto& [name, vp] : std::vector<std::pair<const char*, std::int32_t>>{
           {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"zb-v", 2}, {"dualpipe-v", 2}}) {
    SCOPED_TRACE(name);
    const ir::Graph g = step(name, vp);
    const SimResult r = simulate(g, durations(g));
    const std::vector<traces::TraceDocument> docs = simulation_rank_traces(g, r);
    ASSERT_EQ(docs.size(), 4U);
    for (std::size_t k = 0; k < docs.size(); ++k) {
      EXPECT_EQ(docs[k].rank, static_cast<std::int64_t>(k));
      EXPECT_THAT(traces::check_chrome_trace(traces::to_chrome_json(docs[k]), {.hta = true}),
                  IsEmpty());
    }
  }
}

TEST(SimulationTrace, OneArrowPerTransferAndTheMetricsBubbles) {
  const ir::Graph g = step("1f1b", 1);
  const SimResult r = simulate(g, durations(g));
  const traces::TraceDocument doc = simulation_trace(g, r);
  std::int64_t sends = 0;
  std::int64_t bubbles = 0;
  for (const ir::Task& t : g.tasks()) sends += t.kind() == ir::TaskKind::kSend ? 1 : 0;
  std::set<std::int64_t> out;
  std::set<std::int64_t> in;
  for (const traces::Slice& s : doc.slices) {
    if (s.flow_out) out.insert(*s.flow_out);
    if (s.flow_in) in.insert(*s.flow_in);
    if (s.cat == "bubble") ++bubbles;
  }
  EXPECT_EQ(static_cast<std::int64_t>(out.size()), sends);
  EXPECT_EQ(out, in);
  std::int64_t expected_bubbles = 0;
  for (const RankMetrics& m : r.ranks) {
    for (const Bubble& b : m.bubbles) expected_bubbles += b.end > b.start ? 1 : 0;
  }
  EXPECT_EQ(bubbles, expected_bubbles);
  EXPECT_EQ(doc.processes.size(), 4U);
  EXPECT_EQ(doc.processes[1].name, "Rank 1 (pp=1 tp=0 dp=0)");  // lower(): rank r is pp rank r
}

TEST(SimulationTrace, APartialResultStillGivesAValidTrace) {
  const ir::Graph g = step("1f1b", 1);
  SimResult r = simulate(g, durations(g));
  // Keep only what had ended by half the makespan, as a deadlock's partial result would.
  for (TaskTiming& t : r.tasks) {
    if (t.end > r.makespan / 2) t = TaskTiming{};
  }
  r.ranks.clear();
  const std::string json = traces::to_chrome_json(simulation_trace(g, r));
  EXPECT_THAT(traces::check_chrome_trace(json), IsEmpty());
  for (const traces::TraceDocument& d : simulation_rank_traces(g, r)) {
    EXPECT_THAT(traces::check_chrome_trace(traces::to_chrome_json(d), {.hta = true}), IsEmpty());
  }
}

TEST(SimulationTrace, StaticMemoryLiftsTheHbmCounter) {
  const ir::Graph g = step("1f1b", 1);
  const SimResult r = simulate(g, durations(g));
  const traces::TraceDocument doc =
      simulation_trace(g, r, {}, {.static_memory_bytes = {1000, 2000, 3000, 4000}});
  std::vector<double> peak(4, 0.0);
  for (const traces::CounterSample& c : doc.counters) {
    const auto rank = static_cast<std::size_t>(c.pid);
    peak[rank] = std::max(peak[rank], c.series.at(0).second);
  }
  for (std::size_t k = 0; k < 4; ++k) {
    const auto static_bytes = static_cast<std::int64_t>(1000 * (k + 1));
    EXPECT_EQ(peak[k], static_cast<double>(static_bytes + r.ranks[k].peak_memory_bytes));
  }
}

}  // namespace
}  // namespace metron::sim
