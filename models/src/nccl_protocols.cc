// NCCL's tuner (src/graph/tuning.cc of NVIDIA/nccl, ncclTopoTuneModel and ncclTopoGetAlgoTime,
// master of 2026 = NCCL 2.30) for rings and trees over several nodes: its default constants, in
// microseconds and GB/s as NCCL writes them, and its formulas (Note [nccl protocols]).

#include "nccl_protocols.h"

#include <algorithm>
#include <array>
#include <limits>

namespace metron::models::detail {
namespace {

enum Protocol { kLl, kLl128, kSimple };
constexpr std::array<Protocol, 3> kProtocols{kLl, kLl128, kSimple};

// baseLatencies, us: {LL, LL128, Simple}.
constexpr std::array<double, 3> kRingBase{6.6, 14.0, 8.4};
constexpr std::array<double, 3> kTreeBase{6.8, 14.0, 8.4};
// hwLatencies, us per step: NVLink ring and tree; the network's ring and tree (a ring with one
// rank per node takes the tree's: "with ppn=1 latencies are fully exposed").
constexpr std::array<double, 3> kNvlinkRing{0.6, 1.9, 3.4};
constexpr std::array<double, 3> kNvlinkTree{0.6, 1.25, 4.0};
constexpr std::array<double, 3> kNetRing{2.7, 4.0, 14.0};
constexpr std::array<double, 3> kNetTree{5.0, 8.5, 14.0};
// getNetOverhead, us: what posting a network send costs the host, by CPU vendor; Simple pays it
// three times. A ring step inside a node takes at least that once the ring leaves the node.
constexpr double kIntelNetOverhead = 1.0;
constexpr double kAmdNetOverhead = 2.0;
// llMaxBws, GB/s, multi-node rows (index by CPU vendor, then 2 nodes or more).
constexpr double kIntelLlMax2 = 39.0, kIntelLlMaxMore = 20.4;
constexpr double kAmdLlMax2 = 22.5, kAmdLlMaxMore = 19.0;
// "Various model refinements": LL moves half the bytes per line; LL128 120 of 128; trees lose
// 8 % to their pipeline, and their LL 1/3.8.
constexpr double kLlShare = 0.5;
constexpr double kLl128Share = 0.92;
constexpr double kTreeShare = 0.92;
constexpr double kTreeLlShare = 1.0 / 3.8;
constexpr double kTreeLl128Share = 120.0 / 128.0;
// A multi-node Simple ring all-reduce's latency grows by this on sm80 and later ("plateau
// effect of ring", ncclTopoGetAlgoTime).
constexpr double kRingSimplePlateau = 1.4;
constexpr double kMicro = 1e-6;
constexpr double kGiga = 1e9;

double ll_max(const NcclGroup& g) {
  if (g.amd_host) return (g.nodes <= 2 ? kAmdLlMax2 : kAmdLlMaxMore) * kGiga;
  return (g.nodes <= 2 ? kIntelLlMax2 : kIntelLlMaxMore) * kGiga;
}

// NCCL's log2i: the floor of log2.
double floor_log2(std::int64_t n) {
  double depth = 0;
  for (std::int64_t v = n; v > 1; v /= 2) ++depth;
  return depth;
}

double ring_seconds(CommOp op, double bytes, const NcclGroup& g, Protocol p) {
  const RingSteps ring = ring_steps(op, g.ranks_per_node, g.nodes);
  const double overhead =
      (g.amd_host ? kAmdNetOverhead : kIntelNetOverhead) * (p == kSimple ? 3 : 1);
  const double intra = std::max(kNvlinkRing[p], overhead);
  const double inter = g.ranks_per_node == 1 ? kNetTree[p] : kNetRing[p];
  double latency =
      kRingBase[p] + (ring.steps - ring.inter_steps) * intra + ring.inter_steps * inter;
  if (op == CommOp::kAllReduce && p == kSimple) latency *= kRingSimplePlateau;
  double rate = g.rate;
  if (p == kLl) rate = std::min(ll_max(g), kLlShare * g.rate);
  if (p == kLl128) rate = kLl128Share * g.rate;
  return latency * kMicro + ring.byte_share * bytes / rate;
}

double tree_seconds(double bytes, const NcclGroup& g, Protocol p) {
  const double latency = kTreeBase[p] + 2 * (double(g.ranks_per_node - 1) * kNvlinkTree[p] +
                                             floor_log2(g.nodes) * kNetTree[p]);
  const double bus = kTreeShare * g.rate;
  double rate = bus;
  if (p == kLl) rate = std::min(bus * kTreeLlShare, ll_max(g));
  if (p == kLl128) rate = bus * kTreeLl128Share;
  // A tree's algorithm bandwidth is half its bus bandwidth (reduce up, broadcast down).
  return latency * kMicro + bytes / (0.5 * rate);
}

}  // namespace

RingSteps ring_steps(CommOp op, std::int64_t ranks_per_node, std::int64_t nodes) {
  const double n = double(ranks_per_node) * double(nodes);
  const double passes = op == CommOp::kAllReduce ? 2 : 1;
  // A broadcast or reduce is a pipelined chain: every rank moves the whole buffer once.
  const bool chain = op == CommOp::kBroadcast || op == CommOp::kReduce;
  return {.steps = passes * (n - 1),
          .inter_steps = passes * double(nodes - 1),
          .byte_share = chain ? 1 : passes * (n - 1) / n};
}

double nccl_ring_time(CommOp op, double bytes, const NcclGroup& group) {
  double best = std::numeric_limits<double>::infinity();
  for (Protocol p : kProtocols) best = std::min(best, ring_seconds(op, bytes, group, p));
  return best;
}

double nccl_tree_all_reduce_time(double bytes, const NcclGroup& group) {
  double best = std::numeric_limits<double>::infinity();
  for (Protocol p : kProtocols) best = std::min(best, tree_seconds(bytes, group, p));
  return best;
}

}  // namespace metron::models::detail
