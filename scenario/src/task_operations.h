#pragma once
// What each compute task of a step computes (ir::Compute::operations), so that an executor runs
// the operations the cost model prices. Note [task operations]:
//
//   From the same op inventory that prices the task (models::layer_ops, embedding_ops, head_ops,
//   optimizer_step_ops), composed as Note [stage costs from the model] composes the stage times:
//     F  embedding F (the task holds the model's first layer), then layer F × its layers, then
//        head F (it holds the last layer);
//     I  head I (last layer), then per layer the recompute ops (Recompute's, which run just
//        before the layer's backward) and layer I, × its layers;
//     W  head W (last layer), layer W × its layers, embedding W (first layer);
//     B  I's ops, then W's;
//   an OVERLAP_F_B unit lists its forward's ops, then its backward part's. Layer ops appear once
//   with count = the task's layers; "first" and "last" layer are taken modulo the model's layers
//   (DualPipe's second direction numbers its stages past the model's end). An optimizer step
//   lists the Adam ops over the rank's (shard of the) parameters, scaled to the chunk's share of
//   the rank's layers as its duration is. Tasks without a layer range (explicit costs, hand-made
//   graphs), recompute tasks (priced at 0) and host-side work list nothing. A fused attention op,
//   which neither backend has a kernel for, is listed as its matrix products (batched GEMMs of
//   the same FLOPs); the simulator prices the fused kernel itself.

#include <cstdint>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/models/compute_cost.h"
#include "metron/models/layer_shape.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::scenario::detail {

struct OperationContext {
  const models::ModelSpec& model;
  const models::ParallelSpec& parallel;
  models::StatePolicy policy;
  /// The layers each pipeline rank's stages hold together (its chunks, DualPipe's copies
  /// included): what a chunk's optimizer step takes its share of.
  std::vector<std::int64_t> rank_layers;
};

/// Some of the cost model's ops, each run `count` times in a row (a layer's ops × its layers).
struct CountedOps {
  std::vector<models::OpCost> ops;
  std::int64_t count = 1;
};

/// The cost model's ops of `phase` over the model layers `layers`, in execution order, with the
/// embedding where the range holds the model's first layer and the head where it holds its last
/// (Note [task operations]); what add_task_operations lists and what a piece of a stage's task
/// is priced by (step_builder.cc). Empty for an empty range and phases without layers.
std::vector<CountedOps> phase_ops(const models::ModelSpec& model, const models::LayerShape& shape,
                                  models::Recompute recompute, ir::Phase phase,
                                  ir::LayerRange layers);

/// Fills ir::Compute::operations of every compute task of `builder` (Note [task operations]).
void add_task_operations(ir::GraphBuilder& builder, const OperationContext& context);

}  // namespace metron::scenario::detail
