#pragma once
// The communication cost model: alpha–beta times of collectives and point-to-point transfers on
// the two fabrics of a HardwareSpec. Note [collective costs]:
//
//   Bytes follow nccl-tests: S is the whole buffer — all-reduce S in and out per rank;
//   reduce-scatter S in, S/n out; all-gather S/n in, S out; broadcast and reduce S; all-to-all S
//   sent (and received) per rank, S/n to each peer; p2p S.
//
//   One level, n ranks, link (α latency, β bandwidth per GPU one way, at the collective's size S
//   when the fabric has a measured size_efficiency: NCCL reaches its plateau only on large
//   messages):
//     ring  all-reduce      2(n−1)·α + 2(n−1)/n · S/β
//           reduce-scatter   (n−1)·α +  (n−1)/n · S/β     (all-gather alike)
//           broadcast/reduce (n−1)·α +            S/β     (pipelined chain)
//           all-to-all       (n−1)·α +  (n−1)/n · S/β
//     tree  all-reduce      2⌈log₂n⌉·α + 2·S/β           (NCCL's double binary tree: reduce up,
//                                                        broadcast down, each half on one tree)
//           NCCL has trees for all-reduce only; every other op runs as a ring whatever the
//           algorithm asked for.
//     auto  all-reduce takes the faster of ring and tree, as NCCL's tuner picks the predicted
//           fastest.
//     p2p   α + S/β(S); 0 for S = 0 on any level; any op on one rank costs 0.
//
//   Several nodes, a group of n = r·N ranks on N > 1 nodes with r per node (group_placement.h),
//   as NCCL runs it: one flat ring through all n ranks, pipelined, not a sequence of per-level
//   collectives. Its latency counts every step at the latency of the link it crosses, as NCCL's
//   tuner does (src/graph/tuning.cc, ncclTopoTuneModel: (nsteps − nInterSteps)·intraLat +
//   nInterSteps·interLat, nInterSteps = 2(N−1) for all-reduce and N−1 otherwise). Its rate is
//   the slower of the two fabrics, the node's r NICs (one per GPU) carrying the r rings that
//   cross it: B = min(β_intra(S), r·β_inter(S)); so a DGX A100's multi-node all-reduce runs at
//   8 × 24 = 192 GB/s busbw and a DGX H100's at 8 × 47.5 = 380, the plateaus nccl-tests
//   measures (NVIDIA GTC24 S62129), where the earlier sum of intra and inter phases reached 126
//   (4 A100 nodes) and 211 (8 H100 nodes).
//     ring all-reduce      2(n−1−(N−1))·α_intra + 2(N−1)·α_inter + 2(n−1)/n · S/B
//          reduce-scatter  (n−N)·α_intra + (N−1)·α_inter + (n−1)/n · S/B   (all-gather alike)
//          broadcast/reduce (n−N)·α_intra + (N−1)·α_inter + S/B
//     tree all-reduce      2((r−1)·α_intra + ⌈log₂N⌉·α_inter) + 2·S/B   (NCCL's tree latency:
//                          a chain inside each node, a double binary tree across)
//     all-to-all (no ring: every rank sends to every peer) the intra-node share (r−1)/n·S
//                          inside + the (n−r)/n·S leaving the node across, as two phases
//   With r = 1 the one-level formulas run on the inter link (B = β_inter(S)).
//
// Note [nccl protocols]: where the hardware names its hosts' CPU vendor
// (inter_node.nccl_host_cpu, as the presets do), a ring or tree over several nodes is priced as
// NCCL's own tuner prices it (src/graph/tuning.cc, ncclTopoTuneModel / ncclTopoGetAlgoTime; its
// default constants, in models/src/nccl_protocols.cc): for each protocol, LL, LL128 and Simple,
// a latency of base + steps × per-step latency, and a rate from B, and NCCL's choice, the fastest.
//     ring step inside a node  NVLink's 0.6 / 1.9 / 3.4 us, at least the host's network post
//                              overhead (1 us Intel, 2 us AMD; Simple 3 times that)
//     ring step across nodes   2.7 / 4.0 / 14 us (5.0 / 8.5 / 14, the tree's, with r = 1)
//     base                     6.6 / 14 / 8.4 us (ring), 6.8 / 14 / 8.4 (tree); a Simple ring
//                              all-reduce's latency × 1.4 ("plateau effect")
//     rate                     Simple B, LL128 0.92·B, LL min(0.5·B, 19–39 GB/s by vendor and
//                              node count); trees 0.92·B (LL 1/3.8 of it, LL128 120/128)
//     tree all-reduce          base + 2((r−1)·NVLink tree step + ⌊log₂N⌋·net tree step)
//                              + S / (rate / 2)
// Small messages thus take LL's short steps, large ones Simple's full rate, and a ring over many
// ranks pays for every one of its steps: an all-gather over 1,536 A100s on 192 nodes costs about
// 3.2 ms before it moves a byte (LL; 1344 NVLink steps at AMD's 2 us, 191 network steps at
// 2.7 us). Not modelled: NCCL's per-channel bandwidth caps (the channel count is the topology
// search's), its tree correction factors for medium sizes, NVLS and CollNet.
//
//   Bus bandwidth (nccl-tests' busbw): algbw = S / t times 2(n−1)/n for all-reduce, (n−1)/n for
//   reduce-scatter, all-gather and all-to-all, 1 for broadcast, reduce and p2p.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/models/cost_kinds.h"
#include "metron/models/cost_profile.h"
#include "metron/models/group_placement.h"
#include "metron/models/hardware_spec.h"

namespace metron::models {

/// How a collective moves its data (Note [collective costs]).
enum class CommAlgorithm { kAuto, kRing, kTree };

/// "auto", "ring", "tree".
std::string_view to_string(CommAlgorithm algorithm) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<CommAlgorithm> parse_comm_algorithm(std::string_view name) noexcept;

/// One level of the fabric.
struct Link {
  double latency = 0;    ///< α, seconds
  double bandwidth = 0;  ///< β, bytes/s per GPU one way (the large-message plateau)
  /// The fraction of β a collective of S bytes reaches (Note [hardware JSON]); not owned, null:
  /// β at every size.
  const SizeEfficiency* size_efficiency = nullptr;

  /// β for a collective of `bytes` (nccl-tests' S): the plateau times the size's fraction.
  [[nodiscard]] double bandwidth_at(double bytes) const {
    return size_efficiency == nullptr ? bandwidth : bandwidth * size_efficiency->at(bytes);
  }
};

/// A collective over `ranks` ranks on one link (Note [collective costs]); seconds.
double flat_collective_time(CommOp op, std::int64_t bytes, std::int64_t ranks, const Link& link,
                            CommAlgorithm algorithm = CommAlgorithm::kAuto);

/// One measured collective: `bytes` (nccl-tests convention) took `seconds`.
struct CommSample {
  std::int64_t bytes = 0;
  double seconds = 0;
};

/// The link whose ring time for `op` on `ranks` ranks (Note [collective costs]: t = a·α + b·S/β
/// with the ring's a and b) fits `samples` best relative to each time: least squares of
/// (t − t_i) / t_i, so that 4-byte and 64 MiB messages count alike. When the best fit has α < 0
/// (latency lost in noise), α is 0 and β is refitted alone. For an all-reduce on 2 ranks the
/// ring is also what CommAlgorithm::kAuto prices (the tree's 2α + 2S/β is never faster), so the
/// fitted link reproduces the samples through CommModel::collective_time. Throws InvalidConfig
/// for ranks < 2, fewer than two distinct sizes, a negative size or a time that is not positive
/// and finite, or samples that give no positive bandwidth.
/// @code
///   Link l = fit_ring_link(CommOp::kAllReduce, 2, {{4, 105e-6}, {1 << 26, 37e-3}});
/// @endcode
Link fit_ring_link(CommOp op, std::int64_t ranks, const std::vector<CommSample>& samples);

/// One phase of a collective: the whole of it, except an all-to-all over several nodes (two).
struct CommPhase {
  CommOp op = CommOp::kAllReduce;
  std::int64_t bytes = 0;  ///< in the nccl-tests convention of `op`
  std::int64_t ranks = 1;
  bool inter_node = false;  ///< across nodes (else inside one)
  double seconds = 0;
};

/// Times collectives and transfers on `hardware`, taking measured entries from a profile first.
class CommModel {
 public:
  /// `profile`, when given, must outlive the model.
  explicit CommModel(HardwareSpec hardware, const CostProfile* profile = nullptr,
                     CommAlgorithm algorithm = CommAlgorithm::kAuto);

  /// The phases a collective decomposes into for `group` (Note [collective costs]: one, except
  /// an all-to-all with several ranks on each of several nodes; none for a one-rank group or
  /// S = 0).
  [[nodiscard]] std::vector<CommPhase> phases(CommOp op, std::int64_t bytes,
                                              GroupPlacement group) const;
  /// Seconds: the profile's entry, else the sum of phases().
  [[nodiscard]] double collective_time(CommOp op, std::int64_t bytes, GroupPlacement group) const;
  /// Seconds for one send/recv pair: the profile's entry, else α + S/β of the fabric between.
  [[nodiscard]] double p2p_time(std::int64_t bytes, bool same_node) const;

  /// The fabrics as Links; their size_efficiency points into this model, so a Link is valid
  /// while the model lives.
  [[nodiscard]] Link intra_node() const;
  [[nodiscard]] Link inter_node() const;
  [[nodiscard]] const HardwareSpec& hardware() const { return hardware_; }

 private:
  HardwareSpec hardware_;
  const CostProfile* profile_;
  CommAlgorithm algorithm_;
};

/// nccl-tests' bus bandwidth (bytes/s) of a collective of `bytes` on `ranks` ranks that took
/// `seconds` (Note [collective costs]).
double bus_bandwidth(CommOp op, std::int64_t bytes, std::int64_t ranks, double seconds);

/// Bytes each rank sends over its link for a ring collective of `bytes` (nccl-tests convention)
/// on `ranks` ranks: S times bus_bandwidth's factor — 2(n−1)/n for all-reduce, (n−1)/n for
/// reduce-scatter, all-gather and all-to-all, 1 for broadcast and reduce — and 0 on one rank.
/// So wire_bytes(all-reduce) = wire_bytes(reduce-scatter) + wire_bytes(all-gather). Throws
/// InvalidConfig for bytes < 0 or ranks < 1.
/// @code
///   double sent = wire_bytes(CommOp::kAllReduce, 1 << 30, 8);  // 1.75 GiB
/// @endcode
double wire_bytes(CommOp op, std::int64_t bytes, std::int64_t ranks);

}  // namespace metron::models
