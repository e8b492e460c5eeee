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
//   messages; a hierarchical phase looks up its own S):
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
//   Hierarchical, a group of n = r·N ranks on N > 1 nodes with r per node (group_placement.h):
//     all-reduce      reduce-scatter inside nodes (r, S) + all-reduce across (N, S/r)
//                     + all-gather inside nodes (r, S)
//     reduce-scatter  reduce-scatter inside (r, S) + reduce-scatter across (N, S/r)
//     all-gather      all-gather across (N, S/r) + all-gather inside (r, S)
//     broadcast       across (N, S) + inside (r, S);  reduce: inside, then across
//     all-to-all      the intra-node share (r−1)/n·S inside + the (n−r)/n·S leaving the node
//                     across, as two phases
//   with r = 1 only the across phase remains. The total is the sum of the phases.
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

/// One phase of a hierarchical collective.
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

  /// The phases a collective decomposes into for `group` (one phase on one node or with one
  /// rank per node; none for a one-rank group or S = 0).
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
