// ZeRO-1 and ZeRO-2 (docs/SYNC_POLICIES.md §5, Note [zero lowering] in sync_zero.h): IPG buckets
// all-reduced on the last (ZeRO-1) or every (ZeRO-2) microbatch, then the bit16 all-gather.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/sync/bucket_plan.h"
#include "sync_zero.h"

namespace metron::sync::detail::zero {
namespace {

class Zero12 {
 public:
  Zero12(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options)
      : ctx_(ctx), cfg_(cfg), planned_(ctx.plan(options)) {}
  void run();

 private:
  using Reduction = std::pair<lowering::GroupKind, TaskId>;
  /// One communicating backward while its pieces are walked.
  struct Backward {
    std::size_t next = 0;  ///< the next bucket to reduce
    std::vector<TaskId> hooks;
    std::vector<Reduction> previous;  ///< the previous bucket's ARs
    std::map<lowering::GroupKind, TaskId> last;
    BufferId ipg;
  };
  [[nodiscard]] bool hooks() const { return cfg_.stage == 2 || cfg_.overlap; }
  /// The tag of `rank`'s all-reduces of `chunk`'s bucket `index`, or of its after-step gather
  /// (index -1), as policy_buckets numbers them.
  [[nodiscard]] std::int32_t planned_id(RankId rank, std::int32_t chunk, std::int32_t index) const {
    const auto& planned = planned_[static_cast<std::size_t>(ctx_.pipeline_rank(rank))];
    if (index >= 0) return chunk_buckets(planned, chunk).first_id + index;
    return planned.empty() ? 0 : planned.back().id;
  }
  /// The backward `rank` runs last of `chunk` (SyncContext::last_gradient_microbatch: not the
  /// highest microbatch under looped BFS), the one ZeRO-1 reduces and the step waits for.
  [[nodiscard]] std::int32_t last_mb(RankId rank, std::int32_t chunk) const {
    return last_mb_[rank.index()][static_cast<std::size_t>(chunk)];
  }
  [[nodiscard]] bool communicates(RankId rank, Work w) const {
    return cfg_.stage == 2 || w.microbatch == last_mb(rank, w.chunk);
  }
  void plan();
  void walk(RankId rank);
  std::vector<Reduction> reduce(RankId rank, Work w, std::size_t k, const std::string& trigger,
                                TaskId after);
  BufferId allocate_ipg(RankId rank, Work w, std::int64_t buffers);
  void on_gradient_piece(RankId rank, TaskId piece, Work w, TaskId next);
  void after_backward(RankId rank, TaskId step, TaskId last_compute);
  void gather_after_step(RankId rank, TaskId step);

  SyncContext& ctx_;
  const ZeroConfig& cfg_;
  SyncPlan planned_;  // the tags (policy_buckets)
  Pieces pieces_;
  std::vector<std::vector<std::vector<ReduceBucket>>> buckets_;  // [rank][chunk]
  std::vector<std::vector<std::int32_t>> last_mb_;               // [rank][chunk]
  std::map<Work, Backward> backwards_;                           // of the rank being walked
};

void Zero12::run() {
  plan();
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) walk(RankId{r});
}

void Zero12::plan() {
  buckets_.resize(static_cast<std::size_t>(ctx_.num_ranks()));
  last_mb_.resize(static_cast<std::size_t>(ctx_.num_ranks()));
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) {
    const RankId rank{r};
    for (std::int32_t c = 0; c < ctx_.num_chunks(rank); ++c) {
      // Before the split adds pieces; a chunk without a backward keeps the highest microbatch.
      const std::int32_t last = ctx_.last_gradient_microbatch(rank, c);
      last_mb_[rank.index()].push_back(last >= 0 ? last : cfg_.last_microbatch);
      const auto& tensors = ctx_.params(rank)[static_cast<std::size_t>(c)].tensors;
      const auto& buckets = buckets_[rank.index()].emplace_back(
          reduce_buckets(tensors, cfg_.bucket, !hooks(), ctx_.input().data_parallel));
      std::vector<std::int32_t> cuts;
      if (hooks()) {
        for (const ReduceBucket& b : buckets) cuts.push_back(b.low);
      }
      const ChunkTasks& tasks = ctx_.chunk_tasks(rank, c);
      for (std::size_t mb = 0; mb < tasks.gradient.size(); ++mb) {
        const Work w{c, static_cast<std::int32_t>(mb)};
        if (!communicates(rank, w)) continue;
        if (mb < tasks.backward_start.size()) {
          pieces_.request(rank, Role::kBackward, w, tasks.backward_start[mb], {});
        }
        pieces_.request(rank, Role::kGradient, w, tasks.gradient[mb], cuts);
      }
    }
  }
  pieces_.split(ctx_);
}

void Zero12::walk(RankId rank) {
  backwards_.clear();
  const std::vector<TaskId> order = ctx_.compute_order(rank);
  const auto next = next_compute(order);
  const TaskId step = ctx_.optimizer_step(rank);
  TaskId last_compute;
  for (TaskId p : order) {
    if (p == step) break;
    last_compute = p;
    if (!hooks()) continue;
    for (const auto& [role, w] : pieces_.roles(p)) {
      if (role == Role::kGradient) on_gradient_piece(rank, p, w, next.at(p));
    }
  }
  if (!hooks()) after_backward(rank, step, last_compute);
  gather_after_step(rank, step);
}

// Bucket k's all-reduces (dense on dp, expert on edp), waiting for `after`; not placed.
std::vector<Zero12::Reduction> Zero12::reduce(RankId rank, Work w, std::size_t k,
                                              const std::string& trigger, TaskId after) {
  const ReduceBucket& b = buckets_[rank.index()][static_cast<std::size_t>(w.chunk)][k];
  std::vector<Reduction> out;
  for (const auto& [kind, numel] : {std::pair{lowering::GroupKind::kData, b.dense},
                                    std::pair{lowering::GroupKind::kExpertData, b.expert}}) {
    if (numel == 0 && (kind == lowering::GroupKind::kExpertData || b.expert > 0)) continue;
    std::string label = cfg_.name + " AR bucket " + std::to_string(k) + " (" +
                        layers_text(b.low, b.high) + ")" +
                        (kind == lowering::GroupKind::kExpertData ? " expert" : "") + " " +
                        trigger + " mb " + std::to_string(w.microbatch);
    out.emplace_back(
        kind,
        ctx_.collective(rank, {.kind = kind,
                               .op = ir::CollectiveOp::kAllReduce,
                               .bytes = numel * ctx_.input().grad_bytes,
                               .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
                               .bucket = planned_id(rank, w.chunk, static_cast<std::int32_t>(k)),
                               .chunk = w.chunk,
                               .microbatch = w.microbatch,
                               .label = std::move(label),
                               .deps = {after}}));
  }
  return out;
}

// The IPG buffer(s) backward() allocates when it starts; freed after the last reduction using
// them.
BufferId Zero12::allocate_ipg(RankId rank, Work w, std::int64_t buffers) {
  const std::vector<TaskId>* start = pieces_.of(rank, Role::kBackward, w);
  if (start == nullptr) start = pieces_.of(rank, Role::kGradient, w);
  if (start == nullptr) return {};
  // A bucket_size from the user may be any positive int64: the product is checked (issue 14).
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(buffers, cfg_.bucket, &bytes) ||
      __builtin_mul_overflow(bytes, ctx_.input().grad_bytes, &bytes)) {
    throw InvalidConfig(
        cfg_.name + ": bucket_size (reduce_bucket_size) " + std::to_string(cfg_.bucket) + ": " +
        std::to_string(buffers) +
        " IPG buffer(s) of that many elements overflow 64-bit bytes; expected at most " +
        std::to_string(std::numeric_limits<std::int64_t>::max() /
                       (buffers * std::max<std::int64_t>(1, ctx_.input().grad_bytes))) +
        " elements");
  }
  return ctx_.allocate(start->front(), bytes,
                       cfg_.name + " IPG buffer chunk " + std::to_string(w.chunk) + " mb " +
                           std::to_string(w.microbatch));
}

void Zero12::on_gradient_piece(RankId rank, TaskId piece, Work w, TaskId next) {
  const std::vector<TaskId>& pieces = *pieces_.of(rank, Role::kGradient, w);
  const auto& buckets = buckets_[rank.index()][static_cast<std::size_t>(w.chunk)];
  auto [it, fresh] = backwards_.try_emplace(w);
  Backward& bw = it->second;
  if (fresh && !buckets.empty()) {
    bw.hooks = hook_pieces(ctx_, pieces, buckets);
    bw.ipg = allocate_ipg(rank, w, cfg_.overlap ? 2 : 1);  // overlap_comm double-buffers
  }
  ir::GraphBuilder& b = ctx_.builder();
  const TaskId step = ctx_.optimizer_step(rank);
  while (bw.next < buckets.size() && bw.hooks[bw.next] == piece) {
    const bool epilogue = bw.next + 1 == buckets.size();
    const auto ars = reduce(rank, w, bw.next, epilogue ? "epilogue" : "hook", piece);
    for (const auto& [kind, ar] : ars) {
      ctx_.issue_after(piece, ar);
      if (bw.ipg.valid()) ctx_.use(ar, bw.ipg);
      if (!cfg_.overlap) depend(b, ar, next);  // on the compute stream
      if (w.microbatch == last_mb(rank, w.chunk)) depend(b, ar, step);
      bw.last[kind] = ar;
    }
    // overlap_comm: before the bucket's copy-in the compute stream waits on the reduction
    // stream, i.e. on the previous bucket's reduction.
    if (cfg_.overlap) {
      for (const auto& [kind, ar] : bw.previous) depend(b, ar, next);
    }
    bw.previous = ars;
    ++bw.next;
  }
  if (piece == pieces.back() && cfg_.overlap) {  // the epilogue's device synchronize
    for (const auto& [kind, ar] : bw.last) {
      ctx_.issue_after(piece, ctx_.host_wait(rank, ar,
                                             cfg_.name + " epilogue synchronize mb " +
                                                 std::to_string(w.microbatch)));
    }
  }
}

// ZeRO-1 without overlap_comm: every bucket after the backward, on the compute stream, before the
// step.
void Zero12::after_backward(RankId rank, TaskId step, TaskId last_compute) {
  if (!last_compute.valid()) return;
  for (std::int32_t c = 0; c < ctx_.num_chunks(rank); ++c) {
    const Work w{c, last_mb(rank, c)};
    const auto& buckets = buckets_[rank.index()][static_cast<std::size_t>(c)];
    const BufferId ipg = buckets.empty() ? BufferId{} : allocate_ipg(rank, w, 1);
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      for (const auto& [kind, ar] : reduce(rank, w, k, "after backward", last_compute)) {
        if (step.valid()) {
          ctx_.issue_before(step, ar);
          depend(ctx_.builder(), ar, step);
        } else {
          ctx_.issue_after(last_compute, ar);
        }
        if (ipg.valid()) ctx_.use(ar, ipg);
      }
    }
  }
}

// The updated bit16 partitions gathered back: one all_gather_into_tensor per param group (dense;
// expert tensors form a group of their own over edp), the flat buffer padded to 2·d elements.
void Zero12::gather_after_step(RankId rank, TaskId step) {
  if (!step.valid()) return;
  std::int64_t dense = 0;
  std::int64_t expert = 0;
  for (const ChunkParams& chunk : ctx_.params(rank)) {
    for (const ParamTensor& t : chunk.tensors) (t.expert ? expert : dense) += t.numel;
  }
  const std::int32_t chunk = ctx_.num_chunks(rank) == 1 ? 0 : -1;
  const std::int64_t pb = ctx_.input().param_bytes;
  const auto gather = [&](lowering::GroupKind kind, std::int64_t numel, std::int64_t d,
                          std::int32_t group, const std::string& what) {
    const TaskId ag =
        ctx_.collective(rank, {.kind = kind,
                               .op = ir::CollectiveOp::kAllGather,
                               .bytes = round_up(numel, 2 * d) * pb,
                               .dtype = SyncContext::dtype_of(pb),
                               .bucket = group,
                               .chunk = chunk,
                               .label = cfg_.name + " AG " + what + "param group after step",
                               .deps = {step}});
    ctx_.issue_after(step, ag);
  };
  // The dense gather is the plan's last bucket; the expert one (not planned) the tag after it.
  const std::int32_t tag = planned_id(rank, 0, -1);
  if (dense > 0) gather(lowering::GroupKind::kData, dense, ctx_.input().data_parallel, tag, "");
  if (expert > 0) {
    gather(lowering::GroupKind::kExpertData, expert, ctx_.input().expert_data_parallel, tag + 1,
           "expert ");
  }
}

}  // namespace

void add_zero12_sync(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options) {
  Zero12(ctx, cfg, options).run();
}

}  // namespace metron::sync::detail::zero
