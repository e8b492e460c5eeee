// PyTorch DistributedDataParallel (docs/SYNC_POLICIES.md §2). Note [ddp sync]:
//
//   Every chunk is its own DDP module (torch.distributed.pipelining wraps each stage), all on the
//   one data-parallel process group, so their buckets share the "dp" stream in issue order.
//   Steady state: buckets rebuilt in gradient-ready order with [first_bucket_bytes, bucket_cap]
//   (ddp_buckets); under no_sync only the last microbatch's backward reduces. Its gradient task
//   (B, or W when the backward is split) is cut where each bucket's last gradient appears (the
//   bucket's lowest layer), and bucket k's all-reduce is issued right after that piece: the
//   autograd hook runs on the host as soon as the accumulate kernel is enqueued, and the
//   collective's stream waits on the compute stream, i.e. on that piece. Launch is strictly in
//   bucket order (mark_bucket_ready): buckets come in gradient-ready order, so their hook points
//   never go backwards and placing each after the previous one at the same point keeps the order.
//   finalize_backward makes the compute stream wait for every bucket, so the optimizer step
//   depends on all of them (the copy-back kernels are not modelled).
//   Warm-up (iteration 1): buckets are built at construction with [sys.maxsize]: one bucket of
//   everything, whose last gradient is the first layer's, so one all-reduce after the backward.
//   The rebuild's two small broadcasts (bucket indices, at iteration 2's pre-forward) are left
//   out: a few bytes each.
//   Communication hook: fp16/bf16 compression casts fp32 buckets to half precision (half the
//   bytes on the wire); the cast kernels are not modelled. Gradients already in 16 bits travel
//   unchanged.

#include <string>

#include "metron/sync/bucket_plan.h"
#include "sync_passes.h"

namespace metron::sync::detail {
namespace {

struct ChunkPlan {
  ir::RankId rank;
  std::int32_t chunk = 0;
  std::vector<Bucket> buckets;
  std::int32_t first_id = 0;  // the bucket tag of buckets[0] (policy_buckets)
  std::int32_t last_mb = 0;   // the backward outside no_sync (last_gradient_microbatch)
  std::size_t request = 0;    // index into the split requests
};

std::string layer_text(const Bucket& b) {
  return "layers " + std::to_string(b.lowest_layer) + "-" + std::to_string(b.highest_layer);
}

}  // namespace

void add_ddp_sync(SyncContext& ctx, const SyncOptions& options) {
  const SyncInput& in = ctx.input();
  std::int64_t bytes_per_element = in.grad_bytes;
  ir::DType dtype = SyncContext::dtype_of(in.grad_bytes);
  if (options.comm_hook != CommHook::kNone && in.grad_bytes == 4) {
    bytes_per_element = 2;
    dtype = options.comm_hook == CommHook::kFp16Compress ? ir::DType::kFp16 : ir::DType::kBf16;
  }

  const SyncPlan& planned = ctx.plan(options);
  std::vector<ChunkPlan> plans;
  std::vector<lowering::SplitRequest> requests;
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r) {
    const ir::RankId rank{r};
    for (std::int32_t c = 0; c < ctx.num_chunks(rank); ++c) {
      const ChunkTasks& tasks = ctx.chunk_tasks(rank, c);
      const std::int32_t last_mb = ctx.last_gradient_microbatch(rank, c);
      if (last_mb < 0) continue;  // forward only
      ChunkPlan plan{.rank = rank, .chunk = c, .last_mb = last_mb, .request = requests.size()};
      ChunkBuckets buckets =
          chunk_buckets(planned[static_cast<std::size_t>(ctx.pipeline_rank(rank))], c);
      plan.buckets = std::move(buckets.buckets);
      plan.first_id = buckets.first_id;
      lowering::SplitRequest request{.task = tasks.gradient[static_cast<std::size_t>(last_mb)]};
      for (const Bucket& b : plan.buckets) request.cuts.push_back(b.lowest_layer);
      requests.push_back(std::move(request));
      plans.push_back(std::move(plan));
    }
  }
  const std::vector<std::vector<ir::TaskId>> pieces = ctx.split(requests);

  for (const ChunkPlan& plan : plans) {
    std::int32_t id = plan.first_id;
    const std::vector<ir::TaskId>& chunk_pieces = pieces[plan.request];
    const ir::TaskId step = ctx.optimizer_step(plan.rank);
    for (const Bucket& b : plan.buckets) {
      const ir::TaskId hook = ctx.piece_with_layer(chunk_pieces, b.lowest_layer);
      const ir::TaskId reduce = ctx.collective(
          plan.rank, {.kind = lowering::GroupKind::kData,
                      .op = ir::CollectiveOp::kAllReduce,
                      .bytes = b.numel * bytes_per_element,
                      .dtype = dtype,
                      .bucket = id,
                      .chunk = plan.chunk,
                      .microbatch = plan.last_mb,
                      .label = "ddp AR bucket " + std::to_string(id) + " (" + layer_text(b) +
                               ") after backward mb " + std::to_string(plan.last_mb),
                      .deps = {hook}});
      ++id;
      ctx.issue_after(hook, reduce);
      if (step.valid()) ctx.builder().precede(reduce, step);
    }
  }
}

}  // namespace metron::sync::detail
