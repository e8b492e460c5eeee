// replicate_data_parallel and add_gradient_all_reduce (Note [data-parallel replicas]) on a
// Megatron 1F1B pipeline of 2 ranks and 3 microbatches, checked against the note by hand.

#include "metron/lowering/data_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ir::Graph pipeline() {
  return lower(ir::parse_rows("rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
                              "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n"),
               {.p2p = P2PMode::kAsync});
}

std::vector<const ir::Task*> collectives_of(const ir::Graph& g, ir::RankId rank) {
  std::vector<const ir::Task*> out;
  for (ir::TaskId t : g.issue_order(rank)) {
    if (g.task(t).kind() == ir::TaskKind::kCollective) out.push_back(&g.task(t));
  }
  return out;
}

TEST(ReplicateDataParallel, OneReplicaIsTheGraphItself) {
  const ir::Graph g = pipeline();
  EXPECT_EQ(replicate_data_parallel(g, 1), g);
}

TEST(ReplicateDataParallel, ReplicaZeroKeepsEveryIdAndOthersAreShifted) {
  const ir::Graph g = pipeline();
  const ir::Graph d = replicate_data_parallel(g, 3);
  ASSERT_EQ(d.num_ranks(), 6);
  ASSERT_EQ(d.num_tasks(), 3 * g.num_tasks());
  for (std::int32_t t = 0; t < g.num_tasks(); ++t) {
    EXPECT_EQ(d.task(ir::TaskId{t}), g.task(ir::TaskId{t}));
    // Replica 2's copy of task t sits 2·|tasks| later on rank (2·2 + its rank).
    const ir::Task& copy = d.task(ir::TaskId{t + 2 * g.num_tasks()});
    EXPECT_EQ(copy.rank.value(), g.task(ir::TaskId{t}).rank.value() + 4);
    if (const auto* send = std::get_if<ir::Send>(&copy.op)) {
      EXPECT_EQ(send->peer.value(), std::get<ir::Send>(g.task(ir::TaskId{t}).op).peer.value() + 4);
    }
  }
  EXPECT_EQ(d.rank(ir::RankId{5}).coords.dp, 2);
  EXPECT_NO_THROW(ir::check_deadlock(d));
}

TEST(AddGradientAllReduce, EveryRankReducesOnceBeforeItsStepInItsPipelineRanksGroup) {
  const ir::Graph d = add_gradient_all_reduce(replicate_data_parallel(pipeline(), 2), 2, {100, 200},
                                              ir::DType::kFp32);
  ASSERT_TRUE(d.find_group("dp0").has_value());
  EXPECT_THAT(d.group(*d.find_group("dp0")).ranks, ElementsAre(ir::RankId{0}, ir::RankId{2}));
  EXPECT_THAT(d.group(*d.find_group("dp1")).ranks, ElementsAre(ir::RankId{1}, ir::RankId{3}));
  for (std::int32_t r = 0; r < 4; ++r) {
    const ir::RankId rank{r};
    const auto reduces = collectives_of(d, rank);
    ASSERT_EQ(reduces.size(), 1U) << "rank " << r;
    const auto& op = std::get<ir::Collective>(reduces.front()->op);
    EXPECT_EQ(op.bytes, r % 2 == 0 ? 100 : 200);
    EXPECT_EQ(op.group, *d.find_group("dp" + std::to_string(r % 2)));
    // Issue order: ... last backward, all-reduce, STEP.
    const auto& order = d.issue_order(rank);
    const ir::Task& last = d.task(order.back());
    const ir::Task& before_last = d.task(order[order.size() - 2]);
    EXPECT_EQ(std::get<ir::Compute>(last.op).phase, ir::Phase::kOptimizer);
    EXPECT_EQ(&before_last, reduces.front());
    EXPECT_THAT(last.deps, ::testing::Contains(order[order.size() - 2]));
    EXPECT_EQ(std::get<ir::Compute>(d.task(before_last.deps.front()).op).phase,
              ir::Phase::kBackward);
  }
  EXPECT_NO_THROW(ir::check_deadlock(d));
}

TEST(AddGradientAllReduce, RejectsMismatchedSizes) {
  const ir::Graph g = replicate_data_parallel(pipeline(), 2);
  EXPECT_THAT(
      [&] {
        (void)add_gradient_all_reduce(g, 3, {1, 2, 3});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("not a multiple of 3 pipeline ranks")));
  EXPECT_THAT([&] { (void)add_gradient_all_reduce(g, 2, {1}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expected 2 gradient sizes")));
  EXPECT_THAT([&] { (void)replicate_data_parallel(g, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expected a positive count, got 0")));
}

}  // namespace
}  // namespace metron::lowering
