#pragma once
// Tensor-parallel peers in the graph. Note [tensor-parallel peers]:
//
//   A step's graph normally holds one rank per pipeline rank (and data-parallel replica): its
//   tensor-parallel peers run the same tasks at the same times, so the simulator keeps one and
//   charges its "tp<r>" collectives for the real group (comm_groups.h). replicate_tensor_parallel
//   (g, t) gives each peer a rank of its own, for simulating, tracing and executing every GPU:
//   t copies of the whole graph side by side (copy k's rank r is rank k·N + r, N = g's ranks,
//   RankCoords.tp = k; streams, buffers, tasks and issue orders copied in order, so copy 0 keeps
//   every id of g). Each "tp<r>" group becomes one group of the t peers of rank r, which every
//   copy's tensor-parallel collectives use; every other group (data-parallel, context, expert,
//   distributed-optimizer, ...) is copied per peer, since each tensor-parallel rank has its own,
//   and renamed <kind><index + k·N> so that names stay distinct and keep their kind. Sends and
//   receives stay within a copy: tensor-parallel rank k of one stage talks to rank k of the next,
//   as Megatron-LM's pipeline groups pair them.

#include <cstdint>

#include "metron/ir/graph.h"

namespace metron::lowering {

/// `tp` peers of every rank of `graph` (Note [tensor-parallel peers]); tp = 1 returns it as is.
/// Throws InvalidConfig for tp < 1 or a graph whose ranks already have a tensor-parallel index.
ir::Graph replicate_tensor_parallel(const ir::Graph& graph, std::int32_t tp);

}  // namespace metron::lowering
