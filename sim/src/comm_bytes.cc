#include "metron/sim/comm_bytes.h"

#include <cmath>
#include <variant>

#include "metron/models/comm_cost.h"

namespace metron::sim {

models::CommOp comm_op(ir::CollectiveOp op) noexcept {
  switch (op) {
    case ir::CollectiveOp::kAllReduce:
      return models::CommOp::kAllReduce;
    case ir::CollectiveOp::kReduceScatter:
      return models::CommOp::kReduceScatter;
    case ir::CollectiveOp::kAllGather:
      return models::CommOp::kAllGather;
    case ir::CollectiveOp::kReduce:
      return models::CommOp::kReduce;
    case ir::CollectiveOp::kBroadcast:
      return models::CommOp::kBroadcast;
    case ir::CollectiveOp::kAllToAll:
      return models::CommOp::kAllToAll;
  }
  return models::CommOp::kAllReduce;
}

std::int64_t wire_bytes(const ir::Graph& graph, std::int32_t instance, std::int64_t group_ranks) {
  const ir::CommFacts& facts = graph.flat_index().instances[static_cast<std::size_t>(instance)];
  const ir::TaskId member =
      graph.flat_index().comm_members[static_cast<std::size_t>(facts.members_begin)];
  const auto* collective = std::get_if<ir::Collective>(&graph.task(member).op);
  if (collective == nullptr) return facts.bytes;  // a send–recv pair: the send's bytes
  const std::int64_t ranks =
      group_ranks > 0 ? group_ranks : facts.members_end - facts.members_begin;
  return std::llround(models::wire_bytes(comm_op(collective->op), facts.bytes, ranks));
}

}  // namespace metron::sim
