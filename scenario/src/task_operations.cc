// Note [task operations] (task_operations.h).

#include "task_operations.h"

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "metron/models/compute_cost.h"
#include "metron/models/layer_shape.h"
#include "metron/models/stage_cost_model.h"

namespace metron::scenario::detail {
namespace {

ir::DType dtype_of(models::Precision precision) {
  switch (precision) {
    case models::Precision::kBf16:
      return ir::DType::kBf16;
    case models::Precision::kFp16:
      return ir::DType::kFp16;
    case models::Precision::kFp32:
      return ir::DType::kFp32;
    case models::Precision::kFp8:
      return ir::DType::kFp8;
  }
  return ir::DType::kBf16;
}

ir::OperationKind kind_of(models::OpKind kind) {
  switch (kind) {
    case models::OpKind::kGemm:
      return ir::OperationKind::kGemm;
    case models::OpKind::kBatchedGemm:
      return ir::OperationKind::kBatchedGemm;
    case models::OpKind::kElementwise:
    case models::OpKind::kFusedAttention:
    case models::OpKind::kFusedAttentionBackward:
      break;
  }
  return ir::OperationKind::kElementwise;
}

/// What the executor runs for an op: the op itself, or for a fused attention kernel (which
/// neither backend has) its matrix products as batched GEMMs with the same FLOPs (the forward's
/// QKᵀ and ·V, the backward's four gradient products), the op's bytes shared among them.
std::vector<models::OpCost> executable(const models::OpCost& op) {
  if (!models::is_fused_attention(op.kind)) return {op};
  const auto product = [&](const std::string& suffix, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
    return models::OpCost{.name = op.name + suffix,
                          .kind = models::OpKind::kBatchedGemm,
                          .m = m,
                          .n = n,
                          .k = k,
                          .batch = op.batch,
                          .flops = 2.0 * double(op.batch) * double(m) * double(n) * double(k)};
  };
  std::vector<models::OpCost> out;
  if (op.kind == models::OpKind::kFusedAttention) {
    out = {product("-scores", op.m, op.n, op.k), product("-values", op.m, op.k, op.n)};
  } else {
    out = {
        product("-values-dgrad-a", op.m, op.n, op.k), product("-values-dgrad-b", op.n, op.k, op.m),
        product("-scores-dgrad-a", op.m, op.k, op.n), product("-scores-dgrad-b", op.k, op.n, op.m)};
  }
  for (models::OpCost& part : out) part.bytes = op.bytes / static_cast<double>(out.size());
  return out;
}

/// Appends `ops`, each repeated `count` times (scaled by `share` when it is not 1: an optimizer
/// chunk's part of the rank's parameters).
void append(std::vector<ir::Operation>& out, const std::vector<models::OpCost>& ops,
            std::int64_t count, ir::DType dtype, double share = 1.0) {
  for (const models::OpCost& whole : ops) {
    for (const models::OpCost& op : executable(whole)) {
      out.push_back({.name = op.name,
                     .kind = kind_of(op.kind),
                     .m = share == 1.0 ? op.m : std::llround(static_cast<double>(op.m) * share),
                     .n = op.n,
                     .k = op.k,
                     .batch = op.batch,
                     .bytes = std::llround(op.bytes * share),
                     .count = static_cast<std::int32_t>(count),
                     // An FP8 GEMM runs on the FP8 tensor cores (Note [fp8 training]).
                     .dtype = op.fp8 ? ir::DType::kFp8 : dtype});
    }
  }
}

/// The ops of `phase` over `layers`, as the executor runs them (Note [task operations]).
std::vector<ir::Operation> phase_operations(const OperationContext& c,
                                            const models::LayerShape& shape, ir::Phase phase,
                                            ir::LayerRange layers) {
  std::vector<ir::Operation> out;
  const ir::DType dtype = dtype_of(c.model.dtype);
  for (const CountedOps& part : phase_ops(c.model, shape, c.parallel.recompute, phase, layers)) {
    append(out, part.ops, part.count, dtype);
  }
  return out;
}

}  // namespace

std::vector<CountedOps> phase_ops(const models::ModelSpec& model, const models::LayerShape& shape,
                                  models::Recompute recompute, ir::Phase phase,
                                  ir::LayerRange layers) {
  std::vector<CountedOps> out;
  if (layers.empty()) return out;
  const std::int64_t count = layers.last - layers.first;
  const bool first = layers.first % model.layers == 0;
  const bool last = layers.last % model.layers == 0;
  const auto layer = [&](models::ComputePhase p) {
    out.push_back({models::layer_ops(model, shape, p, recompute), count});
  };
  const auto once = [&](std::vector<models::OpCost> ops) { out.push_back({std::move(ops), 1}); };
  const auto forward = [&] {
    if (first) once(models::embedding_ops(model, shape, models::ComputePhase::kForward));
    layer(models::ComputePhase::kForward);
    if (last) once(models::head_ops(model, shape, models::ComputePhase::kForward));
  };
  const auto input = [&] {
    if (last) once(models::head_ops(model, shape, models::ComputePhase::kBackwardInput));
    layer(models::ComputePhase::kRecompute);
    layer(models::ComputePhase::kBackwardInput);
  };
  const auto weight = [&] {
    if (last) once(models::head_ops(model, shape, models::ComputePhase::kBackwardWeight));
    layer(models::ComputePhase::kBackwardWeight);
    if (first) once(models::embedding_ops(model, shape, models::ComputePhase::kBackwardWeight));
  };
  switch (phase) {
    case ir::Phase::kForward:
      forward();
      break;
    case ir::Phase::kBackwardInput:
      input();
      break;
    case ir::Phase::kBackwardWeight:
      weight();
      break;
    case ir::Phase::kBackward:
      input();
      weight();
      break;
    case ir::Phase::kRecompute:
    case ir::Phase::kOptimizer:
    case ir::Phase::kOther:
      break;
  }
  return out;
}

void add_task_operations(ir::GraphBuilder& builder, const OperationContext& context) {
  const models::LayerShape shape = models::layer_shape(context.model, context.parallel);
  const ir::DType dtype = dtype_of(context.model.dtype);
  const auto tasks = static_cast<std::int32_t>(builder.data().tasks.size());
  for (std::int32_t i = 0; i < tasks; ++i) {
    ir::Task& task = builder.task(ir::TaskId{i});
    auto* c = std::get_if<ir::Compute>(&task.op);
    if (c == nullptr) continue;
    if (c->phase == ir::Phase::kOptimizer) {
      double share = 1.0;
      // One chunk's optimizer: its share of the rank's layers, as its duration (step_builder.cc).
      const auto pipeline_ranks = std::ssize(context.rank_layers);
      const std::int64_t rank = task.rank.value() % pipeline_ranks;
      const std::int64_t on_rank = context.rank_layers[static_cast<std::size_t>(rank)];
      if (!task.layers.empty() && on_rank > 0) {
        share = static_cast<double>(task.layers.last - task.layers.first) /
                static_cast<double>(on_rank);
      }
      append(c->operations,
             models::optimizer_step_ops(context.model, context.parallel, context.policy, rank), 1,
             dtype, share);
      continue;
    }
    c->operations = phase_operations(context, shape, c->phase, task.layers);
    if (c->overlapped) {
      for (ir::Operation& op :
           phase_operations(context, shape, c->overlapped->phase, c->overlapped->layers)) {
        c->operations.push_back(std::move(op));
      }
    }
  }
}

}  // namespace metron::scenario::detail
