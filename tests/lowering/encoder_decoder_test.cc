// add_encoder_output_transfers (Megatron's T5 split stage): boundaries from the split on carry a
// second tensor, checked by hand on a 4-stage 1F1B, plus a deadlock sweep over registry orders.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/graph_builder.h"
#include "metron/ir/rows_graph.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"

namespace metron::lowering {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

// Megatron 1F1B, p = 4, m = 4: rank r warms up with min(p-r-1, m) forwards.
constexpr const char* kOneFOneB =
    "rank 0: 0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3\n"
    "rank 1: 1F0 1F1 1F2 1B0 1F3 1B1 1B2 1B3\n"
    "rank 2: 2F0 2F1 2B0 2F2 2B1 2F3 2B2 2B3\n"
    "rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3\n";
constexpr std::int32_t kMicrobatches = 4;

ir::Graph lowered(const pipeline::Order& order, LoweringOptions options) {
  ir::Graph g = lower(order, options);
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  return g;
}

ir::Graph t5(std::int32_t split) {
  return lowered(ir::parse_rows(kOneFOneB), {.p2p = P2PMode::kAsync,
                                             .p2p_bytes = 100,
                                             .encoder_decoder_split = split,
                                             .encoder_output_bytes = 7});
}

// (sender rank, receiver rank, kind) -> sends.
using Edge = std::tuple<std::int32_t, std::int32_t, ir::P2PKind>;
std::map<Edge, std::int32_t> sends(const ir::Graph& g) {
  std::map<Edge, std::int32_t> n;
  for (const ir::Task& t : g.tasks()) {
    if (const auto* s = std::get_if<ir::Send>(&t.op))
      ++n[{t.rank.value(), s->peer.value(), s->what}];
  }
  return n;
}

// The recvs a task depends on, as "from<peer>:<bytes>".
std::vector<std::string> recv_deps(const ir::Graph& g, const ir::Task& t) {
  std::vector<std::string> out;
  for (ir::TaskId d : t.deps) {
    if (const auto* r = std::get_if<ir::Recv>(&g.task(d).op)) {
      out.push_back("from" + std::to_string(r->peer.value()) + ":" + std::to_string(r->bytes));
    }
  }
  return out;
}

const ir::Task& compute(const ir::Graph& g, std::int32_t stage, std::int32_t mb, ir::Phase phase) {
  for (const ir::Task& t : g.tasks()) {
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c && c->phase == phase && t.stage.value() == stage && t.microbatch.value() == mb) return t;
  }
  throw std::logic_error("no such compute task");
}

TEST(EncoderDecoder, BoundariesFromTheSplitOnCarryTwoTensors) {
  // Split 2 on 4 stages: boundaries 0->1 and 1->2 carry one tensor per microbatch, 2->3 two,
  // in both directions.
  const std::int32_t m = kMicrobatches;
  using enum ir::P2PKind;
  EXPECT_EQ(sends(t5(2)), (std::map<Edge, std::int32_t>{{{0, 1, kActivation}, m},
                                                        {{1, 2, kActivation}, m},
                                                        {{2, 3, kActivation}, 2 * m},
                                                        {{1, 0, kGradient}, m},
                                                        {{2, 1, kGradient}, m},
                                                        {{3, 2, kGradient}, 2 * m}}));
}

TEST(EncoderDecoder, TwinIsIssuedRightAfterItsFirstWithEncoderBytesAndHighBitTag) {
  const ir::Graph g = t5(2);
  std::int32_t twins = 0;
  for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
    const auto order = g.issue_order(ir::RankId{r});
    for (std::size_t i = 0; i < order.size(); ++i) {
      const ir::Task& t = g.task(order[i]);
      const auto* s = std::get_if<ir::Send>(&t.op);
      const auto* rv = std::get_if<ir::Recv>(&t.op);
      const std::int64_t tag = s ? s->tag : rv ? rv->tag : 0;
      if ((tag & kEncoderOutputTagBit) == 0) continue;
      ++twins;
      ASSERT_GT(i, 0u);
      const ir::Task& first = g.task(order[i - 1]);
      EXPECT_EQ(first.stream, t.stream);
      EXPECT_EQ(first.deps, t.deps);
      EXPECT_EQ(s ? s->bytes : rv->bytes, 7);
      const auto* fs = std::get_if<ir::Send>(&first.op);
      const auto* fr = std::get_if<ir::Recv>(&first.op);
      ASSERT_TRUE(s ? fs != nullptr : fr != nullptr);
      EXPECT_EQ(tag, (s ? fs->tag : fr->tag) | kEncoderOutputTagBit);
      EXPECT_EQ(s ? fs->bytes : fr->bytes, 100);
      EXPECT_EQ(s ? fs->what : fr->what, s ? s->what : rv->what);
    }
  }
  EXPECT_EQ(twins, 4 * kMicrobatches);  // act send + recv, grad send + recv per microbatch
}

TEST(EncoderDecoder, ReceivingComputeDependsOnBothReceives) {
  const ir::Graph g = t5(2);
  for (std::int32_t mb = 0; mb < kMicrobatches; ++mb) {
    // Boundary 1->2 is before the split: one tensor each way.
    EXPECT_THAT(recv_deps(g, compute(g, 2, mb, ir::Phase::kForward)),
                UnorderedElementsAre("from1:100"));
    EXPECT_THAT(recv_deps(g, compute(g, 1, mb, ir::Phase::kBackward)),
                UnorderedElementsAre("from2:100"));
    // Boundary 2->3: decoder hidden state and encoder output.
    EXPECT_THAT(recv_deps(g, compute(g, 3, mb, ir::Phase::kForward)),
                UnorderedElementsAre("from2:100", "from2:7"));
    EXPECT_THAT(recv_deps(g, compute(g, 2, mb, ir::Phase::kBackward)),
                UnorderedElementsAre("from3:100", "from3:7"));
  }
}

TEST(EncoderDecoder, AddsFourTasksPerDoubledBoundaryAndMicrobatchKeepingIds) {
  // Boundaries s -> s+1 with split <= s <= stages-2, each with an activation and a gradient
  // pair per microbatch: 4 new tasks. Split 1 doubles 1->2 and 2->3, split 3 nothing.
  const ir::Graph base = lowered(ir::parse_rows(kOneFOneB), {.p2p_bytes = 100});
  for (std::int32_t split = 1; split <= 3; ++split) {
    const ir::Graph g = t5(split);
    EXPECT_EQ(g.num_tasks(), base.num_tasks() + 4 * (3 - split) * kMicrobatches);
    for (std::int32_t i = 0; i < base.num_tasks(); ++i) {
      const ir::Task& before = base.task(ir::TaskId{i});
      const ir::Task& after = g.task(ir::TaskId{i});
      EXPECT_EQ(std::tie(before.rank, before.stream, before.stage, before.microbatch, before.op),
                std::tie(after.rank, after.stream, after.stage, after.microbatch, after.op));
    }
  }
}

TEST(EncoderDecoder, BatchedExchangesWaitOnTheTwinsToo) {
  // Megatron's batched exchange waits on every request: each twin also gets a host WAIT, so a
  // doubled boundary and microbatch adds 4 transfers and 4 waits.
  const pipeline::Order order = ir::parse_rows(kOneFOneB);
  const ir::Graph base = lowered(order, {.p2p = P2PMode::kBatched});
  const ir::Graph g = lowered(order, {.p2p = P2PMode::kBatched, .encoder_decoder_split = 2});
  EXPECT_EQ(g.num_tasks(), base.num_tasks() + 8 * kMicrobatches);
}

TEST(EncoderDecoder, SplitOutsideTheStagesIsRejected) {
  const pipeline::Order order = ir::parse_rows(kOneFOneB);
  for (std::int32_t split : {0, 4}) {
    EXPECT_THAT([&] { (void)lower(order, {.encoder_decoder_split = split}); },
                ThrowsMessage<InvalidConfig>(HasSubstr(
                    "add_encoder_output_transfers: split stage is " + std::to_string(split) +
                    "; expected 1 <= split < 4 (the number of stages)")));
  }
  EXPECT_THAT([&] { (void)lower(order, {.encoder_decoder_split = 2, .encoder_output_bytes = -1}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "add_encoder_output_transfers: encoder_output_bytes is -1; expected >= 0")));
}

TEST(EncoderDecoder, TagAlreadyUsingTheTwinBitIsRejected) {
  // Stage 1 on rank 0 sends to stage 2 on rank 1 with a tag no ir::p2p_tag produces.
  ir::GraphBuilder b;
  const ir::RankId r0 = b.add_rank();
  const ir::RankId r1 = b.add_rank();
  constexpr std::int64_t kTag = kEncoderOutputTagBit + 1;
  b.add({.rank = r0,
         .stream = b.stream(r0, "pp-send"),
         .stage = ir::StageId{1},
         .microbatch = ir::MicrobatchId{0},
         .op = ir::Send{.peer = r1, .bytes = 1, .tag = kTag}});
  b.add({.rank = r1,
         .stream = b.stream(r1, "pp-recv"),
         .stage = ir::StageId{2},
         .microbatch = ir::MicrobatchId{0},
         .op = ir::Recv{.peer = r0, .bytes = 1, .tag = kTag}});
  const ir::Graph g = std::move(b).build();
  EXPECT_THAT([&] { (void)add_encoder_output_transfers(g, 1, 1); },
              ThrowsMessage<InvalidConfig>(AllOf(
                  HasSubstr("add_encoder_output_transfers: task 0 (rank 0, stage 1"),
                  HasSubstr("has tag " + std::to_string(kTag) + "; expected 0 <= tag < 2^62"))));
}

TEST(EncoderDecoder, RegistryOrdersStayDeadlockFreeForEverySplit) {
  for (const char* name : {"1f1b", "interleaved-1f1b"}) {
    const std::int32_t vp = std::string(name) == "1f1b" ? 1 : 2;
    for (std::int32_t p = 2; p <= 4; ++p) {
      const pipeline::Order order =
          pipeline::generate_order({.name = name, .pp = p, .vp = vp, .microbatches = 2 * p});
      const std::int32_t stages = p * vp;
      const ir::Graph base = lower(order, {});
      for (std::int32_t split = 1; split < stages; ++split) {
        SCOPED_TRACE(std::string(name) + " p=" + std::to_string(p) +
                     " split=" + std::to_string(split));
        const ir::Graph g = lowered(order, {.encoder_decoder_split = split});
        EXPECT_EQ(g.num_tasks(), base.num_tasks() + 4 * (stages - 1 - split) * 2 * p);
      }
    }
  }
}

}  // namespace
}  // namespace metron::lowering
