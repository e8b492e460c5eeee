// The metrics of a measured timeline (sim/timeline_result.h) against the simulator's own: the
// simulator tracks them event by event as it runs, timeline_result() recomputes them from the
// spans alone with interval unions, so on a simulated run the two independent computations must
// agree exactly.

#include "metron/sim/timeline_result.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"
#include "metron/sim/trace_export.h"

namespace metron::sim {
namespace {

/// F = 1 µs, B = 2 µs, I = W = 1 µs; activations take 300 ns to move, gradients 500 ns, so that
/// the send and the receive of one batch end at different times (on a tie the simulator names
/// whichever end it processed last, a choice a measurement never faces).
std::vector<Time> durations(const ir::Graph& g) {
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()), 0);
  for (std::size_t i = 0; i < d.size(); ++i) {
    const ir::Task& t = g.tasks()[i];
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      d[i] = c->phase == ir::Phase::kBackward ? 2000 : 1000;
    } else if (const auto* send = std::get_if<ir::Send>(&t.op)) {
      d[i] = send->what == ir::P2PKind::kGradient ? 500 : 300;
    } else if (const auto* recv = std::get_if<ir::Recv>(&t.op)) {
      d[i] = recv->what == ir::P2PKind::kGradient ? 500 : 300;
    }
  }
  return d;
}

TEST(TimelineResult, AgreesWithTheSimulatorsMetricsOnEverySchedule) {
  for (const auto& [name, vp, mode] :
       std::vector<std::tuple<const char*, std::int32_t, lowering::P2PMode>>{
           {"1f1b", 1, lowering::P2PMode::kAsync},
           {"1f1b", 1, lowering::P2PMode::kBatched},
           {"interleaved-1f1b", 2, lowering::P2PMode::kBatched},
           {"zb-h1", 1, lowering::P2PMode::kAsync},
           {"dualpipe-v", 2, lowering::P2PMode::kAsync}}) {
    SCOPED_TRACE(name);
    const ir::Graph g = lowering::lower(
        pipeline::generate_order({.name = name, .pp = 4, .vp = vp, .microbatches = 8}),
        {.p2p = mode});
    const SimResult simulated = simulate(g, durations(g));
    const SimResult recomputed = timeline_result(g, simulation_timeline(g, simulated));
    EXPECT_EQ(recomputed.makespan, simulated.makespan);
    ASSERT_EQ(recomputed.ranks.size(), simulated.ranks.size());
    for (std::size_t r = 0; r < simulated.ranks.size(); ++r) {
      SCOPED_TRACE(r);
      const RankMetrics& want = simulated.ranks[r];
      const RankMetrics& got = recomputed.ranks[r];
      EXPECT_EQ(got.compute_busy, want.compute_busy);
      EXPECT_EQ(got.idle, want.idle);
      EXPECT_EQ(got.comm_total, want.comm_total);
      EXPECT_EQ(got.comm_exposed, want.comm_exposed);
      EXPECT_EQ(got.comm_overlapped, want.comm_overlapped);
      EXPECT_EQ(got.bubble, want.bubble);
      EXPECT_EQ(got.bytes_sent, want.bytes_sent);
      EXPECT_EQ(got.peak_memory_bytes, want.peak_memory_bytes);
    }
  }
}

// Note [timeline metrics]: a member that starts before its partners (a receive posted early, as
// the executor's are) waits, and the wait is not communication. Moving every receive's start
// back to the step's beginning must leave the communication figures as the simulator had them.
TEST(TimelineResult, CountsCommunicationFromTheRendezvous) {
  const ir::Graph g = lowering::lower(
      pipeline::generate_order({.name = "1f1b", .pp = 2, .vp = 1, .microbatches = 4}),
      {.p2p = lowering::P2PMode::kAsync});
  const SimResult simulated = simulate(g, durations(g));
  timelines::Timeline early = simulation_timeline(g, simulated);
  std::int32_t moved = 0;
  for (std::size_t i = 0; i < early.tasks.size(); ++i) {
    if (g.tasks()[i].kind() != ir::TaskKind::kRecv) continue;
    ASSERT_GT(early.tasks[i].start_ns, 0);
    early.tasks[i].start_ns = 0;
    ++moved;
  }
  ASSERT_GT(moved, 0);
  const SimResult recomputed = timeline_result(g, early);
  for (std::size_t r = 0; r < simulated.ranks.size(); ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(recomputed.ranks[r].comm_total, simulated.ranks[r].comm_total);
    EXPECT_EQ(recomputed.ranks[r].comm_exposed, simulated.ranks[r].comm_exposed);
  }
  // Without the rule rank 1 (which receives first, at 0) would count [0, first recv end) whole.
  EXPECT_GT(simulated.ranks[1].comm_total, 0);
}

TEST(TimelineResult, RefusesATimelineOfAnotherGraph) {
  const ir::Graph g = lowering::lower(
      pipeline::generate_order({.name = "1f1b", .pp = 2, .vp = 1, .microbatches = 2}), {});
  timelines::Timeline t;
  t.tasks.resize(3);
  EXPECT_THROW(static_cast<void>(timeline_result(g, t)), InvalidConfig);
}

}  // namespace
}  // namespace metron::sim
