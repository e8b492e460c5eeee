#include "metron/models/group_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "metron/base/error.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

HardwareSpec nodes_of(std::int64_t gpus_per_node) {
  HardwareSpec hardware;
  hardware.name = "test";
  hardware.gpus_per_node = gpus_per_node;
  return hardware;
}

GroupPlacement placed(std::int64_t ranks, std::int64_t nodes) {
  return {.ranks = ranks, .nodes = nodes};
}

// --- group_placement: hand-derived cases on 8-GPU nodes -----------------------------------------

TEST(GroupPlacement, ContiguousGroupFillsNodes) {
  EXPECT_EQ(group_placement(8, 1, 8), placed(8, 1));    // TP 8: one node
  EXPECT_EQ(group_placement(16, 1, 8), placed(16, 2));  // TP 16: 16 / 8 = 2 nodes of 8
  EXPECT_EQ(group_placement(16, 1, 8).ranks_per_node(), 8);
  EXPECT_EQ(group_placement(4, 1, 8), placed(4, 1));  // two TP-4 groups per node
  EXPECT_EQ(group_placement(1, 1, 8), placed(1, 1));
}

TEST(GroupPlacement, StridedGroupPutsNodeOverStrideRanksInANode) {
  // Stride 2: ranks {a, a+2, a+4, a+6} share a node (8 / 2 = 4), so 8 ranks take 2 nodes.
  EXPECT_EQ(group_placement(8, 2, 8), placed(8, 2));
  EXPECT_EQ(group_placement(8, 2, 8).ranks_per_node(), 4);
  // Stride 2, size 2: {0,2}, {1,3}, {4,6}, {5,7}, ... never leave a node.
  EXPECT_EQ(group_placement(2, 2, 8), placed(2, 1));
}

TEST(GroupPlacement, StrideOfANodeOrMorePutsOneRankPerNode) {
  EXPECT_EQ(group_placement(8, 8, 8), placed(8, 8));      // DP 8 with tp 8
  EXPECT_EQ(group_placement(64, 8, 8), placed(64, 64));   // DP 64 with tp 8
  EXPECT_EQ(group_placement(16, 64, 8), placed(16, 16));  // PP 16 with tp·dp = 64
  EXPECT_EQ(group_placement(4, 12, 8), placed(4, 4));     // 12 is not a multiple of 8: still apart
  EXPECT_EQ(group_placement(4, 12, 8).ranks_per_node(), 1);
}

TEST(GroupPlacement, CountsAGroupThatStraddlesNodesAsSpanningThem) {
  // Stride 3 on 8-GPU nodes, size 2: groups {0,3}, {1,4}, {2,5} sit in node 0, but {6,9},
  // {7,10}, {8,11}... {6,9} spans nodes 0 and 1. Counting the worst group: 2 nodes of 1 rank,
  // although 8 / 3 = 2 ranks would "fit" in a node.
  EXPECT_EQ(group_placement(2, 3, 8), placed(2, 2));
  EXPECT_EQ(group_placement(2, 3, 8).ranks_per_node(), 1);
  // Size 3, stride 1 (TP 3): {0,1,2}, {3,4,5}, {6,7,8}: the third crosses into node 1.
  EXPECT_EQ(group_placement(3, 1, 8), placed(3, 2));
  // ranks_per_node rounds 3 / 2 down to 1: the comm model then sends everything over the
  // slower inter-node link, which is what the straddling group waits for anyway.
  EXPECT_EQ(group_placement(3, 1, 8).ranks_per_node(), 1);
}

TEST(GroupPlacement, StraddlingStrideNeverCountsMoreNodesThanTouched) {
  // Size 4, stride 3: group starts are a + 12m (a < 3), i.e. 0,1,2,4,5,6 mod 8, never 7. The
  // latest start, 6 mod 8 (e.g. 14, 17, 20, 23), reaches 6 + 9 = 15 < 16: at most 2 nodes.
  EXPECT_EQ(group_placement(4, 3, 8), placed(4, 2));
  EXPECT_EQ(group_placement(4, 3, 8).ranks_per_node(), 2);
}

TEST(GroupPlacement, RejectsNonPositiveArguments) {
  EXPECT_THAT([] { (void)group_placement(0, 1, 8); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("group placement: size: expected a positive integer, got 0")));
  EXPECT_THAT([] { (void)group_placement(2, -1, 8); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("group placement: stride: expected a positive integer, got -1")));
  EXPECT_THAT([] { (void)group_placement(2, 1, 0); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("group placement: gpus_per_node: expected a positive integer, got 0")));
}

// The oracle: lay the groups out rank by rank and count the distinct nodes of each.
std::int64_t max_nodes(const std::vector<std::vector<std::int64_t>>& groups,
                       std::int64_t gpus_per_node) {
  std::int64_t most = 0;
  for (const auto& group : groups) {
    std::set<std::int64_t> nodes;
    for (std::int64_t rank : group) nodes.insert(rank / gpus_per_node);
    most = std::max(most, static_cast<std::int64_t>(nodes.size()));
  }
  return most;
}

TEST(GroupPlacement, MatchesTheWorstGroupOfAnUnboundedLayout) {
  for (std::int64_t g : {4, 6, 8}) {
    for (std::int64_t size = 1; size <= 12; ++size) {
      for (std::int64_t stride = 1; stride <= 12; ++stride) {
        // Groups {a + stride·size·m + stride·i}; 2·g blocks cover every start modulo g.
        std::vector<std::vector<std::int64_t>> groups;
        for (std::int64_t m = 0; m < 2 * g; ++m) {
          for (std::int64_t a = 0; a < stride; ++a) {
            std::vector<std::int64_t> group;
            for (std::int64_t i = 0; i < size; ++i)
              group.push_back(a + stride * size * m + stride * i);
            groups.push_back(group);
          }
        }
        EXPECT_EQ(group_placement(size, stride, g), placed(size, max_nodes(groups, g)))
            << "size " << size << " stride " << stride << " gpus_per_node " << g;
      }
    }
  }
}

// --- parallel_groups ----------------------------------------------------------------------------

TEST(ParallelGroups, Gpt3OnMegatronsLayout) {
  // tp 8, pp 16, dp 8 on 8-GPU nodes (Narayanan et al. SC'21): a TP group is one node; the 8 DP
  // ranks are 8 apart, one per node; the 16 PP ranks are 8·8 = 64 apart, one per node.
  const ParallelGroups groups = parallel_groups({.tp = 8, .pp = 16, .dp = 8}, nodes_of(8));
  EXPECT_EQ(groups.tp, placed(8, 1));
  EXPECT_EQ(groups.cp, placed(1, 1));
  EXPECT_EQ(groups.ep, placed(1, 1));
  EXPECT_EQ(groups.dp, placed(8, 8));
  EXPECT_EQ(groups.expert_dp, placed(8, 8));  // dp·cp / ep = 8, stride tp·ep = 8
  EXPECT_EQ(groups.pp, placed(16, 16));
  EXPECT_FALSE(groups.pp_neighbours_share_node);
}

TEST(ParallelGroups, SmallConfigurationFitsInOneNode) {
  // tp 2, dp 2, pp 2 = 8 ranks on one 8-GPU node: TP {0,1}, DP {0,2}, PP {0,4}.
  const ParallelGroups groups = parallel_groups({.tp = 2, .pp = 2, .dp = 2}, nodes_of(8));
  EXPECT_EQ(groups.tp, placed(2, 1));
  EXPECT_EQ(groups.dp, placed(2, 1));
  EXPECT_EQ(groups.expert_dp, placed(2, 1));
  EXPECT_EQ(groups.pp, placed(2, 1));
  EXPECT_TRUE(groups.pp_neighbours_share_node);
}

TEST(ParallelGroups, DualPipesStageCopiesPairTheFarthestPipelineRanks) {
  // Pipeline ranks 0 and pp-1 pair up, tp·dp·(pp-1) world ranks apart. tp 1, dp 2, pp 4: pairs
  // {0, 6} and {1, 7}, both inside one 8-GPU node; tp 2, dp 2, pp 4: {a, a + 12}, a < 4, two
  // nodes; tp 1, dp 3, pp 2: {a, a + 3}, a < 3, one node; pp 1 has no pair.
  EXPECT_EQ(parallel_groups({.tp = 1, .pp = 4, .dp = 2}, nodes_of(8)).pp_ends, placed(2, 1));
  EXPECT_EQ(parallel_groups({.tp = 2, .pp = 4, .dp = 2}, nodes_of(8)).pp_ends, placed(2, 2));
  EXPECT_EQ(parallel_groups({.tp = 1, .pp = 2, .dp = 3}, nodes_of(8)).pp_ends, placed(2, 1));
  // tp 1, dp 6, pp 2 on 8-GPU nodes: {a, a + 6}, a < 6: {2, 8} crosses into the second node.
  EXPECT_EQ(parallel_groups({.tp = 1, .pp = 2, .dp = 6}, nodes_of(8)).pp_ends, placed(2, 2));
  EXPECT_EQ(parallel_groups({.tp = 8, .pp = 1, .dp = 1}, nodes_of(8)).pp_ends, placed(1, 1));
}

TEST(ParallelGroups, TensorParallelWiderThanANode) {
  // tp 16 on 8-GPU nodes: 2 nodes of 8; the 2 DP ranks are 16 apart, on different nodes.
  const ParallelGroups groups = parallel_groups({.tp = 16, .dp = 2}, nodes_of(8));
  EXPECT_EQ(groups.tp, placed(16, 2));
  EXPECT_EQ(groups.tp.ranks_per_node(), 8);
  EXPECT_EQ(groups.dp, placed(2, 2));
  EXPECT_EQ(groups.pp, placed(1, 1));
  EXPECT_FALSE(groups.pp_neighbours_share_node);  // pp = 1: no neighbours at all
}

TEST(ParallelGroups, ContextAndExpertGroupsSitBetweenTpAndPp) {
  // tp 2, cp 2, dp 4, ep 4, pp 2 on 8-GPU nodes, rank = t + 2·(c + 2·(d + 4·p)), 32 ranks.
  //   cp        {t, t+2}: inside a block of 4                         -> 1 node
  //   ep        4 of the dp·cp ranks, stride 2: {a, a+2, a+4, a+6}    -> 1 node
  //   dp        dp·cp = 8 ranks, stride 2, e.g. {0, 2, ..., 14}       -> 2 nodes of 4
  //   expert_dp 8 / 4 = 2 ranks, stride 2·4 = 8, e.g. {0, 8}          -> 2 nodes
  //   pp        2 ranks, stride 2·2·4 = 16, e.g. {0, 16}              -> 2 nodes
  const ParallelGroups groups =
      parallel_groups({.tp = 2, .pp = 2, .dp = 4, .cp = 2, .ep = 4}, nodes_of(8));
  EXPECT_EQ(groups.tp, placed(2, 1));
  EXPECT_EQ(groups.cp, placed(2, 1));
  EXPECT_EQ(groups.ep, placed(4, 1));
  EXPECT_EQ(groups.dp, placed(8, 2));
  EXPECT_EQ(groups.dp.ranks_per_node(), 4);
  EXPECT_EQ(groups.expert_dp, placed(2, 2));
  EXPECT_EQ(groups.pp, placed(2, 2));
  EXPECT_FALSE(groups.pp_neighbours_share_node);
}

TEST(ParallelGroups, PipelineCrossingANodeOnceDoesNotShare) {
  // tp 2, pp 8 on 8-GPU nodes: stages 0-3 on node 0 (ranks 0,2,4,6), 4-7 on node 1; the 3→4
  // transfer crosses, and the slowest hop paces the pipeline.
  const ParallelGroups groups = parallel_groups({.tp = 2, .pp = 8}, nodes_of(8));
  EXPECT_EQ(groups.pp, placed(8, 2));
  EXPECT_FALSE(groups.pp_neighbours_share_node);
  // tp 2, pp 4: ranks {0,2,4,6} and {1,3,5,7}, one node.
  EXPECT_TRUE(parallel_groups({.tp = 2, .pp = 4}, nodes_of(8)).pp_neighbours_share_node);
}

TEST(ParallelGroups, CountsOnlyTheGroupsThatExist) {
  // tp 3 alone is 3 ranks on one node, though a larger job's TP-3 group {6,7,8} would straddle.
  EXPECT_EQ(parallel_groups({.tp = 3}, nodes_of(8)).tp, placed(3, 1));
  EXPECT_EQ(parallel_groups({.tp = 3, .dp = 8}, nodes_of(8)).tp, placed(3, 2));
  // tp 3, pp 2: ranks 0-5, all in node 0, so the pipeline neighbours share it.
  const ParallelGroups groups = parallel_groups({.tp = 3, .pp = 2}, nodes_of(8));
  EXPECT_EQ(groups.pp, placed(2, 1));
  EXPECT_TRUE(groups.pp_neighbours_share_node);
}

TEST(ParallelGroups, RejectsSizesThatCannotBePlaced) {
  EXPECT_THAT([] { (void)parallel_groups({.dp = 3, .ep = 2}, nodes_of(8)); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("parallel groups: dp·cp (3) must be divisible by ep (2)")));
  EXPECT_THAT([] { (void)parallel_groups({.tp = 0}, nodes_of(8)); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("parallel groups: tp: expected a positive integer, got 0")));
  EXPECT_THAT([] { (void)parallel_groups({}, nodes_of(0)); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("parallel groups: gpus_per_node: expected a positive integer, got 0")));
}

// The oracle for a whole configuration: every rank from its coordinates, in Megatron's order
// (tp fastest, then cp, dp, pp; ep blocks of consecutive dp·cp indices), then each group built
// from the coordinates it shares.
struct Layout {
  std::int64_t tp, cp, dp, pp, ep;
  [[nodiscard]] std::int64_t rank(std::int64_t t, std::int64_t c, std::int64_t d,
                                  std::int64_t p) const {
    return t + tp * (c + cp * (d + dp * p));
  }
  // j indexes the dp·cp ranks of one (t, p): j = c + cp·d.
  [[nodiscard]] std::int64_t rank_j(std::int64_t t, std::int64_t j, std::int64_t p) const {
    return rank(t, j % cp, j / cp, p);
  }
};

ParallelGroups brute_force(const Layout& l, std::int64_t g) {
  std::vector<std::vector<std::int64_t>> tp, cp, dp, ep, edp, pp;
  for (std::int64_t p = 0; p < l.pp; ++p) {
    for (std::int64_t d = 0; d < l.dp; ++d) {
      for (std::int64_t c = 0; c < l.cp; ++c) {
        tp.emplace_back();
        for (std::int64_t t = 0; t < l.tp; ++t) tp.back().push_back(l.rank(t, c, d, p));
      }
    }
  }
  for (std::int64_t t = 0; t < l.tp; ++t) {
    for (std::int64_t p = 0; p < l.pp; ++p) {
      for (std::int64_t d = 0; d < l.dp; ++d) {
        cp.emplace_back();
        for (std::int64_t c = 0; c < l.cp; ++c) cp.back().push_back(l.rank(t, c, d, p));
      }
      dp.emplace_back();
      for (std::int64_t j = 0; j < l.dp * l.cp; ++j) dp.back().push_back(l.rank_j(t, j, p));
      for (std::int64_t k = 0; k < l.dp * l.cp / l.ep; ++k) {
        ep.emplace_back();
        for (std::int64_t e = 0; e < l.ep; ++e) ep.back().push_back(l.rank_j(t, e + l.ep * k, p));
      }
      for (std::int64_t e = 0; e < l.ep; ++e) {
        edp.emplace_back();
        for (std::int64_t k = 0; k < l.dp * l.cp / l.ep; ++k) {
          edp.back().push_back(l.rank_j(t, e + l.ep * k, p));
        }
      }
    }
    for (std::int64_t d = 0; d < l.dp; ++d) {
      for (std::int64_t c = 0; c < l.cp; ++c) {
        pp.emplace_back();
        for (std::int64_t p = 0; p < l.pp; ++p) pp.back().push_back(l.rank(t, c, d, p));
      }
    }
  }
  bool share = l.pp > 1;
  for (const auto& group : pp) {
    for (std::size_t i = 0; i + 1 < group.size(); ++i) {
      share = share && group[i] / g == group[i + 1] / g;
    }
  }
  return {.tp = placed(l.tp, max_nodes(tp, g)),
          .cp = placed(l.cp, max_nodes(cp, g)),
          .ep = placed(l.ep, max_nodes(ep, g)),
          .dp = placed(l.dp * l.cp, max_nodes(dp, g)),
          .expert_dp = placed(l.dp * l.cp / l.ep, max_nodes(edp, g)),
          .pp = placed(l.pp, max_nodes(pp, g)),
          .pp_neighbours_share_node = share};
}

TEST(ParallelGroups, MatchesARankByRankLayout) {
  for (std::int64_t g : {4, 6, 8}) {
    for (std::int64_t tp : {1, 2, 3, 4, 8, 16}) {
      for (std::int64_t cp : {1, 2, 3}) {
        for (std::int64_t dp : {1, 2, 4, 6}) {
          for (std::int64_t pp : {1, 2, 3, 4}) {
            for (std::int64_t ep : {1, 2, 3, 4}) {
              if ((dp * cp) % ep != 0) continue;
              const Layout layout{.tp = tp, .cp = cp, .dp = dp, .pp = pp, .ep = ep};
              const ParallelGroups want = brute_force(layout, g);
              const ParallelGroups got =
                  parallel_groups({.tp = tp, .pp = pp, .dp = dp, .cp = cp, .ep = ep}, nodes_of(g));
              const std::string where = "tp " + std::to_string(tp) + " cp " + std::to_string(cp) +
                                        " dp " + std::to_string(dp) + " pp " + std::to_string(pp) +
                                        " ep " + std::to_string(ep) + " on " + std::to_string(g);
              EXPECT_EQ(got.tp, want.tp) << where;
              EXPECT_EQ(got.cp, want.cp) << where;
              EXPECT_EQ(got.ep, want.ep) << where;
              EXPECT_EQ(got.dp, want.dp) << where;
              EXPECT_EQ(got.expert_dp, want.expert_dp) << where;
              EXPECT_EQ(got.pp, want.pp) << where;
              EXPECT_EQ(got.pp_neighbours_share_node, want.pp_neighbours_share_node) << where;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace metron::models
