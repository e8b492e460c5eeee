// fairscale ShardedDataParallel + OSS (docs/SYNC_POLICIES.md §4). Note [fairscale sync]:
//
//   One OSS optimizer holds the parameters of all the rank's chunks (registration order, chunk 0
//   first) and partitions them over the data-parallel ranks (oss_partition); every chunk is its
//   own ShardedDataParallel module over that optimizer (torch.distributed.pipelining wraps each
//   stage), so each chunk gets its own reduction plan (sharded_ddp_plan; reduce_buffer_size,
//   default 2^23 elements, capped at the chunk's size, 0 — no buckets — on one rank).
//   Gradients: no_sync for every microbatch but the last, so only microbatch M−1's gradient task
//   (B, or W when split) reduces; it is cut at every layer. Hooks fire in gradient-ready order
//   (higher layer first, within a layer reverse registration order, on the piece with the
//   tensor's layer): a direct tensor's reduce(dst = owner) right away; a bucketed tensor checks in
//   and its owner's bucket is reduced when its last member checks in (GradBucket.all_checked_in).
//   The end-of-backward callback (_flush_reduce_calls) has no unsent bucket left, as every tensor
//   gets a gradient, and waits for every handle: the compute task after the chunk's last piece
//   and the optimizer step depend on all the chunk's reduces.
//   Parameters: after the step OSS calls torch.cuda.synchronize (a HostWait on the step), then
//   broadcasts each owner's flat bucket from its owner (bytes: its elements · param_bytes, in
//   fp16 with broadcast_fp16 when the weights are fp32) and waits for all of them; we block the
//   host on each (no overlap with the next forward). The fp16 casts are not modelled.
//   Warm-up: each chunk's constructor broadcasts its state dict from rank 0
//   (sync_models_at_startup) before anything else: one task per chunk standing for one broadcast
//   per tensor (count), which the rank's first compute task waits for. Our models have no module
//   buffers, so there are no buffer broadcasts (broadcast_buffers) before the forwards. Gradient
//   memory (non-owners free direct gradients once reduced) is not modelled.

#include <algorithm>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "metron/sync/bucket_plan.h"
#include "sync_passes.h"

namespace metron::sync::detail {
namespace {

using ir::TaskId;

class RankPass {
 public:
  RankPass(SyncContext& ctx, const SyncOptions& options, ir::RankId rank)
      : ctx_(ctx), options_(options), rank_(rank) {}

  void startup_broadcast(const PlannedBucket& unit);
  /// Places the reduce after the piece that produces its last gradient and returns it.
  TaskId reduce(const PlannedBucket& unit, const std::vector<TaskId>& pieces, std::int32_t mb);
  /// _flush_reduce_calls: what runs after the chunk's backward waits for its reduces.
  void flush(const std::vector<TaskId>& pieces, const std::vector<TaskId>& issued);
  void broadcasts_after_step(const std::vector<const PlannedBucket*>& units);

 private:
  SyncContext& ctx_;
  const SyncOptions& options_;
  ir::RankId rank_;
};

void RankPass::startup_broadcast(const PlannedBucket& unit) {
  const std::vector<TaskId>& order = ctx_.builder().data().issue_order[rank_.index()];
  if (order.empty()) return;
  const std::vector<TaskId> compute = ctx_.compute_order(rank_);
  const auto tensors = static_cast<std::int32_t>(unit.bucket.tensors.size());
  const TaskId bc = ctx_.collective(
      rank_, {.kind = lowering::GroupKind::kData,
              .op = ir::CollectiveOp::kBroadcast,
              .bytes = unit.bucket.numel * ctx_.input().param_bytes,
              .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
              .bucket = unit.id,
              .chunk = unit.chunk,
              .label = "fairscale start-up broadcast of chunk " + std::to_string(unit.chunk) +
                       " from rank 0 (" + std::to_string(tensors) + " tensors)",
              .root_replica = 0,
              .count = tensors});
  ctx_.issue_before(order.front(), bc);
  if (!compute.empty()) ctx_.builder().precede(bc, compute.front());
}

TaskId RankPass::reduce(const PlannedBucket& unit, const std::vector<TaskId>& pieces,
                        std::int32_t mb) {
  const Bucket& bucket = unit.bucket;
  const std::string what = bucket.tensors.size() == 1
                               ? ctx_.params(rank_)[static_cast<std::size_t>(unit.chunk)]
                                     .tensors[static_cast<std::size_t>(bucket.tensors.front())]
                                     .name
                               : "bucket of " + std::to_string(bucket.tensors.size()) + " tensors";
  // A bucket goes when its last member checks in: the lowest layer's (gradient-ready order).
  const TaskId piece = ctx_.piece_with_layer(pieces, bucket.lowest_layer);
  const TaskId r = ctx_.collective(
      rank_, {.kind = lowering::GroupKind::kData,
              .op = ir::CollectiveOp::kReduce,
              .bytes = bucket.numel * ctx_.input().grad_bytes,
              .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
              .bucket = unit.id,
              .chunk = unit.chunk,
              .microbatch = mb,
              .label = "fairscale reduce " + what + " to owner " + std::to_string(bucket.owner) +
                       " after backward mb " + std::to_string(mb),
              .deps = {piece},
              .root_replica = bucket.owner});
  ctx_.issue_after(piece, r);
  return r;
}

void RankPass::flush(const std::vector<TaskId>& pieces, const std::vector<TaskId>& issued) {
  ir::TaskId next;
  const std::vector<TaskId> compute = ctx_.compute_order(rank_);
  const auto it = std::find(compute.begin(), compute.end(), pieces.back());
  if (it != compute.end() && it + 1 != compute.end()) next = *(it + 1);
  const TaskId step = ctx_.optimizer_step(rank_);
  for (TaskId r : issued) {
    if (next.valid()) ctx_.builder().precede(r, next);
    if (step.valid() && step != next) ctx_.builder().precede(r, step);
  }
}

void RankPass::broadcasts_after_step(const std::vector<const PlannedBucket*>& units) {
  const TaskId step = ctx_.optimizer_step(rank_);
  if (!step.valid()) return;
  ctx_.issue_after(step, ctx_.host_wait(rank_, step, "oss torch.cuda.synchronize"));
  const std::int64_t param_bytes = ctx_.input().param_bytes;
  const bool fp16 = options_.broadcast_fp16 && param_bytes == 4;
  std::vector<TaskId> broadcasts;
  for (const PlannedBucket* unit : units) {
    const std::int64_t numel = unit->bucket.numel;
    const std::int32_t owner = unit->bucket.owner;
    const TaskId bc = ctx_.collective(
        rank_, {.kind = lowering::GroupKind::kData,
                .op = ir::CollectiveOp::kBroadcast,
                .bytes = numel * (fp16 ? 2 : param_bytes),
                .dtype = fp16 ? ir::DType::kFp16 : SyncContext::dtype_of(param_bytes),
                .bucket = unit->id,
                .label = "oss broadcast of owner " + std::to_string(owner) + "'s " +
                         std::to_string(numel) + " elements after the step",
                .root_replica = owner});
    ctx_.issue_after(step, bc);
    broadcasts.push_back(bc);
  }
  for (TaskId bc : broadcasts)
    ctx_.issue_after(step, ctx_.host_wait(rank_, bc, "oss wait for the broadcasts"));
}

/// The backward of each chunk that reduces: cut at every tensor's layer (fairscale's hooks).
struct ChunkSplit {
  std::int32_t last_mb = -1;  // last_gradient_microbatch; -1: the chunk does not reduce
  std::size_t request = 0;    // into the split requests
};

}  // namespace

void add_fairscale_sync(SyncContext& ctx, const SyncOptions& options) {
  const SyncPlan& planned = ctx.plan(options);
  std::vector<lowering::SplitRequest> requests;
  std::vector<std::map<std::int32_t, ChunkSplit>> splits(static_cast<std::size_t>(ctx.num_ranks()));
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r) {
    const ir::RankId rank{r};
    for (std::int32_t c = 0; c < ctx.num_chunks(rank); ++c) {
      const auto& tensors = ctx.params(rank)[static_cast<std::size_t>(c)].tensors;
      const std::int32_t last_mb = ctx.last_gradient_microbatch(rank, c);
      if (last_mb < 0 || tensors.empty()) continue;  // forward only, or nothing to reduce
      lowering::SplitRequest request{
          .task = ctx.chunk_tasks(rank, c).gradient[static_cast<std::size_t>(last_mb)]};
      for (const ParamTensor& t : tensors) request.cuts.push_back(t.layer);
      splits[static_cast<std::size_t>(r)][c] = {.last_mb = last_mb, .request = requests.size()};
      requests.push_back(std::move(request));
    }
  }
  const std::vector<std::vector<TaskId>> pieces = ctx.split(requests);
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r) {
    const ir::RankId rank{r};
    RankPass pass(ctx, options, rank);
    const auto& chunk_splits = splits[static_cast<std::size_t>(r)];
    std::vector<const PlannedBucket*> after_step;
    std::int32_t reducing = -1;  // the chunk whose reduces are being placed
    std::vector<TaskId> issued;
    const auto flush = [&] {
      if (reducing >= 0) pass.flush(pieces[chunk_splits.at(reducing).request], issued);
      issued.clear();
      reducing = -1;
    };
    for (const PlannedBucket& unit : planned[static_cast<std::size_t>(ctx.pipeline_rank(rank))]) {
      if (unit.role == BucketRole::kBroadcastParameters) {
        if (unit.chunk == kAllChunks) {
          after_step.push_back(&unit);
        } else {
          pass.startup_broadcast(unit);
        }
        continue;
      }
      if (unit.chunk != reducing) flush();
      const auto split = chunk_splits.find(unit.chunk);
      if (split == chunk_splits.end()) continue;
      reducing = unit.chunk;
      issued.push_back(pass.reduce(unit, pieces[split->second.request], split->second.last_mb));
    }
    flush();
    pass.broadcasts_after_step(after_step);
  }
}

}  // namespace metron::sync::detail
