#include "metron/models/comm_cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Round numbers for one level: α = 1 µs, β = 100 GB/s, S = 1 GiB.
constexpr Link kLink{.latency = 1e-6, .bandwidth = 1e11};
constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// dgx-h100's fabrics (hardware_presets.cc): NVLink α = 1 µs, β = 370 GB/s (NCCL's ring busbw);
// one 400 Gb/s NIC per GPU, α = 5 µs, β = 47.5 GB/s. These tests price the plateau: the preset's
// size curve is taken off (SizeEfficiency, below, has its own tests).
constexpr double kIntraAlpha = 1e-6;
constexpr double kIntraBeta = 370e9;
constexpr double kInterAlpha = 5e-6;
constexpr double kInterBeta = 47.5e9;

// Without its host CPU vendor, so collectives across nodes take the alpha–beta ring on these
// latencies; NcclProtocols below keeps it.
CommModel h100(const CostProfile* profile = nullptr,
               CommAlgorithm algorithm = CommAlgorithm::kAuto) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  hw.intra_node.size_efficiency.reset();
  hw.inter_node.nccl_host_cpu.clear();
  return CommModel(hw, profile, algorithm);
}

// dgx-h100 with its Intel hosts, the size curve taken off: NCCL's protocol model.
CommModel h100_nccl(CommAlgorithm algorithm = CommAlgorithm::kAuto) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  hw.intra_node.size_efficiency.reset();
  return CommModel(hw, nullptr, algorithm);
}

TEST(CommAlgorithm, NamesRoundTrip) {
  for (CommAlgorithm a : {CommAlgorithm::kAuto, CommAlgorithm::kRing, CommAlgorithm::kTree}) {
    EXPECT_EQ(parse_comm_algorithm(to_string(a)), a);
  }
  EXPECT_EQ(to_string(CommAlgorithm::kAuto), "auto");
  EXPECT_EQ(to_string(CommAlgorithm::kRing), "ring");
  EXPECT_EQ(to_string(CommAlgorithm::kTree), "tree");
  EXPECT_EQ(parse_comm_algorithm("Ring"), std::nullopt);
}

TEST(FlatCollective, RingAllReduceIsTwoPassesOverTheRing) {
  // 2·(8−1)·α + 2·(8−1)/8 · S/β
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, kGiB, 8, kLink, CommAlgorithm::kRing),
                   2 * 7 * 1e-6 + 2.0 * 7 / 8 * double(kGiB) / 1e11);
}

TEST(FlatCollective, RingReduceScatterAllGatherAndAllToAllAreOnePass) {
  // (8−1)·α + (8−1)/8 · S/β for each
  const double expected = 7 * 1e-6 + 7.0 / 8 * double(kGiB) / 1e11;
  for (CommOp op : {CommOp::kReduceScatter, CommOp::kAllGather, CommOp::kAllToAll}) {
    EXPECT_DOUBLE_EQ(flat_collective_time(op, kGiB, 8, kLink, CommAlgorithm::kRing), expected)
        << to_string(op);
  }
}

TEST(FlatCollective, BroadcastAndReduceArePipelinedChains) {
  // (8−1)·α + S/β: the whole buffer crosses each link once
  const double expected = 7 * 1e-6 + double(kGiB) / 1e11;
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kBroadcast, kGiB, 8, kLink), expected);
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kReduce, kGiB, 8, kLink), expected);
}

TEST(FlatCollective, TreeAllReduceTakesLogDepthLatency) {
  // 2·⌈log₂ 8⌉·α + 2·S/β = 2·3·α + 2·S/β
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, kGiB, 8, kLink, CommAlgorithm::kTree),
                   2 * 3 * 1e-6 + 2 * double(kGiB) / 1e11);
  // ⌈log₂ 5⌉ = 3 as well; ⌈log₂ 2⌉ = 1
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, kGiB, 5, kLink, CommAlgorithm::kTree),
                   2 * 3 * 1e-6 + 2 * double(kGiB) / 1e11);
  EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, kGiB, 2, kLink, CommAlgorithm::kTree),
                   2 * 1 * 1e-6 + 2 * double(kGiB) / 1e11);
}

TEST(FlatCollective, TreeIsOnlyForAllReduce) {
  // Asking for a tree reduce-scatter still gets the ring: 7·α + 7/8 · S/β
  EXPECT_DOUBLE_EQ(
      flat_collective_time(CommOp::kReduceScatter, kGiB, 8, kLink, CommAlgorithm::kTree),
      7 * 1e-6 + 7.0 / 8 * double(kGiB) / 1e11);
}

// At n = 8, tree beats ring when 6α + 2S/β < 14α + 1.75·S/β, i.e. 0.25·S/β < 8α,
// i.e. S < 32·α·β = 32 · 1e-6 · 1e11 = 3.2e6 bytes.
TEST(FlatCollective, AutoPicksTreeBelowTheCrossoverAndRingAbove) {
  const auto ring = [](double s) { return 14 * 1e-6 + 1.75 * s / 1e11; };
  const auto tree = [](double s) { return 6 * 1e-6 + 2 * s / 1e11; };
  for (std::int64_t s : {std::int64_t{1024}, std::int64_t{3'199'999}}) {
    EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, s, 8, kLink), tree(double(s))) << s;
  }
  for (std::int64_t s : {std::int64_t{3'200'001}, kGiB}) {
    EXPECT_DOUBLE_EQ(flat_collective_time(CommOp::kAllReduce, s, 8, kLink), ring(double(s))) << s;
  }
}

TEST(FlatCollective, OneRankOrNoBytesCostsNothing) {
  EXPECT_EQ(flat_collective_time(CommOp::kAllReduce, kGiB, 1, kLink), 0.0);
  EXPECT_EQ(flat_collective_time(CommOp::kAllToAll, 0, 8, kLink), 0.0);
}

TEST(FlatCollective, RejectsNegativeBytesAndBadLinks) {
  EXPECT_THAT([] { flat_collective_time(CommOp::kAllGather, -1, 8, kLink); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("collective all-gather: bytes: expected an integer >= 0, got -1")));
  EXPECT_THAT([] { flat_collective_time(CommOp::kAllGather, 1, 0, kLink); },
              ThrowsMessage<InvalidConfig>(HasSubstr("ranks: expected a positive integer, got 0")));
  EXPECT_THAT(
      [] { flat_collective_time(CommOp::kAllGather, 1, 2, Link{.latency = 0, .bandwidth = 0}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("link.bandwidth: expected a positive number")));
}

// The flat one-level formulas of Note [collective costs], written out again for the
// multi-node tests.
double ring_one_pass(double n, double s, double alpha, double beta) {
  return (n - 1) * alpha + (n - 1) / n * s / beta;
}
double chain(double n, double s, double alpha, double beta) { return (n - 1) * alpha + s / beta; }

// DP group of 64 ranks on 8 nodes, 8 per node, S = 1 GiB.
constexpr GroupPlacement kDp64{.ranks = 64, .nodes = 8};
constexpr double kS = double(kGiB);
// The ring's rate over several nodes: the slower of NVLink (370) and the node's 8 NICs
// (8 · 47.5 = 380 GB/s), so NVLink here.
constexpr double kDp64Rate = 370e9;

TEST(MultiNodeCollective, AllReduceIsOneFlatRingThroughEveryRank) {
  // n = 64 ranks: 2·63 steps, 2·7 of them across nodes (NCCL's nInterSteps), the rest on NVLink.
  const double expected =
      2 * (63 - 7) * kIntraAlpha + 2 * 7 * kInterAlpha + 2.0 * 63 / 64 * kS / kDp64Rate;
  const CommModel ring = h100(nullptr, CommAlgorithm::kRing);
  EXPECT_DOUBLE_EQ(ring.collective_time(CommOp::kAllReduce, kGiB, kDp64), expected);
  // Auto: the tree's 2·(7·α_intra + 3·α_inter) + 2·S/B = 5.848 ms beats the ring's 126 steps
  // (5.895 ms) even at 1 GiB.
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllReduce, kGiB, kDp64),
                   2 * (7 * kIntraAlpha + 3 * kInterAlpha) + 2 * kS / kDp64Rate);
  const std::vector<CommPhase> phases = ring.phases(CommOp::kAllReduce, kGiB, kDp64);
  ASSERT_EQ(phases.size(), 1U);
  EXPECT_EQ(phases[0].op, CommOp::kAllReduce);
  EXPECT_EQ(phases[0].ranks, 64);
  EXPECT_EQ(phases[0].bytes, kGiB);
  EXPECT_TRUE(phases[0].inter_node);
  EXPECT_DOUBLE_EQ(phases[0].seconds, expected);
}

TEST(MultiNodeCollective, ReduceScatterAndAllGatherAreOnePassOfTheRing) {
  // 63 steps, 7 across: 56·α_intra + 7·α_inter + 63/64 · S/B
  const double expected = 56 * kIntraAlpha + 7 * kInterAlpha + 63.0 / 64 * kS / kDp64Rate;
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kReduceScatter, kGiB, kDp64), expected);
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllGather, kGiB, kDp64), expected);
}

TEST(MultiNodeCollective, BroadcastAndReduceAreOneChain) {
  // 56·α_intra + 7·α_inter + S/B
  const double expected = 56 * kIntraAlpha + 7 * kInterAlpha + kS / kDp64Rate;
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kBroadcast, kGiB, kDp64), expected);
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kReduce, kGiB, kDp64), expected);
}

TEST(MultiNodeCollective, FewRanksPerNodeRunAtTheirNicsRate) {
  // dp 16 over 8 nodes, 2 ranks on each (tp 4): the node's two NICs, 2 · 47.5 GB/s, are slower
  // than NVLink. 15 steps, 7 across.
  const GroupPlacement group{.ranks = 16, .nodes = 8};
  EXPECT_DOUBLE_EQ(
      h100(nullptr, CommAlgorithm::kRing).collective_time(CommOp::kAllGather, kGiB, group),
      8 * kIntraAlpha + 7 * kInterAlpha + 15.0 / 16 * kS / (2 * kInterBeta));
}

TEST(MultiNodeCollective, TreeAllReduceChainsInsideAndBranchesAcross) {
  // NCCL's tree latency 2·((r−1)·α_intra + ⌈log₂ N⌉·α_inter), and 2·S/B: forced, and chosen by
  // auto for a small message, where the ring's 126 steps cost more than the tree's 20.
  const double s = 64.0 * 1024;
  const double tree = 2 * (7 * kIntraAlpha + 3 * kInterAlpha) + 2 * s / kDp64Rate;
  EXPECT_DOUBLE_EQ(
      h100(nullptr, CommAlgorithm::kTree).collective_time(CommOp::kAllReduce, 64 * 1024, kDp64),
      tree);
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllReduce, 64 * 1024, kDp64), tree);
}

// nccl-tests' multi-node all-reduce plateaus (NVIDIA GTC24 S62129): about 192 GB/s busbw on
// DGX A100 nodes (8x HDR 200 Gb/s) and 380 on DGX H100 nodes (8x NDR 400 Gb/s; 370 in GTC25
// S72583), whatever the node count. The presets' curves stay on: on the H100 NVLink's ring rate
// at 8 GiB (370 · 0.99) is the slower side, 4 % under 380, and on 16 nodes NCCL's own latency
// term (a Simple ring's 224 NVLink and 30 network steps, ×1.4) takes 3 % more.
TEST(MultiNodeCollective, LargeAllReducesReachTheMeasuredMultiNodeBusBandwidth) {
  constexpr std::int64_t k8GiB = 8 * kGiB;
  for (const auto& [preset, busbw] : {std::pair{"dgx-a100", 192e9}, std::pair{"dgx-h100", 380e9}}) {
    const CommModel model(hardware_preset(preset));
    for (std::int64_t nodes : {2, 4, 16}) {
      const std::int64_t n = 8 * nodes;
      const double t =
          model.collective_time(CommOp::kAllReduce, k8GiB, {.ranks = n, .nodes = nodes});
      EXPECT_NEAR(bus_bandwidth(CommOp::kAllReduce, k8GiB, n, t) / busbw, 1.0, 0.08)
          << preset << " on " << nodes << " nodes";
    }
  }
}

// NCCL's tuner constants (src/graph/tuning.cc), by hand, us. dp 64 on 8 DGX H100 nodes (Intel
// hosts: 1 us per network post, 3 for Simple): 63 ring steps, 7 across nodes; B = 370 GB/s.
constexpr double kUs = 1e-6;
TEST(NcclProtocols, LargeAllGathersTakeSimpleAtTheFullRate) {
  // Simple: 8.4 + 56·max(3.4, 3) + 7·14 = 296.8 us, + 63/64 · S / 370 GB/s = 3.154 ms; LL128
  // (14 + 56·1.9 + 7·4 = 148.4 us, 0.92·B) 3.254 ms; LL at 20.4 GB/s far slower.
  EXPECT_DOUBLE_EQ(h100_nccl().collective_time(CommOp::kAllGather, kGiB, kDp64),
                   296.8 * kUs + 63.0 / 64 * kS / 370e9);
}

TEST(NcclProtocols, SmallAllGathersTakeLl) {
  // LL: 6.6 + 56·max(0.6, 1) + 7·2.7 = 81.5 us, at min(20.4 GB/s, B/2) (8 nodes, Intel).
  const double s = 64.0 * 1024;
  EXPECT_NEAR(h100_nccl().collective_time(CommOp::kAllGather, 64 * 1024, kDp64),
              81.5 * kUs + 63.0 / 64 * s / 20.4e9, 1e-12);
}

TEST(NcclProtocols, LargeAllReducesWeighTheRingsProtocolsAgainstTheTree) {
  // Ring Simple: (8.4 + 112·3.4 + 14·14)·1.4 = 819.28 us + 2·63/64 · S/B = 6.532 ms;
  // ring LL128: 14 + 112·1.9 + 14·4 = 282.8 us + 2·63/64 · S/(0.92·B) = 6.493 ms, the ring's
  // best. Tree Simple: 8.4 + 2·(7·4 + 3·14) = 148.4 us + S/(0.5·0.92·B) = 6.457 ms, the best.
  const double ring_ll128 = 282.8 * kUs + 2.0 * 63 / 64 * kS / (0.92 * 370e9);
  const double tree_simple = 148.4 * kUs + kS / (0.5 * 0.92 * 370e9);
  EXPECT_NEAR(h100_nccl(CommAlgorithm::kRing).collective_time(CommOp::kAllReduce, kGiB, kDp64),
              ring_ll128, 1e-12);
  EXPECT_NEAR(h100_nccl().collective_time(CommOp::kAllReduce, kGiB, kDp64), tree_simple, 1e-12);
}

TEST(NcclProtocols, ALongRingOnAmdHostsPaysEveryStep) {
  // ZeRO-3's data-parallel group on 1,536 A100s, 192 DGX nodes (AMD hosts: 2 us per post): LL
  // 6.6 + 1344·2 + 191·2.7 = 3210.3 us before the data, which moves at LL's 19 GB/s.
  const CommModel a100(hardware_preset("dgx-a100"));
  EXPECT_NEAR(a100.collective_time(CommOp::kAllGather, 1536, {.ranks = 1536, .nodes = 192}),
              3210.3 * kUs + 1535.0 / 1536 * 1536 / 19e9, 1e-12);
}

TEST(NcclProtocols, OneRankPerNodeTakesTheNetworksTreeLatency) {
  // dp 8 with tp 8: 7 network steps at 5.0 us (LL, r = 1), base 6.6; B = 47.5 GB/s, LL at
  // min(20.4, 23.75) GB/s.
  const double s = 4096;
  EXPECT_NEAR(h100_nccl().collective_time(CommOp::kReduceScatter, 4096, {.ranks = 8, .nodes = 8}),
              (6.6 + 7 * 5.0) * kUs + 7.0 / 8 * s / 20.4e9, 1e-12);
}

TEST(MultiNodeCollective, AllToAllSplitsTheTrafficByWhereThePeerSits) {
  // n = 64, r = 8, N = 8. Inside: (r−1)·α + (r−1)/n · S/β = 7·α + 7/64 · S/β (NVLink).
  // Across: (N−1)·α + (n−r)/n · S/β = 7·α + 56/64 · S/β (NIC).
  const double expected =
      7 * kIntraAlpha + 7.0 / 64 * kS / kIntraBeta + 7 * kInterAlpha + 56.0 / 64 * kS / kInterBeta;
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllToAll, kGiB, kDp64), expected);
  const std::vector<CommPhase> phases = h100().phases(CommOp::kAllToAll, kGiB, kDp64);
  ASSERT_EQ(phases.size(), 2U);
  EXPECT_FALSE(phases[0].inter_node);
  EXPECT_TRUE(phases[1].inter_node);
}

TEST(MultiNodeCollective, OneRankPerNodeLeavesOnlyTheAcrossPhase) {
  // DP of 8 with tp = 8: one rank on each of 8 nodes, so the whole ring runs over the NICs:
  // 2·7·α + 2·7/8 · S/β (ring: 1 GiB is far above the 7.6e6-byte crossover)
  const GroupPlacement group{.ranks = 8, .nodes = 8};
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllReduce, kGiB, group),
                   2 * 7 * kInterAlpha + 2.0 * 7 / 8 * kS / kInterBeta);
  const std::vector<CommPhase> phases = h100().phases(CommOp::kReduceScatter, kGiB, group);
  ASSERT_EQ(phases.size(), 1U);
  EXPECT_TRUE(phases[0].inter_node);
  EXPECT_DOUBLE_EQ(phases[0].seconds, ring_one_pass(8, kS, kInterAlpha, kInterBeta));
}

TEST(MultiNodeCollective, OneNodeUsesOnlyNvlink) {
  // TP of 8 in one node: 7·α + S/β on NVLink
  const GroupPlacement group{.ranks = 8, .nodes = 1};
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kBroadcast, kGiB, group),
                   chain(8, kS, kIntraAlpha, kIntraBeta));
  EXPECT_FALSE(h100().phases(CommOp::kBroadcast, kGiB, group).at(0).inter_node);
}

TEST(MultiNodeCollective, OneRankOrNoBytesHasNoPhases) {
  EXPECT_TRUE(h100().phases(CommOp::kAllReduce, kGiB, {.ranks = 1, .nodes = 1}).empty());
  EXPECT_TRUE(h100().phases(CommOp::kAllReduce, 0, kDp64).empty());
  EXPECT_EQ(h100().collective_time(CommOp::kAllReduce, 0, kDp64), 0.0);
}

TEST(MultiNodeCollective, UnevenGroupUsesRanksPerNodeRoundedDown) {
  // 12 ranks on 8 nodes: ranks_per_node() = 1, so priced as a ring of 8 over the NICs.
  EXPECT_DOUBLE_EQ(h100().collective_time(CommOp::kAllGather, kGiB, {.ranks = 12, .nodes = 8}),
                   ring_one_pass(8, kS, kInterAlpha, kInterBeta));
}

TEST(MultiNodeCollective, RejectsMoreNodesThanRanks) {
  EXPECT_THAT([] { (void)h100().collective_time(CommOp::kAllReduce, 1, {.ranks = 2, .nodes = 4}); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("collective all-reduce: nodes: expected at most ranks (2), got 4")));
}

TEST(CommModel, AlgorithmAppliesToTheAllReducePhases) {
  // Forcing trees on one node: 2·⌈log₂ 8⌉·α + 2·S/β
  EXPECT_DOUBLE_EQ(h100(nullptr, CommAlgorithm::kTree)
                       .collective_time(CommOp::kAllReduce, kGiB, {.ranks = 8, .nodes = 1}),
                   2 * 3 * kIntraAlpha + 2 * kS / kIntraBeta);
}

TEST(CommModel, RejectsHardwareWithoutBandwidth) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  hw.inter_node.bandwidth = 0;
  EXPECT_THAT([&] { CommModel model(hw); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "invalid hardware \"dgx-h100\": inter_node.bandwidth: expected a positive")));
}

TEST(P2p, IsLatencyPlusBytesOverBandwidthOnEachFabric) {
  // α + S/β
  EXPECT_DOUBLE_EQ(h100().p2p_time(kMiB, true), kIntraAlpha + double(kMiB) / kIntraBeta);
  EXPECT_DOUBLE_EQ(h100().p2p_time(kMiB, false), kInterAlpha + double(kMiB) / kInterBeta);
  EXPECT_EQ(h100().p2p_time(0, false), 0.0);
  EXPECT_THAT([] { (void)h100().p2p_time(-5, true); },
              ThrowsMessage<InvalidConfig>(HasSubstr("p2p: bytes: expected an integer >= 0")));
}

// A measured size curve scales β by the collective's own S (Note [collective costs]): with
// fractions 0.5 at 16 MiB and 1.0 at 1 GiB, a 128 MiB ring all-reduce on 8 GPUs (halfway in
// log size: 0.75) takes 2·7·α + 2·7/8·S/(0.75·β); below the table the first fraction holds.
TEST(SizeEfficiency, ScalesTheBandwidthByTheCollectivesSize) {
  HardwareSpec hw = hardware_preset("dgx-h100");
  hw.intra_node.size_efficiency =
      SizeEfficiency{.bytes = {16.0 * kMiB, double(kGiB)}, .fraction = {0.5, 1.0}};
  const CommModel model(hw);
  const GroupPlacement node8{.ranks = 8, .nodes = 1};
  const double s = 128.0 * kMiB;
  EXPECT_DOUBLE_EQ(model.collective_time(CommOp::kAllReduce, 128 * kMiB, node8),
                   2 * 7 * kIntraAlpha + 2.0 * 7 / 8 * s / (0.75 * kIntraBeta));
  EXPECT_DOUBLE_EQ(model.p2p_time(kMiB, true), kIntraAlpha + double(kMiB) / (0.5 * kIntraBeta));
  EXPECT_DOUBLE_EQ(model.collective_time(CommOp::kAllGather, 4 * kGiB, node8),
                   7 * kIntraAlpha + 7.0 / 8 * 4 * kS / kIntraBeta);
  // The across phase has no curve: the network keeps its plateau.
  EXPECT_EQ(model.inter_node().size_efficiency, nullptr);
}

// The presets' curves are the published nccl-tests sweeps over their plateaus: A100 at 16 MiB
// 106.16 / 234.89 GB/s; H100 (the H200 sweep) at 64 MiB 346.51 / 482.26.
TEST(SizeEfficiency, PresetsCarryTheMeasuredSweeps) {
  const CommModel a100_model(hardware_preset("dgx-a100"));  // its Links point into it
  const Link a100 = a100_model.intra_node();
  EXPECT_NEAR(a100.bandwidth_at(16.0 * kMiB), 232e9 * 106.16 / 234.89, 1e3);
  EXPECT_NEAR(a100.bandwidth_at(1.0 * kMiB), 232e9 * 109.93 / 234.89, 1e3);  // held below 8 MiB
  EXPECT_DOUBLE_EQ(a100.bandwidth_at(64.0 * kGiB), 232e9);
  const CommModel h100_model(hardware_preset("dgx-h100"));
  const Link h100_link = h100_model.intra_node();
  EXPECT_NEAR(h100_link.bandwidth_at(64.0 * kMiB), 370e9 * 346.51 / 482.26, 1e3);
}

TEST(CommModel, ProfileOverridesExactlyItsEntries) {
  CostProfile profile;
  const GroupPlacement node8{.ranks = 8, .nodes = 1};
  profile.set_collective(CommOp::kAllReduce, node8, kMiB, 0.5e-3);
  profile.set_p2p(kMiB, true, 0.25e-3);
  const CommModel model = h100(&profile);

  EXPECT_EQ(model.collective_time(CommOp::kAllReduce, kMiB, node8), 0.5e-3);
  // 2 MiB on NVLink: below the crossover 32·α·β = 32 · 1e-6 · 370e9 = 1.18e7 bytes, so a tree:
  // 2·3·α + 2·S/β
  EXPECT_DOUBLE_EQ(model.collective_time(CommOp::kAllReduce, 2 * kMiB, node8),
                   6 * kIntraAlpha + 2 * 2.0 * double(kMiB) / kIntraBeta);
  // Reduce-scatter of 1 MiB: 7·α + 7/8 · S/β
  EXPECT_DOUBLE_EQ(model.collective_time(CommOp::kReduceScatter, kMiB, node8),
                   ring_one_pass(8, double(kMiB), kIntraAlpha, kIntraBeta));
  // 16 ranks on 2 nodes, not in the profile: the tree, 2·(7·α_intra + 1·α_inter) + 2·S/B
  // (B = NVLink's 370 GB/s, below the 8 NICs' 380), beats the ring's 28 intra and 2 inter steps.
  EXPECT_DOUBLE_EQ(model.collective_time(CommOp::kAllReduce, kMiB, {.ranks = 16, .nodes = 2}),
                   2 * (7 * kIntraAlpha + kInterAlpha) + 2 * double(kMiB) / kIntraBeta);

  EXPECT_EQ(model.p2p_time(kMiB, true), 0.25e-3);
  EXPECT_DOUBLE_EQ(model.p2p_time(kMiB, false), kInterAlpha + double(kMiB) / kInterBeta);
  EXPECT_DOUBLE_EQ(model.p2p_time(2 * kMiB, true), kIntraAlpha + 2.0 * double(kMiB) / kIntraBeta);
}

TEST(BusBandwidth, UsesNcclTestsFactors) {
  // algbw = 8e9 bytes / 2 s = 4e9 B/s
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kAllReduce, 8'000'000'000, 8, 2.0), 4e9 * 2 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kReduceScatter, 8'000'000'000, 8, 2.0), 4e9 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kAllGather, 8'000'000'000, 8, 2.0), 4e9 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kAllToAll, 8'000'000'000, 8, 2.0), 4e9 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kBroadcast, 8'000'000'000, 8, 2.0), 4e9);
  EXPECT_DOUBLE_EQ(bus_bandwidth(CommOp::kReduce, 8'000'000'000, 8, 2.0), 4e9);
  EXPECT_EQ(bus_bandwidth(CommOp::kReduce, 0, 8, 0.0), 0.0);
  EXPECT_THAT([] { bus_bandwidth(CommOp::kAllReduce, 1, 8, 0.0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("seconds: expected a positive number")));
}

// The reason nccl-tests defines busbw: with no latency, a ring's busbw is the link bandwidth
// whatever the rank count.
TEST(BusBandwidth, FlatRingWithoutLatencyRunsAtLinkBandwidth) {
  const Link link{.latency = 0, .bandwidth = 1e11};
  for (std::int64_t n : {2, 3, 8, 64}) {
    for (CommOp op : {CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather,
                      CommOp::kBroadcast, CommOp::kAllToAll}) {
      const double t = flat_collective_time(op, kGiB, n, link, CommAlgorithm::kRing);
      EXPECT_DOUBLE_EQ(bus_bandwidth(op, kGiB, n, t), 1e11) << to_string(op) << " n=" << n;
    }
  }
}

// Issue 17 (`metron profile --sweep`): the link fitted to measured collectives is the one whose
// ring formula gives those times back, whatever the rank count and op, and a 2-rank all-reduce
// through CommModel (CommAlgorithm::kAuto) gives them back too.
TEST(FitRingLink, RecoversTheLinkThatProducedTheTimes) {
  const Link truth{.latency = 50e-6, .bandwidth = 2e9};
  for (const CommOp op : {CommOp::kAllReduce, CommOp::kAllGather, CommOp::kBroadcast}) {
    for (const std::int64_t ranks : {2, 3, 8}) {
      std::vector<CommSample> samples;
      for (std::int64_t bytes = 4; bytes <= 64 * kMiB; bytes *= 4) {
        samples.push_back(
            {bytes, flat_collective_time(op, bytes, ranks, truth, CommAlgorithm::kRing)});
      }
      const Link fit = fit_ring_link(op, ranks, samples);
      EXPECT_NEAR(fit.latency, truth.latency, truth.latency * 1e-9) << to_string(op) << ranks;
      EXPECT_NEAR(fit.bandwidth, truth.bandwidth, truth.bandwidth * 1e-9) << to_string(op) << ranks;
    }
  }
  HardwareSpec hw = hardware_preset("dgx-h100");
  const Link fit =
      fit_ring_link(CommOp::kAllReduce, 2, {{4, 100e-6 + 4 / 2e9}, {kMiB, 100e-6 + kMiB / 2e9}});
  hw.intra_node = {.bandwidth = fit.bandwidth, .latency = fit.latency};
  EXPECT_NEAR(CommModel(hw).collective_time(CommOp::kAllReduce, kMiB, {.ranks = 2, .nodes = 1}),
              100e-6 + kMiB / 2e9, 1e-12);
}

TEST(FitRingLink, MinimisesRelativeErrorSoSmallMessagesCount) {
  // 2-rank all-reduce t = 2α + S/β with α = 50 µs, β = 2 GB/s: exact below 1 MiB, ±1 % noise
  // above. Least squares of absolute errors follows the 64 MiB noise (0.3 ms, six times 2α) and
  // gives α = 62 µs; of relative errors, α within 0.1 % of 50 µs.
  const auto t = [](std::int64_t bytes, double noise) {
    return (2 * 50e-6 + static_cast<double>(bytes) / 2e9) * noise;
  };
  const std::vector<CommSample> samples{{4, t(4, 1)},
                                        {64, t(64, 1)},
                                        {1024, t(1024, 1)},
                                        {kMiB, t(kMiB, 1.01)},
                                        {4 * kMiB, t(4 * kMiB, 0.99)},
                                        {16 * kMiB, t(16 * kMiB, 1.01)},
                                        {64 * kMiB, t(64 * kMiB, 0.99)}};
  const Link fit = fit_ring_link(CommOp::kAllReduce, 2, samples);
  EXPECT_NEAR(fit.latency, 50e-6, 0.05e-6);
  EXPECT_NEAR(fit.bandwidth, 2e9, 0.01 * 2e9);
}

TEST(FitRingLink, ANegativeLatencyIsClampedToZeroAndTheBandwidthRefitted) {
  // Times proportional to S but for a tiny deficit at the small size: the best line crosses
  // below zero at S = 0; α = 0 and β fitted through the origin instead.
  const std::vector<CommSample> samples{
      {kMiB, 0.9 * kMiB / 1e9}, {4 * kMiB, 4.0 * kMiB / 1e9}, {16 * kMiB, 16.0 * kMiB / 1e9}};
  const Link fit = fit_ring_link(CommOp::kAllReduce, 2, samples);
  EXPECT_EQ(fit.latency, 0);
  EXPECT_GT(fit.bandwidth, 1e9);
  EXPECT_LT(fit.bandwidth, 1.1e9);
}

TEST(FitRingLink, RefusesWhatCannotBeFitted) {
  EXPECT_THAT(
      [] {
        (void)fit_ring_link(CommOp::kAllReduce, 2, {{4, 1e-4}, {4, 2e-4}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("link fit of all-reduce: samples: expected at least 2 distinct "
                    "sizes, got 1")));
  EXPECT_THAT(
      [] {
        (void)fit_ring_link(CommOp::kAllReduce, 1, {{4, 1e-4}, {8, 2e-4}});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("ranks: expected at least 2, got 1")));
  EXPECT_THAT(
      [] {
        (void)fit_ring_link(CommOp::kAllReduce, 2, {{4, 0.0}, {8, 2e-4}});
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("samples[0].seconds: expected a positive number, got 0")));
  // Larger messages faster than smaller ones: no positive bandwidth.
  EXPECT_THAT(
      [] {
        (void)fit_ring_link(CommOp::kAllReduce, 2, {{4, 1e-3}, {kMiB, 1e-4}});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("the samples give no positive bandwidth")));
}

}  // namespace
}  // namespace metron::models
