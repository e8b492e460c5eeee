// Note [tensor-parallel peers] (tensor_parallel.h).

#include "metron/lowering/tensor_parallel.h"

#include <optional>
#include <string>

#include "graph_copies.h"
#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/comm_groups.h"

namespace metron::lowering {
namespace {

/// The index a pass's group name carries ("dp3" → 3), or nullopt for other names.
std::optional<std::int32_t> group_index(const std::string& name, GroupKind kind) {
  const std::string_view prefix = to_string(kind);
  try {
    return std::stoi(name.substr(prefix.size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

ir::Graph replicate_tensor_parallel(const ir::Graph& graph, std::int32_t tp) {
  if (tp < 1) {
    throw InvalidConfig("tensor-parallel peers: expected a positive count, got " +
                        std::to_string(tp));
  }
  if (tp == 1) return graph;
  for (const ir::Rank& rank : graph.data().ranks) {
    if (rank.coords.tp != 0) {
      throw InvalidConfig("tensor-parallel peers: the graph already holds tensor-parallel rank " +
                          std::to_string(rank.coords.tp) +
                          "; expected one rank per tensor-parallel group");
    }
  }
  const std::int32_t ranks = graph.num_ranks();
  const detail::CopyPlan plan{
      .copies = tp,
      .set_coords = [](ir::RankCoords& c, std::int32_t k) { c.tp = k; },
      .shared = [](const ir::Group& g) { return group_kind(g.name) == GroupKind::kTensor; },
      .name = [ranks](const ir::Group& g, std::int32_t k) -> std::string {
        if (k == 0) return g.name;
        const std::optional<GroupKind> kind = group_kind(g.name);
        const std::optional<std::int32_t> index = kind ? group_index(g.name, *kind) : std::nullopt;
        if (kind && index) return group_name(*kind, *index + k * ranks);
        return g.name + ".tp" + std::to_string(k);  // a group no pass makes: any distinct name
      }};
  return ir::GraphBuilder(detail::side_by_side(graph.data(), plan)).build();
}

}  // namespace metron::lowering
