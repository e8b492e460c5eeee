// add_zero_sync, DeepSpeed ZeRO 1/2/3 (docs/SYNC_POLICIES.md §5): resolves the options to
// DeepSpeed's defaults and dispatches; and the helpers both ZeRO passes share. Note [zero lowering]
// is in sync_zero.h.

#include "sync_zero.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "metron/base/error.h"

namespace metron::sync::detail {
namespace zero {

ZeroConfig resolve(const SyncContext& ctx, const SyncOptions& o) {
  ZeroConfig cfg;
  switch (o.policy) {
    case SyncPolicy::kZero1:
      cfg.stage = 1;
      break;
    case SyncPolicy::kZero2:
      cfg.stage = 2;
      break;
    case SyncPolicy::kZero3:
      cfg.stage = 3;
      break;
    default:
      throw InvalidConfig("add_zero_sync: policy " + std::string(to_string(o.policy)) +
                          "; expected zero1, zero2 or zero3");
  }
  cfg.name = "zero" + std::to_string(cfg.stage);
  cfg.bucket = o.bucket_size.value_or(kDefaultReduceBucket);
  if (cfg.bucket <= 0) {
    throw InvalidConfig(cfg.name + ": bucket_size (reduce_bucket_size) " +
                        std::to_string(cfg.bucket) + "; expected a positive element count");
  }
  cfg.overlap = o.overlap_grad_reduce.value_or(cfg.stage == 3);
  cfg.steady = o.iteration == Iteration::kSteady;
  cfg.last_microbatch = ctx.num_microbatches() - 1;
  return cfg;
}

void depend(ir::GraphBuilder& b, TaskId before, TaskId after) {
  if (!before.valid() || !after.valid()) return;
  const std::vector<TaskId>& deps = b.task(after).deps;
  if (std::find(deps.begin(), deps.end(), before) == deps.end()) b.precede(before, after);
}

/// The compute task issued after each one on its rank (invalid for the last).
std::unordered_map<TaskId, TaskId> next_compute(const std::vector<TaskId>& order) {
  std::unordered_map<TaskId, TaskId> next;
  for (std::size_t i = 0; i < order.size(); ++i) {
    next[order[i]] = i + 1 < order.size() ? order[i + 1] : TaskId{};
  }
  return next;
}

/// zero_ipg_buckets in gradient-ready order, or in registration order (`registration_order`).
std::vector<ReduceBucket> reduce_buckets(const std::vector<ParamTensor>& tensors,
                                         std::int64_t bucket, bool registration_order,
                                         std::int64_t d) {
  std::vector<Bucket> raw;
  if (registration_order) {
    // zero_ipg_buckets walks gradient-ready order, higher layer first; giving tensor i the
    // layer -i makes that walk registration order, the order reduce_gradients uses.
    std::vector<ParamTensor> relabelled = tensors;
    for (std::size_t i = 0; i < relabelled.size(); ++i) {
      relabelled[i].layer = -static_cast<std::int32_t>(i);
    }
    raw = zero_ipg_buckets(relabelled, bucket);
  } else {
    raw = zero_ipg_buckets(tensors, bucket);
  }
  std::vector<ReduceBucket> out;
  for (const Bucket& b : raw) {
    ReduceBucket r{.low = tensors[static_cast<std::size_t>(b.tensors.front())].layer};
    r.high = r.low;
    for (std::int32_t i : b.tensors) {
      const ParamTensor& t = tensors[static_cast<std::size_t>(i)];
      (t.expert ? r.expert : r.dense) += t.numel;
      r.padded += round_up(t.numel, d);
      ++r.tensors;
      r.low = std::min(r.low, t.layer);
      r.high = std::max(r.high, t.layer);
    }
    out.push_back(r);
  }
  return out;
}

/// The piece after which each bucket's collective is issued: the one running its lowest layer,
/// the whole backward's last piece for the last bucket (the epilogue).
std::vector<TaskId> hook_pieces(const SyncContext& ctx, const std::vector<TaskId>& pieces,
                                const std::vector<ReduceBucket>& buckets) {
  std::vector<TaskId> hooks;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    hooks.push_back(k + 1 == buckets.size() ? pieces.back()
                                            : ctx.piece_with_layer(pieces, buckets[k].low));
  }
  return hooks;
}

}  // namespace zero

void add_zero_sync(SyncContext& ctx, const SyncOptions& options) {
  const zero::ZeroConfig cfg = zero::resolve(ctx, options);
  if (cfg.stage == 3) {
    zero::add_zero3_sync(ctx, cfg, options);
  } else {
    zero::add_zero12_sync(ctx, cfg, options);
  }
}

}  // namespace metron::sync::detail
