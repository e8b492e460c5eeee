// Megatron-LM's DDP and distributed optimizer (docs/SYNC_POLICIES.md §3). Note [megatron sync]:
//
//   Buckets: megatron_buckets per chunk (dense then expert buffers), one bucket per group (no
//   FP8). Bucketing is off (one bucket per buffer) without overlap_grad_reduce, on pipeline ranks
//   > 0, on chunks > 0 and with overlap_param_gather_with_optimizer_step (§3.1).
//
//   Gradients (RS with the distributed optimizer, else AR; bytes per bucket of the grad buffer,
//   fp32 with grad_reduce_in_fp32; dense on "dp", expert on "edp"; with I optimizer instances an
//   RS over the instance ("dp-intra") then an AR of the shard across instances ("dp-inter")):
//     - without overlap_grad_reduce, and in the warm-up iteration (2026 code counts hook calls in
//       iteration 1 and launches nothing during backward): all buckets at finish_grad_sync, once
//       the schedule has returned (after its last send too), in chunk and bucket order;
//     - hooks: the chunk's last-microbatch gradient task is cut at the buckets' lowest layers and
//       each bucket goes right after the piece completing it, in no fixed order between buckets;
//       the first pipeline stage of 1F1B and every stage without align_grad_reduce;
//     - 1F1B with align_grad_reduce, stages after the first: grad_sync_func after the cooldown;
//     - interleaved with align_grad_reduce (grad_sync_func): chunk c's buckets at the schedule
//       point — after the rank's backward number k + pp_rank, where k is the backward holding
//       c's last microbatch — or after the cooldown when that is past the end.
//     With I instances the RS and the cross-instance AR are issued synchronously from one side
//     stream ("dp-comm", "edp-comm"), so one bucket's pair finishes before the next starts.
//   The optimizer step (its first piece) waits for all of them (finalize_model_grads).
//
//   Parameters (distributed optimizer only; AG of each bucket, padded, into param_data):
//     - without overlap_param_gather: synchronous AGs after the step, chunk by chunk, exposed;
//     - warm-up with it: none (the pre-hooks are disabled in iteration 1; the gathers of step 1
//       happen in iteration 2's forward, which the steady graph shows);
//     - steady, not aligned: the one-deep chain in each chunk's first forward: the first group
//       (first layers) is dispatched at the first pre-hook and waited on, then each wait
//       dispatches the next group, so AG(k−1) overlaps the forward of group k's layers; the first
//       is exposed;
//     - align_param_gather (interleaved): chunks 0 and 1 dispatch all their groups before the
//       schedule's warm-up, ahead of the first receive (start_param_sync walks bucket groups
//       from g[0], the last layers), chunk k ≥ 2 before the forward number v on rank r with
//       v + r the first microbatch of chunk k−1;
//       the pre-hooks only wait;
//     - overlap_param_gather_with_optimizer_step: the step is one optimizer per chunk (chained),
//       chunk 0 first, and chunk 0's gathers are dispatched right after its step, overlapping the
//       other chunks' steps; its forward then waits on nothing. Chunk 0 is unbucketed then.
//   Megatron needs no memory beyond its persistent buffers (in-place collectives).

#include <algorithm>
#include <string>
#include <unordered_set>
#include <variant>

#include "metron/base/error.h"
#include "metron/sync/bucket_plan.h"
#include "sync_passes.h"

namespace metron::sync::detail {
namespace {

struct ChunkPlan {
  ir::RankId rank;
  std::int32_t chunk = 0;
  std::vector<Bucket> buckets;
  std::int32_t first_bucket_id = 0;  // bucket tags: unique per rank
  std::ptrdiff_t grad_request = -1;  // split request of the last gradient task (hooks)
  std::ptrdiff_t fwd_request = -1;   // split request of the first forward (chain, align)
  std::int32_t last_mb = -1;         // the backward whose hooks reduce (last_gradient_microbatch)
};

std::string layer_text(const Bucket& b) {
  return "layers " + std::to_string(b.lowest_layer) + "-" + std::to_string(b.highest_layer);
}

class MegatronPass {
 public:
  MegatronPass(SyncContext& ctx, const SyncOptions& o) : ctx_(ctx), o_(o) {
    const SyncInput& in = ctx.input();
    distopt_ = o.policy == SyncPolicy::kMegatronDistopt;
    overlap_ = o.overlap_grad_reduce.value_or(false);
    instances_ = o.distributed_optimizer_instances;
    shard_ = in.data_parallel / instances_;
    grad_bytes_ =
        o.grad_reduce_in_fp32 ? (*o.grad_reduce_in_fp32 ? 4 : in.param_bytes) : in.grad_bytes;
    warmup_ = o.iteration == Iteration::kWarmup;
    align_grad_ = in.interleaved && o.align_grad_reduce;
    align_param_ = in.interleaved && o.align_param_gather.value_or(true);
    with_step_ = o.overlap_param_gather_with_optimizer_step;
  }

  void run() {
    plan();
    pieces_ = ctx_.split(requests_);
    for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) {
      const ir::RankId rank{r};
      split_step(rank);
      add_gradient_sync(rank);
      if (distopt_) add_param_gather(rank);
    }
  }

 private:
  /// Where the rank's gradient sync is launched (Note [megatron sync]).
  enum class GradLaunch { kAfterSchedule, kHooks, kScheduleSyncPoints };
  GradLaunch grad_launch(ir::RankId rank) const {
    if (!overlap_ || warmup_) return GradLaunch::kAfterSchedule;
    if (align_grad_) return GradLaunch::kScheduleSyncPoints;
    if (o_.align_grad_reduce && ctx_.pipeline_rank(rank) > 0) return GradLaunch::kAfterSchedule;
    return GradLaunch::kHooks;
  }
  bool chain() const { return distopt_ && o_.overlap_param_gather && !warmup_; }

  void plan() {
    const SyncPlan& planned = ctx_.plan(o_);
    for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) {
      const ir::RankId rank{r};
      for (std::int32_t c = 0; c < ctx_.num_chunks(rank); ++c) {
        ChunkBuckets buckets =
            chunk_buckets(planned[static_cast<std::size_t>(ctx_.pipeline_rank(rank))], c);
        ChunkPlan p{.rank = rank, .chunk = c, .first_bucket_id = buckets.first_id};
        p.buckets = std::move(buckets.buckets);
        const ChunkTasks& t = ctx_.chunk_tasks(rank, c);
        std::vector<std::int32_t> cuts;
        for (const Bucket& b : p.buckets) cuts.push_back(b.lowest_layer);
        p.last_mb = ctx_.last_gradient_microbatch(rank, c);
        if (grad_launch(rank) == GradLaunch::kHooks && at(t.gradient, p.last_mb).valid()) {
          p.grad_request = static_cast<std::ptrdiff_t>(requests_.size());
          requests_.push_back({.task = at(t.gradient, p.last_mb), .cuts = cuts});
        }
        // The pre-hooks fire in the chunk's first forward of the step (DualPipe's second
        // direction starts at microbatch m/2).
        if (chain()) {
          const ir::TaskId first = at(t.forward, ctx_.first_forward_microbatch(rank, c));
          if (first.valid()) {
            p.fwd_request = static_cast<std::ptrdiff_t>(requests_.size());
            requests_.push_back({.task = first, .cuts = cuts});
          }
        }
        plans_.push_back(std::move(p));
      }
    }
  }

  static ir::TaskId at(const std::vector<ir::TaskId>& by_mb, std::int32_t mb) {
    return mb >= 0 && static_cast<std::size_t>(mb) < by_mb.size()
               ? by_mb[static_cast<std::size_t>(mb)]
               : ir::TaskId{};
  }

  std::vector<const ChunkPlan*> plans_of(ir::RankId rank) const {
    std::vector<const ChunkPlan*> out;
    for (const ChunkPlan& p : plans_)
      if (p.rank == rank) out.push_back(&p);
    return out;
  }

  /// overlap_param_gather_with_optimizer_step: one optimizer step per chunk (Megatron's chained
  /// optimizer), chunk 0 first; the original STEP becomes the last chunk's, and the first piece
  /// is where the gradient waits land.
  void split_step(ir::RankId rank) {
    const ir::TaskId step = ctx_.optimizer_step(rank);
    step_entry_[rank.value()] = step;
    if (!step.valid()) return;
    if (!(with_step_ && distopt_)) {
      chunk_steps_[rank.value()] = {step};
      return;
    }
    const std::int32_t chunks = ctx_.num_chunks(rank);
    std::vector<ir::TaskId> steps;
    for (std::int32_t c = 0; c < chunks; ++c) {
      const ir::LayerRange layers = chunk_layers(rank, c);
      if (c + 1 == chunks) {
        ir::Task& last = ctx_.builder().task(step);
        last.chunk = ir::ChunkId{c};
        last.layers = layers;
        steps.push_back(step);
        continue;
      }
      ir::Task piece = ctx_.builder().data().tasks[step.index()];
      piece.chunk = ir::ChunkId{c};
      piece.layers = layers;
      piece.label = "optimizer chunk " + std::to_string(c);
      piece.allocates.clear();
      piece.uses.clear();
      if (c > 0) piece.deps.clear();
      const ir::TaskId id = ctx_.builder().add(std::move(piece));
      ctx_.issue_before(step, id);
      steps.push_back(id);
    }
    if (chunks > 1) ctx_.builder().task(step).deps.clear();
    chunk_steps_[rank.value()] = steps;
    step_entry_[rank.value()] = steps.front();
  }

  ir::LayerRange chunk_layers(ir::RankId rank, std::int32_t chunk) const {
    const auto& tensors = ctx_.params(rank)[static_cast<std::size_t>(chunk)].tensors;
    if (tensors.empty()) return {};
    ir::LayerRange out{tensors.front().layer, tensors.front().layer + 1};
    for (const ParamTensor& t : tensors) {
      out.first = std::min(out.first, t.layer);
      out.last = std::max(out.last, t.layer + 1);
    }
    return out;
  }

  lowering::GroupKind grad_kind(const Bucket& b) const {
    if (instances_ > 1)
      return b.expert ? lowering::GroupKind::kExpertIntra : lowering::GroupKind::kDataIntra;
    return b.expert ? lowering::GroupKind::kExpertData : lowering::GroupKind::kData;
  }

  /// The bucket's gradient collectives (RS [+ AR across instances] or AR), waiting for `anchor`
  /// and issued right after it — or, with `after_schedule`, once the rank's schedule has
  /// returned (just before the optimizer step); the step's first piece waits for the last.
  void reduce_bucket(const ChunkPlan& p, std::size_t index, ir::TaskId anchor,
                     const std::string& trigger, bool after_schedule = false) {
    const Bucket& b = p.buckets[index];
    const std::int32_t id = p.first_bucket_id + static_cast<std::int32_t>(index);
    const ir::CollectiveOp op =
        distopt_ ? ir::CollectiveOp::kReduceScatter : ir::CollectiveOp::kAllReduce;
    const std::int64_t elements = distopt_ ? b.padded_numel : b.numel;
    const std::string name = std::string(distopt_ ? "RS" : "AR") + " bucket " + std::to_string(id) +
                             " (" + layer_text(b) + ") " + trigger;
    ir::TaskId last = ctx_.collective(p.rank, {.kind = grad_kind(b),
                                               .op = op,
                                               .bytes = elements * grad_bytes_,
                                               .dtype = SyncContext::dtype_of(grad_bytes_),
                                               .bucket = id,
                                               .chunk = p.chunk,
                                               .microbatch = p.last_mb,
                                               .label = name,
                                               .deps = {anchor},
                                               .intra_size = shard_,
                                               .stream = side_stream(b)});
    const ir::TaskId entry = step_entry_[p.rank.value()];
    const auto place = [&](ir::TaskId t) {
      if (after_schedule && entry.valid()) {
        ctx_.issue_before(entry, t);
      } else {
        ctx_.issue_after(anchor, t);
      }
    };
    place(last);
    if (instances_ > 1) {
      const ir::TaskId across = ctx_.collective(
          p.rank,
          {.kind = b.expert ? lowering::GroupKind::kExpertInter : lowering::GroupKind::kDataInter,
           .op = ir::CollectiveOp::kAllReduce,
           .bytes = elements / shard_ * grad_bytes_,
           .dtype = SyncContext::dtype_of(grad_bytes_),
           .bucket = id,
           .chunk = p.chunk,
           .microbatch = p.last_mb,
           .label = "AR shard of bucket " + std::to_string(id) + " across instances",
           .deps = {last},
           .intra_size = shard_,
           .stream = side_stream(b)});
      place(across);
      last = across;
    }
    if (entry.valid()) ctx_.builder().precede(last, entry);
  }

  /// Megatron's dedicated communication stream with several optimizer instances; else none
  /// (each group's own stream).
  std::string side_stream(const Bucket& b) const {
    if (instances_ == 1) return {};
    return b.expert ? "edp-comm" : "dp-comm";
  }

  /// The rank's gradient tasks (the last backward compute of each microbatch) in issue order.
  std::vector<ir::TaskId> gradient_order(ir::RankId rank) const {
    // The indexed gradient tasks (whole tasks: a split task's earlier pieces are not among them),
    // put in issue order.
    std::unordered_set<std::int32_t> gradients;
    for (std::int32_t ch = 0; ch < ctx_.num_chunks(rank); ++ch) {
      for (ir::TaskId t : ctx_.chunk_tasks(rank, ch).gradient) {
        if (t.valid()) gradients.insert(t.value());
      }
    }
    std::vector<ir::TaskId> out;
    for (ir::TaskId t : ctx_.compute_order(rank)) {
      if (gradients.contains(t.value())) out.push_back(t);
    }
    return out;
  }

  void add_gradient_sync(ir::RankId rank) {
    const std::vector<const ChunkPlan*> plans = plans_of(rank);
    const std::vector<ir::TaskId> grads = gradient_order(rank);
    if (grads.empty()) return;  // forward only
    const GradLaunch launch = grad_launch(rank);
    if (launch == GradLaunch::kAfterSchedule) {
      // finish_grad_sync (or 1F1B's grad_sync_func after the cooldown): once the schedule has
      // returned, before the step.
      for (const ChunkPlan* p : plans) {
        for (std::size_t i = 0; i < p->buckets.size(); ++i)
          reduce_bucket(
              *p, i, grads.back(),
              overlap_ && !warmup_ ? "by grad_sync_func after the cooldown" : "at finish_grad_sync",
              true);
      }
      return;
    }
    for (const ChunkPlan* p : plans) {
      const ChunkTasks& t = ctx_.chunk_tasks(rank, p->chunk);
      const ir::TaskId last_grad = at(t.gradient, p->last_mb);
      if (!last_grad.valid()) continue;
      if (p->grad_request >= 0) {
        const auto& pieces = pieces_[static_cast<std::size_t>(p->grad_request)];
        for (std::size_t i = 0; i < p->buckets.size(); ++i) {
          reduce_bucket(*p, i, ctx_.piece_with_layer(pieces, p->buckets[i].lowest_layer),
                        "by hook in backward mb " + std::to_string(p->last_mb));
        }
        continue;
      }
      // grad_sync_func at the rank-shifted schedule point (or after the cooldown).
      const auto k = static_cast<std::size_t>(std::find(grads.begin(), grads.end(), last_grad) -
                                              grads.begin());
      const std::size_t point = k + static_cast<std::size_t>(ctx_.pipeline_rank(rank));
      const bool past_end = point >= grads.size();
      const ir::TaskId anchor = past_end ? grads.back() : grads[point];
      for (std::size_t i = 0; i < p->buckets.size(); ++i) {
        reduce_bucket(*p, i, anchor,
                      past_end ? "by grad_sync_func after the cooldown"
                               : "by grad_sync_func after backward " + std::to_string(point),
                      past_end);
      }
    }
  }

  ir::TaskId gather_bucket(const ChunkPlan& p, std::size_t index, std::vector<ir::TaskId> deps,
                           const std::string& trigger) {
    const Bucket& b = p.buckets[index];
    const std::int32_t id = p.first_bucket_id + static_cast<std::int32_t>(index);
    const lowering::GroupKind kind =
        instances_ > 1
            ? (b.expert ? lowering::GroupKind::kExpertIntra : lowering::GroupKind::kDataIntra)
            : (b.expert ? lowering::GroupKind::kExpertData : lowering::GroupKind::kData);
    return ctx_.collective(
        p.rank, {.kind = kind,
                 .op = ir::CollectiveOp::kAllGather,
                 .bytes = b.padded_numel * ctx_.input().param_bytes,
                 .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
                 .bucket = id,
                 .chunk = p.chunk,
                 .label = "AG bucket " + std::to_string(id) + " (" + layer_text(b) + ") " + trigger,
                 .deps = std::move(deps),
                 .intra_size = shard_});
  }

  void add_param_gather(ir::RankId rank) {
    const std::vector<const ChunkPlan*> plans = plans_of(rank);
    const std::vector<ir::TaskId>& steps = chunk_steps_[rank.value()];
    if (!o_.overlap_param_gather) {
      // start_param_sync(force_sync) in the step: every bucket, synchronously, after the step.
      const ir::TaskId step = ctx_.optimizer_step(rank);
      if (!step.valid()) return;
      for (const ChunkPlan* p : plans) {
        for (std::size_t i = 0; i < p->buckets.size(); ++i) {
          const ir::TaskId ag = gather_bucket(*p, i, {step}, "after the optimizer step");
          ctx_.issue_after(step, ag);
        }
      }
      return;
    }
    if (warmup_) return;  // pre-hooks disabled in iteration 1
    for (const ChunkPlan* p : plans) {
      if (with_step_ && p->chunk == 0 && !steps.empty()) {
        // Dispatched right after chunk 0's optimizer, for the next iteration's forward.
        for (std::size_t i = 0; i < p->buckets.size(); ++i) {
          const ir::TaskId ag = gather_bucket(*p, i, {steps.front()},
                                              "after chunk 0's optimizer step (next forward)");
          ctx_.issue_after(steps.front(), ag);
        }
        continue;
      }
      if (p->fwd_request < 0) continue;
      const auto& pieces = pieces_[static_cast<std::size_t>(p->fwd_request)];
      if (align_param_) {
        aligned_gathers(*p, pieces);
      } else {
        chained_gathers(*p, pieces);
      }
    }
  }

  /// Buckets in chain order: each dense/expert buffer from its first layers (the last bucket)
  /// towards g[0].
  static std::vector<std::size_t> chain_order(const ChunkPlan& p, bool expert) {
    std::vector<std::size_t> out;
    for (std::size_t i = p.buckets.size(); i-- > 0;) {
      if (p.buckets[i].expert == expert) out.push_back(i);
    }
    return out;
  }

  void chained_gathers(const ChunkPlan& p, const std::vector<ir::TaskId>& pieces) {
    for (const bool expert : {false, true}) {
      const std::vector<std::size_t> order = chain_order(p, expert);
      if (order.empty()) continue;
      // The first group is dispatched at the first pre-hook that finds it undispatched (the
      // chunk's first module for the dense chain); each wait dispatches the next.
      ir::TaskId dispatch_point = ctx_.piece_with_layer(pieces, p.buckets[order[0]].lowest_layer);
      ir::TaskId previous;
      for (std::size_t n = 0; n < order.size(); ++n) {
        const std::size_t i = order[n];
        const ir::TaskId needer = ctx_.piece_with_layer(pieces, p.buckets[i].lowest_layer);
        const ir::TaskId ag = gather_bucket(
            p, i, {},
            n == 0
                ? "at the first pre-hook (exposed)"
                : "dispatched by the wait for bucket " +
                      std::to_string(p.first_bucket_id + static_cast<std::int32_t>(order[n - 1])));
        ctx_.issue_before(dispatch_point, ag);
        ctx_.builder().precede(ag, needer);
        previous = ag;
        dispatch_point = needer;
      }
    }
  }

  void aligned_gathers(const ChunkPlan& p, const std::vector<ir::TaskId>& pieces) {
    const ir::TaskId point = aligned_dispatch_point(p);
    // start_param_sync walks the bucket groups from g[0] (the last layers), dense then expert.
    for (std::size_t i = 0; i < p.buckets.size(); ++i) {
      const ir::TaskId ag = gather_bucket(p, i, {}, "by param_sync_func (align_param_gather)");
      ctx_.issue_before(point, ag);
      ctx_.builder().precede(ag, ctx_.piece_with_layer(pieces, p.buckets[i].lowest_layer));
    }
  }

  /// Chunks 0 and 1: before the rank's first task; chunk k ≥ 2: before forward number v where
  /// v + pp_rank is the first microbatch of chunk k − 1 (else before the chunk's own forward).
  ir::TaskId aligned_dispatch_point(const ChunkPlan& p) const {
    std::vector<ir::TaskId> forwards;
    for (ir::TaskId t : ctx_.compute_order(p.rank)) {
      const ir::Task& task = ctx_.builder().data().tasks[t.index()];
      if (std::get<ir::Compute>(task.op).phase != ir::Phase::kForward) continue;
      // One entry per whole forward task: a split task's earlier pieces share its tags.
      if (!forwards.empty()) {
        const ir::Task& prev = ctx_.builder().data().tasks[forwards.back().index()];
        if (prev.chunk == task.chunk && prev.microbatch == task.microbatch) {
          continue;
        }
      }
      forwards.push_back(t);
    }
    if (forwards.empty()) return at(ctx_.chunk_tasks(p.rank, p.chunk).forward, 0);
    // The schedule calls param_sync_func for chunks 0 and 1 before its warm-up, ahead of the
    // first receive (docs/SCHEDULES.md §1.7).
    if (p.chunk < 2) return ctx_.builder().data().issue_order[p.rank.index()].front();
    const auto r = static_cast<std::size_t>(ctx_.pipeline_rank(p.rank));
    for (std::size_t v = 0; v < forwards.size(); ++v) {
      if (v + r >= forwards.size()) break;
      const ir::Task& at_v = ctx_.builder().data().tasks[forwards[v + r].index()];
      if (at_v.chunk == ir::ChunkId{p.chunk - 1} && at_v.microbatch == ir::MicrobatchId{0}) {
        return forwards[v];
      }
    }
    return forwards.front();
  }

  SyncContext& ctx_;
  const SyncOptions& o_;
  bool distopt_ = false;
  bool overlap_ = false;
  bool warmup_ = false;
  bool align_grad_ = false;
  bool align_param_ = false;
  bool with_step_ = false;
  std::int32_t instances_ = 1;
  std::int32_t shard_ = 1;
  std::int64_t grad_bytes_ = 2;
  std::vector<ChunkPlan> plans_;
  std::vector<lowering::SplitRequest> requests_;
  std::vector<std::vector<ir::TaskId>> pieces_;
  std::map<std::int32_t, ir::TaskId> step_entry_;
  std::map<std::int32_t, std::vector<ir::TaskId>> chunk_steps_;
};

}  // namespace

void add_megatron_sync(SyncContext& ctx, const SyncOptions& options) {
  MegatronPass(ctx, options).run();
}

}  // namespace metron::sync::detail
