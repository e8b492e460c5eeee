// replicate_tensor_parallel (Note [tensor-parallel peers]) on a 2-rank 1F1B pipeline whose ranks
// carry "tp<r>" all-reduces and a "dp<r>" gradient all-reduce, checked against the note by hand.

#include "metron/lowering/tensor_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/lowering/data_parallel.h"
#include "metron/lowering/intra_layer.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// Two pipeline ranks, each forward and backward followed by one tensor-parallel all-reduce
/// (group "tp<r>"), and the gradient all-reduce of each rank (group "dp<r>", one replica).
ir::Graph pipeline_with_groups() {
  ir::GraphBuilder b = lower_unvalidated(ir::parse_rows("rank 0: 0F0 0F1 0B0 0B1\n"
                                                        "rank 1: 1F0 1B0 1F1 1B1\n"),
                                         {.p2p = P2PMode::kAsync, .layers = {.per_stage = {1, 1}}});
  IntraLayerComm comm;
  comm.forward.push_back({.group = GroupKind::kTensor, .bytes = 1024});
  comm.backward.push_back({.group = GroupKind::kTensor, .bytes = 1024});
  add_intra_layer_collectives(b, comm);
  add_gradient_all_reduce(b, 2, {4096, 4096});
  return std::move(b).build();
}

/// The names of the groups of `g`, in id order.
std::vector<std::string> group_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const ir::Group& group : g.data().groups) names.push_back(group.name);
  return names;
}

TEST(ReplicateTensorParallel, OnePeerIsTheGraphItself) {
  const ir::Graph g = pipeline_with_groups();
  EXPECT_EQ(replicate_tensor_parallel(g, 1), g);
}

TEST(ReplicateTensorParallel, PeersShareTheirTensorGroupAndKeepTheirOwnDataGroups) {
  const ir::Graph g = pipeline_with_groups();
  ASSERT_THAT(group_names(g), ElementsAre("tp0", "tp1", "dp0", "dp1"));
  const ir::Graph t = replicate_tensor_parallel(g, 2);
  ASSERT_EQ(t.num_ranks(), 4);
  ASSERT_EQ(t.num_tasks(), 2 * g.num_tasks());
  // Copy 0 keeps every group; copy 1 adds its own data-parallel groups, renamed dp<index + 2>
  // (N = 2 ranks), and shares the tensor groups, which now hold rank r and its peer r + 2.
  EXPECT_THAT(group_names(t), ElementsAre("tp0", "tp1", "dp0", "dp1", "dp2", "dp3"));
  EXPECT_THAT(t.data().groups[0].ranks, ElementsAre(ir::RankId{0}, ir::RankId{2}));
  EXPECT_THAT(t.data().groups[1].ranks, ElementsAre(ir::RankId{1}, ir::RankId{3}));
  EXPECT_THAT(t.data().groups[4].ranks, ElementsAre(ir::RankId{2}));
  for (std::int32_t i = 0; i < g.num_tasks(); ++i) {
    const ir::Task& original = g.task(ir::TaskId{i});
    EXPECT_EQ(t.task(ir::TaskId{i}), original);
    const ir::Task& peer = t.task(ir::TaskId{i + g.num_tasks()});
    EXPECT_EQ(peer.rank.value(), original.rank.value() + 2);
    if (const auto* c = std::get_if<ir::Collective>(&peer.op)) {
      const std::string& name = t.group(c->group).name;
      const std::string& before = g.group(std::get<ir::Collective>(original.op).group).name;
      // The peer's tensor all-reduce is the same group's next member; its gradient all-reduce
      // is its own group's.
      EXPECT_EQ(name, before.starts_with("tp")
                          ? before
                          : "dp" + std::to_string(std::stoi(before.substr(2)) + 2));
    }
    if (const auto* send = std::get_if<ir::Send>(&peer.op)) {
      EXPECT_EQ(send->peer.value(), std::get<ir::Send>(original.op).peer.value() + 2);
    }
  }
  EXPECT_EQ(t.rank(ir::RankId{3}).coords.tp, 1);
  EXPECT_EQ(t.rank(ir::RankId{3}).coords.pp, 1);
  EXPECT_NO_THROW(ir::check_deadlock(t));
}

TEST(ReplicateTensorParallel, RejectsABadCountAndAGraphThatHasPeersAlready) {
  const ir::Graph g = pipeline_with_groups();
  EXPECT_THAT([&] { (void)replicate_tensor_parallel(g, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("expected a positive count, got 0")));
  const ir::Graph t = replicate_tensor_parallel(g, 2);
  EXPECT_THAT([&] { (void)replicate_tensor_parallel(t, 2); },
              ThrowsMessage<InvalidConfig>(HasSubstr("already holds tensor-parallel rank 1")));
}

}  // namespace
}  // namespace metron::lowering
