#pragma once
// Copies of a graph laid side by side, the one mechanism behind data-parallel replicas
// (data_parallel.h) and tensor-parallel peers (tensor_parallel.h). Copy k's rank r is rank
// k·N + r (N = the graph's ranks); its streams, buffers, tasks and issue orders are copied in the
// same order with every id shifted, so copy 0 keeps every id of the input. A group is either
// copied (each copy talks within itself) or shared: one group, at its place in copy 0, whose
// members are its members in every copy, which every copy's collectives use.

#include <cstdint>
#include <functional>
#include <string>

#include "metron/ir/graph.h"

namespace metron::lowering::detail {

struct CopyPlan {
  std::int32_t copies = 1;
  /// Marks rank coordinates as copy k's (RankCoords.dp = k, say).
  std::function<void(ir::RankCoords&, std::int32_t k)> set_coords;
  /// Whether one group spans every copy instead of each copy having its own.
  std::function<bool(const ir::Group&)> shared = [](const ir::Group&) { return false; };
  /// The name of copy k's own copy of a group (k >= 0; names must stay distinct).
  std::function<std::string(const ir::Group&, std::int32_t k)> name;
};

/// The copies of `in` that `plan` describes, unvalidated.
ir::GraphData side_by_side(const ir::GraphData& in, const CopyPlan& plan);

}  // namespace metron::lowering::detail
