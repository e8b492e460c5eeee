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
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include "metron/sync/bucketing.h"
#include "sync_passes.h"

namespace metron::sync::detail {
namespace {

using ir::TaskId;

constexpr std::int64_t kDefaultReduceBufferElements = std::int64_t{1} << 23;

struct ChunkPlan {
  std::int32_t chunk = 0;
  ShardedDdpPlan plan;
  std::vector<std::int32_t> owners;  // per tensor of the chunk
  std::size_t request = 0;           // index into the split requests
  std::int32_t last_mb = 0;          // the backward that reduces (last_gradient_microbatch)
};

struct RankPlan {
  ir::RankId rank;
  std::vector<std::int64_t> owner_numel;  // per data-parallel rank, over all chunks
  std::vector<ChunkPlan> chunks;
};

std::int64_t total_numel(const std::vector<ParamTensor>& tensors) {
  return std::accumulate(tensors.begin(), tensors.end(), std::int64_t{0},
                         [](std::int64_t s, const ParamTensor& t) { return s + t.numel; });
}

// Higher layer first, within a layer reverse registration order (as autograd produces them).
std::vector<std::int32_t> gradient_ready_order(const std::vector<ParamTensor>& tensors) {
  std::vector<std::int32_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const std::int32_t la = tensors[static_cast<std::size_t>(a)].layer;
    const std::int32_t lb = tensors[static_cast<std::size_t>(b)].layer;
    return la != lb ? la > lb : a > b;
  });
  return order;
}

RankPlan plan_rank(SyncContext& ctx, ir::RankId rank, const SyncOptions& options,
                   std::vector<lowering::SplitRequest>& requests) {
  const std::int32_t world = ctx.input().data_parallel;
  RankPlan out{.rank = rank,
               .owner_numel = std::vector<std::int64_t>(static_cast<std::size_t>(world), 0)};
  std::vector<ParamTensor> all;
  for (std::int32_t c = 0; c < ctx.num_chunks(rank); ++c) {
    const auto& tensors = ctx.params(rank)[static_cast<std::size_t>(c)].tensors;
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  const std::vector<std::int32_t> owners = oss_partition(all, world);
  for (std::size_t i = 0; i < all.size(); ++i)
    out.owner_numel[static_cast<std::size_t>(owners[i])] += all[i].numel;

  std::size_t offset = 0;
  for (std::int32_t c = 0; c < ctx.num_chunks(rank); ++c) {
    const auto& tensors = ctx.params(rank)[static_cast<std::size_t>(c)].tensors;
    ChunkPlan chunk{
        .chunk = c,
        .owners = {owners.begin() + static_cast<std::ptrdiff_t>(offset),
                   owners.begin() + static_cast<std::ptrdiff_t>(offset + tensors.size())}};
    offset += tensors.size();
    const ChunkTasks& tasks = ctx.chunk_tasks(rank, c);
    const std::int32_t last_mb = ctx.last_gradient_microbatch(rank, c);
    if (last_mb < 0 || tensors.empty()) continue;  // forward only, or nothing to reduce
    chunk.last_mb = last_mb;
    const std::int64_t capacity =
        world == 1 ? 0
                   : std::min(options.bucket_size.value_or(kDefaultReduceBufferElements),
                              total_numel(tensors));
    chunk.plan = sharded_ddp_plan(tensors, chunk.owners, world, capacity);
    lowering::SplitRequest request{.task = tasks.gradient[static_cast<std::size_t>(last_mb)]};
    for (const ParamTensor& t : tensors) request.cuts.push_back(t.layer);
    chunk.request = requests.size();
    requests.push_back(std::move(request));
    out.chunks.push_back(std::move(chunk));
  }
  return out;
}

class RankPass {
 public:
  RankPass(SyncContext& ctx, const SyncOptions& options, const RankPlan& plan)
      : ctx_(ctx), options_(options), plan_(plan) {}

  void startup_broadcasts();
  void reduces(const ChunkPlan& chunk, const std::vector<TaskId>& pieces);
  void broadcasts_after_step();

 private:
  TaskId reduce(const ChunkPlan& chunk, TaskId piece, std::int64_t numel, std::int32_t owner,
                const std::string& what);

  SyncContext& ctx_;
  const SyncOptions& options_;
  const RankPlan& plan_;
  std::int32_t next_id_ = 0;
};

void RankPass::startup_broadcasts() {
  const std::vector<TaskId>& order = ctx_.builder().data().issue_order[plan_.rank.index()];
  const std::vector<TaskId> compute = ctx_.compute_order(plan_.rank);
  if (order.empty()) return;
  const std::int64_t bytes = ctx_.input().param_bytes;
  for (std::int32_t c = 0; c < ctx_.num_chunks(plan_.rank); ++c) {
    const auto& tensors = ctx_.params(plan_.rank)[static_cast<std::size_t>(c)].tensors;
    if (tensors.empty()) continue;
    const TaskId bc = ctx_.collective(
        plan_.rank, {.kind = lowering::GroupKind::kData,
                     .op = ir::CollectiveOp::kBroadcast,
                     .bytes = total_numel(tensors) * bytes,
                     .dtype = SyncContext::dtype_of(bytes),
                     .bucket = next_id_++,
                     .chunk = c,
                     .label = "fairscale start-up broadcast of chunk " + std::to_string(c) +
                              " from rank 0 (" + std::to_string(tensors.size()) + " tensors)",
                     .root_replica = 0});
    std::get<ir::Collective>(ctx_.builder().task(bc).op).count =
        static_cast<std::int32_t>(tensors.size());
    ctx_.issue_before(order.front(), bc);
    if (!compute.empty()) ctx_.builder().precede(bc, compute.front());
  }
}

TaskId RankPass::reduce(const ChunkPlan& chunk, TaskId piece, std::int64_t numel,
                        std::int32_t owner, const std::string& what) {
  const std::int32_t mb = chunk.last_mb;
  const TaskId r = ctx_.collective(
      plan_.rank, {.kind = lowering::GroupKind::kData,
                   .op = ir::CollectiveOp::kReduce,
                   .bytes = numel * ctx_.input().grad_bytes,
                   .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
                   .bucket = next_id_++,
                   .chunk = chunk.chunk,
                   .microbatch = mb,
                   .label = "fairscale reduce " + what + " to owner " + std::to_string(owner) +
                            " after backward mb " + std::to_string(mb),
                   .deps = {piece},
                   .root_replica = owner});
  ctx_.issue_after(piece, r);
  return r;
}

void RankPass::reduces(const ChunkPlan& chunk, const std::vector<TaskId>& pieces) {
  const auto& tensors = ctx_.params(plan_.rank)[static_cast<std::size_t>(chunk.chunk)].tensors;
  std::vector<std::int32_t> bucket_of(tensors.size(), -1);
  for (std::size_t b = 0; b < chunk.plan.buckets.size(); ++b) {
    for (std::int32_t t : chunk.plan.buckets[b].tensors)
      bucket_of[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(b);
  }
  std::vector<std::size_t> checked_in(chunk.plan.buckets.size(), 0);
  std::vector<TaskId> issued;
  for (std::int32_t t : gradient_ready_order(tensors)) {
    const ParamTensor& tensor = tensors[static_cast<std::size_t>(t)];
    const TaskId piece = ctx_.piece_with_layer(pieces, tensor.layer);
    const std::int32_t b = bucket_of[static_cast<std::size_t>(t)];
    if (b < 0) {
      issued.push_back(reduce(chunk, piece, tensor.numel, chunk.owners[static_cast<std::size_t>(t)],
                              tensor.name));
      continue;
    }
    const Bucket& bucket = chunk.plan.buckets[static_cast<std::size_t>(b)];
    if (++checked_in[static_cast<std::size_t>(b)] < bucket.tensors.size()) continue;
    issued.push_back(reduce(chunk, piece, bucket.numel, bucket.owner,
                            "bucket of " + std::to_string(bucket.tensors.size()) + " tensors"));
  }
  // _flush_reduce_calls: the compute stream waits for every handle.
  ir::TaskId next;
  const std::vector<TaskId> compute = ctx_.compute_order(plan_.rank);
  const auto it = std::find(compute.begin(), compute.end(), pieces.back());
  if (it != compute.end() && it + 1 != compute.end()) next = *(it + 1);
  const TaskId step = ctx_.optimizer_step(plan_.rank);
  for (TaskId r : issued) {
    if (next.valid()) ctx_.builder().precede(r, next);
    if (step.valid() && step != next) ctx_.builder().precede(r, step);
  }
}

void RankPass::broadcasts_after_step() {
  const TaskId step = ctx_.optimizer_step(plan_.rank);
  if (!step.valid()) return;
  ctx_.issue_after(step, ctx_.host_wait(plan_.rank, step, "oss torch.cuda.synchronize"));
  const std::int64_t param_bytes = ctx_.input().param_bytes;
  const bool fp16 = options_.broadcast_fp16 && param_bytes == 4;
  std::vector<TaskId> broadcasts;
  for (std::size_t owner = 0; owner < plan_.owner_numel.size(); ++owner) {
    const std::int64_t numel = plan_.owner_numel[owner];
    if (numel == 0) continue;  // no bucket for an owner without parameters
    const TaskId bc = ctx_.collective(
        plan_.rank, {.kind = lowering::GroupKind::kData,
                     .op = ir::CollectiveOp::kBroadcast,
                     .bytes = numel * (fp16 ? 2 : param_bytes),
                     .dtype = fp16 ? ir::DType::kFp16 : SyncContext::dtype_of(param_bytes),
                     .bucket = next_id_++,
                     .label = "oss broadcast of owner " + std::to_string(owner) + "'s " +
                              std::to_string(numel) + " elements after the step",
                     .root_replica = static_cast<std::int32_t>(owner)});
    ctx_.issue_after(step, bc);
    broadcasts.push_back(bc);
  }
  for (TaskId bc : broadcasts)
    ctx_.issue_after(step, ctx_.host_wait(plan_.rank, bc, "oss wait for the broadcasts"));
}

}  // namespace

void add_fairscale_sync(SyncContext& ctx, const SyncOptions& options) {
  std::vector<RankPlan> plans;
  std::vector<lowering::SplitRequest> requests;
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r)
    plans.push_back(plan_rank(ctx, ir::RankId{r}, options, requests));
  const std::vector<std::vector<TaskId>> pieces = ctx.split(requests);
  for (const RankPlan& plan : plans) {
    RankPass pass(ctx, options, plan);
    if (options.iteration == Iteration::kWarmup) pass.startup_broadcasts();
    for (const ChunkPlan& chunk : plan.chunks) pass.reduces(chunk, pieces[chunk.request]);
    pass.broadcasts_after_step();
  }
}

}  // namespace metron::sync::detail
