// Which nodes the ranks of each communication group land on (Note [group placement]).

#include "metron/models/group_placement.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "metron/base/error.h"

namespace metron::models {
namespace {

// Note [uneven placement]:
// Megatron's order gives every kind of group the same shape: the groups are
//   { a + block·m + stride·i : i < size },  a < stride,  m < blocks,  block = stride·size.
// When gpus_per_node is a multiple of block, or block of gpus_per_node, every group fills its
// nodes alike and the group spans ceil(size / min(size, gpus_per_node / stride)) nodes. Otherwise
// some groups straddle a node boundary that others do not: with stride 3 on 8-GPU nodes the pair
// {0, 3} sits in node 0 but {6, 9} spans nodes 0 and 1. A collective runs at the pace of its
// slowest member group, so `nodes` is the most nodes any group of the kind touches (the groups
// that exist: `blocks` bounds m). ranks_per_node() then rounds ranks / nodes down, which makes
// the comm model count fewer NICs per node for the ring across nodes, so the rounding errs on the
// slow side.
GroupPlacement place(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node,
                     std::optional<std::int64_t> blocks) {
  // Members at least a node apart never share one.
  if (stride >= gpus_per_node) return {.ranks = size, .nodes = size};
  // Members closer than a node fill contiguous nodes, so a group spans
  // node(last) − node(first) + 1 of them, which depends only on first mod gpus_per_node. That
  // residue repeats every gpus_per_node / gcd(block, gpus_per_node) blocks.
  const std::int64_t block_mod = (stride * (size % gpus_per_node)) % gpus_per_node;
  const std::int64_t period = gpus_per_node / std::gcd(block_mod, gpus_per_node);
  const std::int64_t span = (size - 1) * stride;
  std::int64_t nodes = 1;
  for (std::int64_t m = 0; m < std::min(period, blocks.value_or(period)); ++m) {
    for (std::int64_t a = 0; a < stride; ++a) {
      const std::int64_t first = (a + block_mod * m) % gpus_per_node;
      nodes = std::max(nodes, (first + span) / gpus_per_node + 1);
    }
  }
  return {.ranks = size, .nodes = nodes};
}

void require_positive(const std::string& where, const std::string& key, std::int64_t value) {
  if (value <= 0) {
    throw InvalidConfig(where + ": " + key + ": expected a positive integer, got " +
                        std::to_string(value));
  }
}

}  // namespace

GroupPlacement group_placement(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node) {
  const std::string where = "group placement";
  require_positive(where, "size", size);
  require_positive(where, "stride", stride);
  require_positive(where, "gpus_per_node", gpus_per_node);
  return place(size, stride, gpus_per_node, std::nullopt);
}

ParallelGroups parallel_groups(const ParallelSpec& spec, const HardwareSpec& hardware) {
  const std::string where = "parallel groups";
  require_positive(where, "tp", spec.tp);
  require_positive(where, "pp", spec.pp);
  require_positive(where, "dp", spec.dp);
  require_positive(where, "cp", spec.cp);
  require_positive(where, "ep", spec.ep);
  require_positive(where, "gpus_per_node", hardware.gpus_per_node);
  const std::int64_t dp_cp = spec.dp * spec.cp;
  if (dp_cp % spec.ep != 0) {
    throw InvalidConfig(where + ": dp·cp (" + std::to_string(dp_cp) +
                        ") must be divisible by ep (" + std::to_string(spec.ep) + ")");
  }
  const std::int64_t g = hardware.gpus_per_node;
  const std::int64_t world = spec.gpus();
  ParallelGroups groups;
  groups.tp = place(spec.tp, 1, g, world / spec.tp);
  groups.cp = place(spec.cp, spec.tp, g, world / (spec.tp * spec.cp));
  groups.ep = place(spec.ep, spec.tp, g, world / (spec.tp * spec.ep));
  groups.dp = place(dp_cp, spec.tp, g, spec.pp);
  groups.expert_dp = place(dp_cp / spec.ep, spec.tp * spec.ep, g, spec.pp);
  groups.pp = place(spec.pp, spec.tp * dp_cp, g, 1);
  // The pairs of first and last pipeline ranks {a, a + stride}, a < tp·dp·cp: whether one straddles
  // two nodes depends on a mod g only.
  if (spec.pp > 1) {
    const std::int64_t stride = spec.tp * dp_cp * (spec.pp - 1);
    std::int64_t nodes = 1;
    for (std::int64_t a = 0; a < std::min(spec.tp * dp_cp, g); ++a) {
      nodes = std::max(nodes, std::min<std::int64_t>(2, (a + stride) / g + 1));
    }
    groups.pp_ends = {.ranks = 2, .nodes = nodes};
  }
  // Pipeline ranks are contiguous when their stride is below a node, so every adjacent pair
  // shares a node exactly when the whole pipeline fits in one. A single crossing pair would set
  // the pace of the steady state, so "some pairs share" counts as not sharing; with pp = 1 there
  // is no pair and no p2p to keep inside a node.
  groups.pp_neighbours_share_node = spec.pp > 1 && groups.pp.nodes == 1;
  return groups;
}

}  // namespace metron::models
