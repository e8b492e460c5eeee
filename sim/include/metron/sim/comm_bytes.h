#pragma once
// What a communication task puts on the wire, as both interpreters report it (RankMetrics):
// nccl-tests' convention, so that an all-reduce and the reduce-scatter + all-gather that replace
// it report the same traffic (Note [collective costs] in models/comm_cost.h).

#include <cstdint>

#include "metron/ir/graph.h"
#include "metron/models/cost_kinds.h"

namespace metron::sim {

/// The cost models' name for an IR collective op.
models::CommOp comm_op(ir::CollectiveOp op) noexcept;

/// Bytes one member of `instance` sends over its link: a collective's buffer times nccl-tests'
/// bus factor for its group size (models::wire_bytes: 2(n−1)/n for all-reduce, (n−1)/n for
/// reduce-scatter, all-gather and all-to-all, 1 for broadcast and reduce, 0 on one rank); a
/// send's bytes for a transfer. `group_ranks` > 0 replaces the group's member count in the graph
/// (a symmetric graph holds one member for a whole group: SimOptions::group_sizes).
std::int64_t wire_bytes(const ir::Graph& graph, std::int32_t instance,
                        std::int64_t group_ranks = 0);

}  // namespace metron::sim
