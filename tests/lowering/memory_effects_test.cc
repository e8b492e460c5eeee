// add_memory_effects (Note [pipeline memory effects]): the buffers on small hand-written graphs,
// and the peak of live activation stashes in a unit-time run of the ordering rules against an
// independent formula (1F1B keeps p - r microbatches in flight on rank r).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/ordering.h"
#include "metron/ir/rows_graph.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/generators.h"

namespace metron::lowering {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

// p = 2, m = 1, split backward, async p2p. Task ids follow the rows: rank 0 is 0..4, rank 1 5..8.
constexpr const char* kSmall =
    "rank 0: 0F0 0SEND_F0 0RECV_B0 0I0 0W0\n"
    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0\n";

constexpr ir::TaskId kF0{0}, kSendF0{1}, kI0{3}, kW0{4}, kF1{6}, kB1{7};

ir::Graph small_graph() { return ir::rows_to_graph(ir::parse_rows(kSmall)); }

LoweringOptions bytes(bool deallocate) {
  return {.deallocate_output = deallocate,
          .activation_bytes = 100,
          .weight_grad_bytes = 10,
          .p2p_bytes = 7};
}

std::string buffer_text(const ir::Graph& g, ir::BufferId id) {
  const ir::Buffer& b = g.buffer(id);
  return "rank " + std::to_string(b.rank.value()) + " " + b.name + " " + std::to_string(b.bytes);
}

TEST(AddMemoryEffects, ForwardStashesInputGradientTurnsItIntoTheWeightStash) {
  ir::Graph g = add_memory_effects(small_graph(), bytes(true));
  ASSERT_EQ(g.data().buffers.size(), 4u);
  // Buffers per (rank, stage, microbatch): activation, weight-grad, output.
  EXPECT_EQ(buffer_text(g, ir::BufferId{0}), "rank 0 activation s0 mb0 100");
  EXPECT_EQ(buffer_text(g, ir::BufferId{1}), "rank 0 weight-grad s0 mb0 10");
  EXPECT_EQ(buffer_text(g, ir::BufferId{2}), "rank 0 output s0 mb0 7");
  EXPECT_EQ(buffer_text(g, ir::BufferId{3}), "rank 1 activation s1 mb0 100");
  EXPECT_THAT(g.task(kF0).allocates, ElementsAre(ir::BufferId{0}, ir::BufferId{2}));
  EXPECT_THAT(g.task(kI0).uses, ElementsAre(ir::BufferId{0}));
  EXPECT_THAT(g.task(kI0).allocates, ElementsAre(ir::BufferId{1}));
  EXPECT_THAT(g.task(kW0).uses, ElementsAre(ir::BufferId{1}));
  // deallocate_output_tensor: the sent output's last user is the send.
  EXPECT_THAT(g.task(kSendF0).uses, ElementsAre(ir::BufferId{2}));
  // The last stage sends no activation: no output buffer, only its stash, freed by its B.
  EXPECT_THAT(g.task(kF1).allocates, ElementsAre(ir::BufferId{3}));
  EXPECT_THAT(g.task(kB1).uses, ElementsAre(ir::BufferId{3}));
}

TEST(AddMemoryEffects, TasksKeepTheirIdsAndEverythingElse) {
  ir::Graph before = small_graph();
  ir::Graph after = add_memory_effects(before, bytes(true));
  ASSERT_EQ(after.num_tasks(), before.num_tasks());
  for (std::int32_t i = 0; i < before.num_tasks(); ++i) {
    ir::Task t = after.task(ir::TaskId{i});
    t.allocates.clear();
    t.uses.clear();
    EXPECT_EQ(t, before.task(ir::TaskId{i})) << before.describe(ir::TaskId{i});
  }
}

TEST(AddMemoryEffects, WithoutDeallocationTheOutputLivesUntilTheBackward) {
  ir::Graph g = add_memory_effects(small_graph(), bytes(false));
  EXPECT_THAT(g.task(kSendF0).uses, ElementsAre(ir::BufferId{2}));
  EXPECT_THAT(g.task(kI0).uses, ElementsAre(ir::BufferId{0}, ir::BufferId{2}));
}

TEST(AddMemoryEffects, TheOutputBufferHoldsTheWholeTensorWhenTheTransferCarriesAPiece) {
  // The pipeline scatter/gather sends 1/tp of the output; the stage still holds all of it.
  LoweringOptions options = bytes(true);
  options.output_bytes = 28;
  ir::Graph g = add_memory_effects(small_graph(), options);
  EXPECT_EQ(buffer_text(g, ir::BufferId{2}), "rank 0 output s0 mb0 28");
  EXPECT_EQ(buffer_text(g, ir::BufferId{3}), "rank 1 activation s1 mb0 100");
}

TEST(AddMemoryEffects, ForwardOnlyStashesNothing) {
  ir::Graph g = add_memory_effects(
      ir::rows_to_graph(ir::parse_rows("rank 0: 0F0 0SEND_F0\nrank 1: 1RECV_F0 1F0\n")),
      bytes(true));
  // Only the sent output, freed by its send.
  ASSERT_EQ(g.data().buffers.size(), 1u);
  EXPECT_EQ(buffer_text(g, ir::BufferId{0}), "rank 0 output s0 mb0 7");
  EXPECT_THAT(g.task(ir::TaskId{3}).allocates, IsEmpty());
}

TEST(AddMemoryEffects, OverlapUnitAllocatesForItsForwardAndFreesForItsBackward) {
  // V placement on one rank: stage 0 -> 1 is local, so no output buffers.
  ir::Graph g = add_memory_effects(
      ir::rows_to_graph(ir::parse_rows("rank 0: 0F0 1F0 (0F1;1B0)OVERLAP_F_B 0B0 1F1 1B1 0B1\n")),
      bytes(true));
  const ir::Task& overlap = g.task(ir::TaskId{2});
  ASSERT_EQ(overlap.allocates.size(), 1u);
  EXPECT_EQ(g.buffer(overlap.allocates[0]).name, "activation s0 mb1");
  ASSERT_EQ(overlap.uses.size(), 1u);
  EXPECT_EQ(g.buffer(overlap.uses[0]).name, "activation s1 mb0");
}

TEST(AddMemoryEffects, NegativeSizesAreRejected) {
  LoweringOptions options = bytes(true);
  options.weight_grad_bytes = -1;
  EXPECT_THAT([&] { add_memory_effects(small_graph(), options); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("add_memory_effects: activation_bytes (100), weight_grad_bytes (-1), "
                            "p2p_bytes (7) and output_bytes (7); expected each >= 0")));
}

// Unit-time run of the ordering rules: every round starts all startable tasks, then completes
// them. A buffer lives from its allocator's start to its last user's completion. Returns the
// peak number of live buffers per rank whose name starts with `prefix`.
std::vector<std::int32_t> peak_live(const ir::Graph& g, const std::string& prefix) {
  const auto& buffers = g.data().buffers;
  auto counted = [&](ir::BufferId b) { return buffers[b.index()].name.starts_with(prefix); };
  std::vector<std::int32_t> users(buffers.size(), 0);
  for (const ir::Task& t : g.tasks()) {
    for (ir::BufferId b : t.uses) ++users[b.index()];
  }
  std::vector<std::int32_t> live(static_cast<std::size_t>(g.num_ranks()), 0);
  std::vector<std::int32_t> peak = live;
  ir::OrderingState state(g);
  std::vector<ir::TaskId> unit;
  while (!state.done()) {
    std::vector<ir::TaskId> running;
    while (state.pop_startable(unit)) {
      for (ir::TaskId t : unit) {
        state.start(t);
        running.push_back(t);
        for (ir::BufferId b : g.task(t).allocates) {
          auto r = g.buffer(b).rank.index();
          if (counted(b)) peak[r] = std::max(peak[r], ++live[r]);
        }
      }
    }
    if (running.empty()) {
      ADD_FAILURE() << "stuck";
      break;
    }
    for (ir::TaskId t : running) {
      state.complete(t);
      for (ir::BufferId b : g.task(t).uses) {
        if (--users[b.index()] == 0 && counted(b)) --live[g.buffer(b).rank.index()];
      }
    }
  }
  return peak;
}

TEST(AddMemoryEffects, OneFOneBPeakActivationsAreStagesInFlight) {
  // 1F1B p = 4, m = 8: rank r runs w = p - r - 1 warm-up forwards plus the first steady forward
  // before its first backward frees anything, so p - r stashes are alive at the peak; rank 0
  // holds p = 4. Both p2p modes; the output buffers are freed by the sends and not counted.
  for (P2PMode mode : {P2PMode::kAsync, P2PMode::kBatched}) {
    ir::Graph g = lower(pipeline::one_f_one_b({.pp = 4, .microbatches = 8}), {.p2p = mode});
    EXPECT_THAT(peak_live(g, "activation"), ElementsAre(4, 3, 2, 1));
  }
}

}  // namespace
}  // namespace metron::lowering
