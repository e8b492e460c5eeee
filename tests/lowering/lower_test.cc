// lower(): the whole chain on small orders written as text: the graph validates (build() would
// throw otherwise), does not deadlock, and holds the expected number of tasks of each kind.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/rows_graph.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Megatron 1F1B, p = 2, m = 3 (docs/SCHEDULES.md §1.3).
constexpr const char* kOneFOneB =
    "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
    "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n";

// ZB-V-like V placement, p = 2 (rank 0: stages 0, 3; rank 1: stages 1, 2), m = 2.
constexpr const char* kV =
    "rank 0: 0F0 0F1 3F0 3I0 3F1 3I1 0I0 3W0 0I1 3W1 0W0 0W1\n"
    "rank 1: 1F0 2F0 1F1 2F1 2I0 1I0 2I1 1I1 2W0 2W1 1W0 1W1\n";

// "F", "B", "I", "W", "STEP", "send", "recv", "wait" -> count.
std::map<std::string, std::int32_t> kinds(const ir::Graph& g) {
  std::map<std::string, std::int32_t> n;
  for (const ir::Task& t : g.tasks()) {
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      constexpr const char* kPhase[] = {"F", "I", "W", "B", "R", "STEP", "OTHER"};
      ++n[kPhase[static_cast<int>(c->phase)]];
    } else {
      ++n[std::string(ir::to_string(t.kind()))];
    }
  }
  return n;
}

std::map<std::string, std::int32_t> expect(std::map<std::string, std::int32_t> m) { return m; }

ir::Graph lowered(const char* text, const LoweringOptions& options) {
  ir::Graph g = lower(ir::parse_rows(text), options);
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  return g;
}

TEST(Lower, AsyncOneFOneB) {
  // 3 activation sends (stage 0) + 3 gradient sends (stage 1), each with its receive; a STEP per
  // rank. Buffers: 6 activation stashes and 3 sent outputs.
  ir::Graph g = lowered(kOneFOneB, {.p2p = P2PMode::kAsync});
  EXPECT_EQ(kinds(g), expect({{"F", 6}, {"B", 6}, {"STEP", 2}, {"send", 3 + 3}, {"recv", 6}}));
  EXPECT_EQ(g.data().buffers.size(), 9u);
  for (const ir::Task& t : g.tasks()) {
    if (const auto* s = std::get_if<ir::Send>(&t.op)) {
      EXPECT_EQ(s->bytes, 1);
    }
  }
}

TEST(Lower, BatchedSplitOneFOneBWaitsOnEveryTransfer) {
  // Every send and receive is waited on by the host; split backward adds 6 weight stashes.
  ir::Graph g = lowered(kOneFOneB, {.p2p = P2PMode::kBatched, .split_backward = true});
  EXPECT_EQ(kinds(g), expect({{"F", 6},
                              {"I", 6},
                              {"W", 6},
                              {"STEP", 2},
                              {"send", 6},
                              {"recv", 6},
                              {"host-wait", 12}}));
  EXPECT_EQ(g.data().buffers.size(), 6u + 6u + 3u);
}

TEST(Lower, NoP2PNoStepNoMemory) {
  ir::Graph g =
      lowered(kOneFOneB, {.p2p = P2PMode::kNone, .optimizer_step = false, .memory_effects = false});
  EXPECT_EQ(kinds(g), expect({{"F", 6}, {"B", 6}}));
  EXPECT_TRUE(g.data().buffers.empty());
}

TEST(Lower, VPlacementAsyncWithLayersAndBytes) {
  // Only the cross-rank boundaries 0->1 and 2->3 exchange (per microbatch: 2 activations and 2
  // gradients); 1<->2 is local. 8 layers over 4 stages: 2 each.
  ir::Graph g = lowered(kV, {.p2p = P2PMode::kAsync, .p2p_bytes = 64, .layers = {.layers = 8}});
  EXPECT_EQ(kinds(g),
            expect({{"F", 8}, {"I", 8}, {"W", 8}, {"STEP", 2}, {"send", 8}, {"recv", 8}}));
  for (const ir::Task& t : g.tasks()) {
    if (const auto* r = std::get_if<ir::Recv>(&t.op)) {
      EXPECT_EQ(r->bytes, 64);
    }
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr || c->phase == ir::Phase::kOptimizer) continue;
    EXPECT_EQ(t.layers, (ir::LayerRange{2 * t.stage.value(), 2 * t.stage.value() + 2}));
  }
}

// lower() is its passes chained with one validation at the end, and the passes applied one by
// one (each validating) give the same graph: memory effects on the builder change nothing.
TEST(Lower, OneValidationGivesTheGraphOfThePassesOneByOne) {
  const ir::ActionRows rows = ir::parse_rows(kOneFOneB);
  const LoweringOptions options{.p2p = P2PMode::kAsync, .activation_bytes = 7, .p2p_bytes = 3};
  const ir::Graph chained = lower(rows, options);
  const ir::Graph step_by_step =
      add_memory_effects(ir::rows_to_graph(add_optimizer_step(add_p2p_async(rows)),
                                           {.p2p_bytes = 3, .pipeline_coords = true}),
                         options);
  EXPECT_EQ(chained, step_by_step);
  EXPECT_EQ(lower_unvalidated(rows, options).build(), chained);
}

TEST(Lower, BatchedRejectsVPlacement) {
  EXPECT_THAT(
      [] { lower(ir::parse_rows(kV), {.p2p = P2PMode::kBatched}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("use async p2p (P2PMode::kAsync, --p2p async)")));
}

TEST(Lower, LayerErrorsPropagate) {
  EXPECT_THAT(
      [] { lower(ir::parse_rows(kOneFOneB), {.layers = {.layers = 5}}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("5 layers do not split evenly over 2 stages")));
}

}  // namespace
}  // namespace metron::lowering
