#pragma once
// Data parallelism on a lowered pipeline: replicas of the pipeline side by side, and the gradient
// all-reduce that joins them. Note [data-parallel replicas]:
//
//   replicate_data_parallel(g, d) lays d copies of a one-pipeline graph side by side: replica k's
//   rank r is rank k·pp + r (pp = g's ranks), with RankCoords.dp = k; streams, buffers, groups
//   and tasks are copied in the same order, so replica 0 keeps every id of g.
//
//   add_gradient_all_reduce(g, pp, bytes) joins the replicas: pipeline rank r's replicas form the
//   group "dp<r>", and every rank all-reduces its gradients (bytes[r]) once, on a "dp-grad"
//   stream, after its last backward compute task and before its optimizer step (which waits for
//   it). This is Megatron's DDP without overlap_grad_reduce (finalize_model_grads reduces after
//   the whole backward) with all buckets as one collective — the baseline the sync policies of
//   docs/SYNC_POLICIES.md refine. With one replica the groups have one member: the simulator's
//   symmetric mode, in which the collective's duration is charged for the real group.

#include <cstdint>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"

namespace metron::lowering {

/// `replicas` copies of `pipeline` (Note [data-parallel replicas]); replicas = 1 returns it as is.
/// Throws InvalidConfig for replicas < 1.
ir::Graph replicate_data_parallel(const ir::Graph& pipeline, std::int32_t replicas);

/// The gradient all-reduce of every rank (Note [data-parallel replicas]). `grad_bytes` has one
/// entry per pipeline rank; ranks without a backward (forward-only) get none. Throws
/// InvalidConfig when the graph's ranks are not a multiple of `pipeline_ranks` or grad_bytes has
/// the wrong length.
ir::Graph add_gradient_all_reduce(const ir::Graph& graph, std::int32_t pipeline_ranks,
                                  const std::vector<std::int64_t>& grad_bytes,
                                  ir::DType dtype = ir::DType::kFp32);
/// The same on a builder, before validation (see lowering::lower_unvalidated).
void add_gradient_all_reduce(ir::GraphBuilder& builder, std::int32_t pipeline_ranks,
                             const std::vector<std::int64_t>& grad_bytes,
                             ir::DType dtype = ir::DType::kFp32);

}  // namespace metron::lowering
