#pragma once
// Where the ranks of a communication group sit: how many nodes the group spans. Ranks are laid out
// in Megatron's default order (tp fastest, then cp, then dp, then pp; see parallel_spec.h), so a
// group of `size` ranks `stride` apart fills a node with gpus_per_node / stride of its ranks when
// stride < gpus_per_node. Note [group placement]:
//
//   tp   stride 1           a TP group of 8 on 8-GPU nodes sits in one node
//   cp   stride tp
//   ep   stride tp          the experts' ranks are carved from dp·cp (Megatron's expert order)
//   dp   stride tp          the dp·cp ranks that reduce dense gradients; DP of 64 with tp = 8
//                           spans 64 nodes, one rank per node
//   expert_dp  stride tp·ep the dp·cp / ep ranks that reduce one expert's gradients
//   pp   stride tp·cp·dp    neighbours share a node only when tp·cp·dp < gpus_per_node
//
// When the groups of a kind do not all fill nodes alike (stride 3 on 8-GPU nodes: {0, 3} sits in
// one node, {6, 9} straddles two), `nodes` is the most nodes any one of them touches, and
// ranks_per_node() rounds down: the slow side (Note [uneven placement] in group_placement.cc).

#include <cstdint>

#include "metron/models/hardware_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// A group of `ranks` ranks spread evenly over `nodes` nodes (ranks / nodes per node).
struct GroupPlacement {
  std::int64_t ranks = 1;
  std::int64_t nodes = 1;

  [[nodiscard]] std::int64_t ranks_per_node() const { return ranks / nodes; }

  friend bool operator==(const GroupPlacement&, const GroupPlacement&) = default;
};

/// The placement of a group of `size` ranks, `stride` apart, on nodes of `gpus_per_node` GPUs:
/// the worst over all groups of that shape in an unbounded layout. Throws InvalidConfig for a
/// non-positive argument.
GroupPlacement group_placement(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node);

/// The placement of each kind of group of a configuration (Note [group placement]).
struct ParallelGroups {
  GroupPlacement tp;
  GroupPlacement cp;
  GroupPlacement ep;
  GroupPlacement dp;         ///< the gradient-reduction group of dense parameters: dp · cp ranks
  GroupPlacement expert_dp;  ///< the gradient-reduction group of expert parameters: dp·cp / ep
  GroupPlacement pp;
  /// Pipeline ranks 0 and pp − 1 of one replica (one rank for pp = 1): Megatron's embedding group,
  /// which sums tied embeddings' gradients, and the farthest of DualPipe's pairs r and pp − 1 − r,
  /// which sum the gradients of their stage copies and are charged as it.
  GroupPlacement pp_ends;
  /// Every p2p between adjacent stages stays in a node (the whole pipeline fits in one node);
  /// false for pp = 1, which has no such p2p.
  bool pp_neighbours_share_node = false;
};

/// Counts only the groups of the configuration (tp 3 alone fits in one 8-GPU node). Throws
/// InvalidConfig for non-positive sizes or dp·cp not divisible by ep.
ParallelGroups parallel_groups(const ParallelSpec& spec, const HardwareSpec& hardware);

}  // namespace metron::models
