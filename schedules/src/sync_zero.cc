// add_zero_sync: DeepSpeed ZeRO stages 1, 2 and 3 (SYNC_POLICIES.md §5). Note [zero lowering]:
//
//   IPG buckets: zero_ipg_buckets per chunk (reduce_bucket_size elements, default 5e8), in
//   gradient-ready order. Upstream reduces bucket k when the next gradient would overflow it; at
//   layer granularity we issue its collective right after the backward piece that produces its
//   last gradient (the gradient task is cut below each bucket's lowest layer), since the next
//   gradient comes early in the next layer's backward. The last bucket is flushed by the
//   epilogue, after the whole backward. ZeRO-1 without overlap_comm has no hooks: after the
//   backward, reduce_gradients walks the parameters in registration (group) order, so those
//   buckets fill in registration order.
//
//   ZeRO-1/2 reduce a bucket with one all-reduce (use_multi_rank_bucket_allreduce, the default) of
//   numel·grad_bytes on "dp" (expert tensors' share on "edp"):
//     - without overlap_comm on the compute stream: the AR waits for its hook piece and the next
//       compute task waits for the AR, so compute and reductions serialise;
//     - with overlap_comm on the reduction stream, which waits on compute while compute waits on
//       the reduction stream's earlier work: the compute task after bucket k's hook depends on
//       bucket k-1's AR (one reduction in flight). The epilogue device-synchronises: a HostWait
//       on the last AR of each group.
//   ZeRO-2 reduces on every microbatch, ZeRO-1 on the last (hooks with overlap_comm, else every
//   bucket right before the step). A communicating backward allocates the IPG buffer(s)
//   (reduce_bucket_size·grad_bytes, two with overlap_comm) with its first piece; they are freed
//   after its last reduction. After the step: one all-gather of the flat bit16 param group
//   (numel padded to 2·d), dense on dp and, for expert tensors, a group of their own on edp.
//
//   ZeRO-3, per rank one PartitionedParameterCoordinator at layer granularity (a module is the
//   tensors of one layer; the embedding counts as the chunk's first layer, the head as its last):
//     - trace: a (chunk, microbatch)'s forward runs its layers up, its backward down: steps
//       0..2n-1. Pieces: forward and backward-start tasks are cut at every layer boundary.
//     - fetch (pre-forward / pre-backward hook of a layer): when the layer's non-persistent
//       tensors (numel > param_persistence_threshold) are not resident, one AG of them (all_gather
//       _coalesced pads each tensor to d: Σ round_up(numel, d)·param_bytes) right before the
//       piece. The piece depends on the AG holding its layer and uses that AG's buffer. The first
//       use of a gather records a fetch event; with 2 events outstanding the host first waits on
//       the oldest (HostWait on its AG). Then, with a complete trace, prefetch: pop the trace
//       steps after the current one and gather the layers not resident while the elements
//       prefetched so far stay below min(prefetch_bucket_size, max_live_parameters − resident),
//       in one AG (a layer is taken whole: upstream counts per tensor).
//     - release (post-forward / post-backward hook): with a complete trace the layer's copy is
//       dropped unless a later step uses it before max_reuse_distance elements of other
//       modules; without one every module is released. A buffer is freed after its last user,
//       so a kept layer lives until its backward piece.
//     - warm-up (iteration 1): each chunk's first fwd+bwd records the trace (no prefetch, every
//       module released); reset_step completes it, so later microbatches run as in steady state.
//     - gradients: an RS per IPG bucket on every microbatch (interleaved, Σ round_up(numel,
//       d)·grad_bytes) after its hook piece, at most 2 outstanding (a HostWait on the RS two
//       buckets back); the epilogue host-synchronises on the last RS. Without overlap_comm both
//       streams are the compute stream: the compute after a prefetch or an RS waits for it.
//     - after the step: a synchronous AG of the persistent tensors, when there are any (also in
//       warm-up, whose first gathers of them are not modelled).
//   Resident layers are per rank and carry across microbatches (under pipelining a layer kept
//   for mb 0's backward is found resident by mb 1's forward), while prefetch and reuse distance
//   look at one (chunk, microbatch) trace: DeepSpeed runs ZeRO-3 without pipelining, where this is
//   exact.
//
//   Buckets are per chunk (each chunk's backward flushes its own). Tags: bucket = IPG bucket index
//   within the chunk; for ZeRO-3 gathers the first gathered layer; 0 (1 for the expert group) for
//   the post-step gathers, whose chunk is -1 when the rank holds several.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/schedules/bucketing.h"
#include "sync_passes.h"

namespace metron::schedules::detail {
namespace {

using ir::BufferId;
using ir::RankId;
using ir::TaskId;

constexpr std::int64_t kDefaultReduceBucket = 500'000'000;  // reduce_bucket_size, elements
/// DeepSpeed's max_ongoing_fetch_events and max_param_reduce_events.
constexpr std::size_t kMaxOutstandingEvents = 2;

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

std::string layers_text(std::int32_t low, std::int32_t high) {
  if (low == high) return "layer " + std::to_string(low);
  return "layers " + std::to_string(low) + "-" + std::to_string(high);
}

/// The options of one stage, resolved to DeepSpeed's defaults.
struct ZeroConfig {
  std::int32_t stage = 1;
  std::string name;  ///< "zero1", for labels
  std::int64_t bucket = kDefaultReduceBucket;
  bool overlap = false;  ///< overlap_comm
  bool steady = true;
  std::int32_t last_microbatch = 0;
};

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

// ---- Pieces and what each one runs -------------------------------------------------------------

enum class Role : std::uint8_t { kForward, kBackward, kGradient };

/// One (chunk, microbatch) of a rank.
struct Work {
  std::int32_t chunk = 0;
  std::int32_t microbatch = 0;
  friend auto operator<=>(const Work&, const Work&) = default;
};

/// Split results by (rank, role, work), and the roles of every piece (forward before backward
/// before gradient, which is the order their collectives are issued in).
class Pieces {
 public:
  void request(RankId rank, Role role, Work work, ir::TaskId task, std::vector<std::int32_t> cuts) {
    if (!task.valid()) return;
    keys_.push_back({rank.value(), role, work});
    requests_.push_back({.task = task, .cuts = std::move(cuts)});
  }
  void split(SyncContext& ctx) {
    const auto result = ctx.split(requests_);
    for (std::size_t i = 0; i < result.size(); ++i) {
      pieces_[keys_[i]] = result[i];
      for (TaskId p : result[i]) {
        auto& roles = roles_[p];
        roles.emplace_back(std::get<1>(keys_[i]), std::get<2>(keys_[i]));
        std::sort(roles.begin(), roles.end());
      }
    }
  }
  [[nodiscard]] const std::vector<TaskId>* of(RankId rank, Role role, Work work) const {
    const auto it = pieces_.find({rank.value(), role, work});
    return it == pieces_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] const std::vector<std::pair<Role, Work>>& roles(TaskId piece) const {
    const auto it = roles_.find(piece);
    return it == roles_.end() ? none_ : it->second;
  }

 private:
  using Key = std::tuple<std::int32_t, Role, Work>;
  std::vector<Key> keys_;
  std::vector<SplitRequest> requests_;
  std::map<Key, std::vector<TaskId>> pieces_;
  std::unordered_map<TaskId, std::vector<std::pair<Role, Work>>> roles_;
  std::vector<std::pair<Role, Work>> none_;
};

/// The compute task issued after each one on its rank (invalid for the last).
std::unordered_map<TaskId, TaskId> next_compute(const std::vector<TaskId>& order) {
  std::unordered_map<TaskId, TaskId> next;
  for (std::size_t i = 0; i < order.size(); ++i) {
    next[order[i]] = i + 1 < order.size() ? order[i + 1] : TaskId{};
  }
  return next;
}

/// DeepSpeed's event deques: before recording an event with kMaxOutstandingEvents outstanding,
/// the host synchronises the oldest.
class EventThrottle {
 public:
  /// The task to host-wait on before recording one more event, if any.
  std::optional<TaskId> make_room() {
    if (events_.size() < kMaxOutstandingEvents) return std::nullopt;
    const TaskId oldest = events_.front();
    events_.pop_front();
    return oldest;
  }
  void record(TaskId event) { events_.push_back(event); }

 private:
  std::deque<TaskId> events_;
};

/// An IPG bucket as the passes reduce it.
struct ReduceBucket {
  std::int64_t dense = 0;   ///< elements reduced over dp
  std::int64_t expert = 0;  ///< elements of expert tensors, reduced over edp
  /// Elements with each tensor padded to d: ZeRO-3's interleaved reduce-scatter buffer.
  std::int64_t padded = 0;
  std::int32_t low = 0;  ///< lowest layer: its backward completes the bucket
  std::int32_t high = 0;
};

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

// ---- ZeRO-1 and ZeRO-2 -------------------------------------------------------------------------

class Zero12 {
 public:
  Zero12(SyncContext& ctx, const ZeroConfig& cfg) : ctx_(ctx), cfg_(cfg) {}
  void run();

 private:
  using Reduction = std::pair<GroupKind, TaskId>;
  /// One communicating backward while its pieces are walked.
  struct Backward {
    std::size_t next = 0;  ///< the next bucket to reduce
    std::vector<TaskId> hooks;
    std::vector<Reduction> previous;  ///< the previous bucket's ARs
    std::map<GroupKind, TaskId> last;
    BufferId ipg;
  };
  [[nodiscard]] bool hooks() const { return cfg_.stage == 2 || cfg_.overlap; }
  [[nodiscard]] bool communicates(std::int32_t mb) const {
    return cfg_.stage == 2 || mb == cfg_.last_microbatch;
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
  Pieces pieces_;
  std::vector<std::vector<std::vector<ReduceBucket>>> buckets_;  // [rank][chunk]
  std::map<Work, Backward> backwards_;                           // of the rank being walked
};

void Zero12::run() {
  plan();
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) walk(RankId{r});
}

void Zero12::plan() {
  buckets_.resize(static_cast<std::size_t>(ctx_.num_ranks()));
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) {
    const RankId rank{r};
    for (std::int32_t c = 0; c < ctx_.num_chunks(rank); ++c) {
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
        if (!communicates(w.microbatch)) continue;
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
  for (const auto& [kind, numel] :
       {std::pair{GroupKind::kData, b.dense}, std::pair{GroupKind::kExpertData, b.expert}}) {
    if (numel == 0 && (kind == GroupKind::kExpertData || b.expert > 0)) continue;
    std::string label = cfg_.name + " AR bucket " + std::to_string(k) + " (" +
                        layers_text(b.low, b.high) + ")" +
                        (kind == GroupKind::kExpertData ? " expert" : "") + " " + trigger + " mb " +
                        std::to_string(w.microbatch);
    out.emplace_back(kind,
                     ctx_.collective(rank, {.kind = kind,
                                            .op = ir::CollectiveOp::kAllReduce,
                                            .bytes = numel * ctx_.input().grad_bytes,
                                            .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
                                            .bucket = static_cast<std::int32_t>(k),
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
  return ctx_.allocate(start->front(), buffers * cfg_.bucket * ctx_.input().grad_bytes,
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
      if (w.microbatch == cfg_.last_microbatch) depend(b, ar, step);
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
    const Work w{c, cfg_.last_microbatch};
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
  const auto gather = [&](GroupKind kind, std::int64_t numel, std::int64_t d, std::int32_t group,
                          const std::string& what) {
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
  if (dense > 0) gather(GroupKind::kData, dense, ctx_.input().data_parallel, 0, "");
  if (expert > 0) {
    gather(GroupKind::kExpertData, expert, ctx_.input().expert_data_parallel, 1, "expert ");
  }
}

// ---- ZeRO-3 ------------------------------------------------------------------------------------

/// One module: the tensors of one layer of a chunk.
struct Module {
  std::int32_t layer = 0;
  std::int64_t numel = 0;           ///< all its tensors: what the reuse distance counts
  std::int64_t gathered_numel = 0;  ///< of its partitioned (non-persistent) tensors
  std::int64_t gathered_bytes = 0;  ///< their all-gather output, each tensor padded to d
};

struct Zero3Chunk {
  std::vector<Module> modules;  ///< by ascending layer
  std::vector<ReduceBucket> buckets;
};

class Zero3 {
 public:
  Zero3(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options)
      : ctx_(ctx), cfg_(cfg), options_(options) {}
  void run();

 private:
  struct Resident {
    TaskId gather;
    BufferId buffer;
    bool waited = false;  ///< a fetch event was recorded for it
  };
  struct Reduction {
    std::size_t next = 0;
    std::vector<TaskId> hooks;
    EventThrottle throttle;
    TaskId last;
  };

  [[nodiscard]] bool partitioned(std::int64_t numel) const {
    return numel > options_.zero_param_persistence_threshold;
  }
  Zero3Chunk plan_chunk(const ChunkParams& params) const;
  void plan();
  void walk(RankId rank);
  void run_modules(TaskId piece, Role role, Work w);
  void run_module(TaskId piece, Work w, std::int32_t step);
  void fetch(TaskId piece, Work w, std::int32_t step);
  void prefetch(TaskId piece, Work w, std::int32_t step);
  [[nodiscard]] bool reused(Work w, std::int32_t step) const;
  TaskId gather(TaskId piece, Work w, const std::vector<std::int32_t>& modules, std::string label);
  void on_gradient_piece(TaskId piece, Work w, TaskId next);
  void gather_persistent(TaskId step);

  [[nodiscard]] const Zero3Chunk& chunk(std::int32_t c) const {
    return chunks_[rank_.index()][static_cast<std::size_t>(c)];
  }
  [[nodiscard]] const Module& module(std::int32_t c, std::int32_t i) const {
    return chunk(c).modules[static_cast<std::size_t>(i)];
  }
  [[nodiscard]] std::int32_t num_steps(std::int32_t c) const {
    return 2 * static_cast<std::int32_t>(chunk(c).modules.size());
  }
  /// The module a trace step runs: forward up, then backward down.
  [[nodiscard]] std::int32_t module_at(std::int32_t c, std::int32_t step) const {
    const std::int32_t n = num_steps(c) / 2;
    return step < n ? step : 2 * n - 1 - step;
  }
  [[nodiscard]] std::string step_text(Work w, std::int32_t step) const {
    return std::string(step < num_steps(w.chunk) / 2 ? "fwd" : "bwd") + " layer " +
           std::to_string(module(w.chunk, module_at(w.chunk, step)).layer) + " mb " +
           std::to_string(w.microbatch);
  }

  SyncContext& ctx_;
  const ZeroConfig& cfg_;
  const SyncOptions& options_;
  Pieces pieces_;
  std::vector<std::vector<Zero3Chunk>> chunks_;  // [rank][chunk]
  // The coordinator of the rank being walked.
  RankId rank_;
  std::map<std::pair<std::int32_t, std::int32_t>, Resident> resident_;  // (chunk, module)
  std::int64_t available_ = 0;  ///< elements resident or in flight (max_live_parameters)
  EventThrottle fetches_;
  std::map<Work, std::int32_t> cursor_;  ///< the trace's prefetch queue position
  std::vector<bool> trace_complete_;     ///< by chunk
  std::map<Work, Reduction> reductions_;
  std::map<std::pair<Role, Work>, std::vector<TaskId>> piece_of_module_;
};

Zero3Chunk Zero3::plan_chunk(const ChunkParams& params) const {
  const std::int64_t d = ctx_.input().data_parallel;
  std::map<std::int32_t, Module> modules;
  for (const ParamTensor& t : params.tensors) {
    if (t.expert) {
      throw InvalidConfig("zero3: stage " + std::to_string(params.stage) + " tensor \"" + t.name +
                          "\" is an expert weight; expected dense parameters (ZeRO-3 expert "
                          "partitioning over the expert data-parallel group is not modelled)");
    }
    Module& m = modules[t.layer];
    m.layer = t.layer;
    m.numel += t.numel;
    if (partitioned(t.numel)) {
      m.gathered_numel += t.numel;
      m.gathered_bytes += round_up(t.numel, d) * ctx_.input().param_bytes;
    }
  }
  Zero3Chunk out;
  for (const auto& [layer, m] : modules) out.modules.push_back(m);
  out.buckets = reduce_buckets(params.tensors, cfg_.bucket, false, d);
  return out;
}

void Zero3::plan() {
  chunks_.resize(static_cast<std::size_t>(ctx_.num_ranks()));
  const auto every_layer = [&](TaskId t) {
    std::vector<std::int32_t> cuts;
    if (!t.valid()) return cuts;
    const ir::LayerRange r = ctx_.builder().data().tasks[t.index()].layers;
    for (std::int32_t l = r.first + 1; l < r.last; ++l) cuts.push_back(l);
    return cuts;
  };
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) {
    const RankId rank{r};
    for (std::int32_t c = 0; c < ctx_.num_chunks(rank); ++c) {
      const Zero3Chunk& plan = chunks_[rank.index()].emplace_back(
          plan_chunk(ctx_.params(rank)[static_cast<std::size_t>(c)]));
      std::vector<std::int32_t> bucket_cuts;
      for (const ReduceBucket& b : plan.buckets) bucket_cuts.push_back(b.low);
      const ChunkTasks& tasks = ctx_.chunk_tasks(rank, c);
      const auto at = [](const std::vector<TaskId>& v, std::size_t mb) {
        return mb < v.size() ? v[mb] : TaskId{};
      };
      const std::size_t microbatches =
          std::max({tasks.forward.size(), tasks.backward_start.size(), tasks.gradient.size()});
      for (std::size_t mb = 0; mb < microbatches; ++mb) {
        const Work w{c, static_cast<std::int32_t>(mb)};
        const TaskId f = at(tasks.forward, mb);
        const TaskId b = at(tasks.backward_start, mb);
        pieces_.request(rank, Role::kForward, w, f, every_layer(f));
        pieces_.request(rank, Role::kBackward, w, b, every_layer(b));
        pieces_.request(rank, Role::kGradient, w, at(tasks.gradient, mb), bucket_cuts);
      }
    }
  }
  pieces_.split(ctx_);
}

void Zero3::run() {
  if (options_.zero_prefetch_bucket_size < 0 || options_.zero_param_persistence_threshold < 0 ||
      options_.zero_max_live_parameters < 0 || options_.zero_max_reuse_distance < 0) {
    throw InvalidConfig(
        "zero3: prefetch bucket size " + std::to_string(options_.zero_prefetch_bucket_size) +
        ", persistence threshold " + std::to_string(options_.zero_param_persistence_threshold) +
        ", max live parameters " + std::to_string(options_.zero_max_live_parameters) +
        ", max reuse distance " + std::to_string(options_.zero_max_reuse_distance) +
        "; expected element counts >= 0");
  }
  plan();
  for (std::int32_t r = 0; r < ctx_.num_ranks(); ++r) walk(RankId{r});
}

void Zero3::walk(RankId rank) {
  rank_ = rank;
  resident_.clear();
  available_ = 0;
  fetches_ = {};
  cursor_.clear();
  trace_complete_.assign(static_cast<std::size_t>(ctx_.num_chunks(rank)), cfg_.steady);
  reductions_.clear();
  piece_of_module_.clear();
  const std::vector<TaskId> order = ctx_.compute_order(rank);
  const auto next = next_compute(order);
  const TaskId step = ctx_.optimizer_step(rank);
  for (TaskId p : order) {
    if (p == step) gather_persistent(step);
    for (const auto& [role, w] : pieces_.roles(p)) {
      if (role == Role::kGradient) {
        on_gradient_piece(p, w, next.at(p));
      } else {
        run_modules(p, role, w);
      }
    }
  }
}

// The modules a forward or backward piece runs, in its execution order.
void Zero3::run_modules(TaskId piece, Role role, Work w) {
  auto [it, fresh] = piece_of_module_.try_emplace({role, w});
  if (fresh) {
    const std::vector<TaskId>& pieces = *pieces_.of(rank_, role, w);
    for (const Module& m : chunk(w.chunk).modules) {
      it->second.push_back(ctx_.piece_with_layer(pieces, m.layer));
    }
  }
  const std::vector<TaskId>& owner = it->second;
  const std::int32_t n = num_steps(w.chunk) / 2;
  for (std::int32_t k = 0; k < n; ++k) {
    const std::int32_t i = role == Role::kForward ? k : n - 1 - k;
    if (owner[static_cast<std::size_t>(i)] != piece) continue;
    run_module(piece, w, role == Role::kForward ? i : 2 * n - 1 - i);
  }
}

// A module's pre-hook (fetch, then prefetch) and post-hook (release) around `piece`.
void Zero3::run_module(TaskId piece, Work w, std::int32_t step) {
  const std::int32_t i = module_at(w.chunk, step);
  const Module& m = module(w.chunk, i);
  const bool complete = trace_complete_[static_cast<std::size_t>(w.chunk)];
  if (m.gathered_numel > 0) fetch(piece, w, step);
  std::int32_t& cursor = cursor_[w];
  cursor = std::max(cursor, step + 1);  // the module's own params leave the prefetch queue
  if (complete) prefetch(piece, w, step);
  if (m.gathered_numel > 0 && (!complete || !reused(w, step))) {
    resident_.erase({w.chunk, i});
    available_ -= m.gathered_numel;
  }
  // The first fwd+bwd records the trace (reset_step after the backward completes it).
  if (step + 1 == num_steps(w.chunk)) trace_complete_[static_cast<std::size_t>(w.chunk)] = true;
}

void Zero3::fetch(TaskId piece, Work w, std::int32_t step) {
  const std::int32_t i = module_at(w.chunk, step);
  auto it = resident_.find({w.chunk, i});
  if (it == resident_.end()) {
    gather(piece, w, {i}, "zero3 AG " + step_text(w, step));
    it = resident_.find({w.chunk, i});
  }
  Resident& r = it->second;
  if (!r.waited) {
    if (const auto oldest = fetches_.make_room()) {
      ctx_.issue_before(
          piece, ctx_.host_wait(rank_, *oldest, "zero3 fetch throttle " + step_text(w, step)));
    }
    fetches_.record(r.gather);
    r.waited = true;
  }
  depend(ctx_.builder(), r.gather, piece);
  ctx_.use(piece, r.buffer);
}

// Pops trace steps after `step` and gathers, in one AG, the modules not resident while the
// elements prefetched stay below the budget (a module is taken whole once the count is below).
void Zero3::prefetch(TaskId piece, Work w, std::int32_t step) {
  const std::int64_t budget =
      std::min(options_.zero_prefetch_bucket_size, options_.zero_max_live_parameters - available_);
  std::int32_t& cursor = cursor_[w];
  std::vector<std::int32_t> chosen;
  std::int64_t numel = 0;
  while (cursor < num_steps(w.chunk) && numel < budget) {
    const std::int32_t i = module_at(w.chunk, cursor++);
    const Module& m = module(w.chunk, i);
    if (m.gathered_numel == 0 || resident_.contains({w.chunk, i}) ||
        std::find(chosen.begin(), chosen.end(), i) != chosen.end()) {
      continue;
    }
    chosen.push_back(i);
    numel += m.gathered_numel;
  }
  if (chosen.empty()) return;
  std::string label = "zero3 prefetch AG layer";
  for (std::int32_t i : chosen) {
    label += " " + std::to_string(module(w.chunk, i).layer);
  }
  const TaskId ag = gather(piece, w, chosen, label + " at " + step_text(w, step));
  if (!cfg_.overlap) depend(ctx_.builder(), ag, piece);  // the all-gather stream is the compute's
}

// Whether the module of `step` is used again within max_reuse_distance elements of the trace's
// upcoming modules (DeepSpeed's __params_to_release).
bool Zero3::reused(Work w, std::int32_t step) const {
  const std::int32_t i = module_at(w.chunk, step);
  std::int64_t traversed = 0;
  for (std::int32_t s = step + 1; s < num_steps(w.chunk); ++s) {
    if (traversed >= options_.zero_max_reuse_distance) return false;
    const std::int32_t j = module_at(w.chunk, s);
    if (j == i) return true;
    traversed += module(w.chunk, j).numel;
  }
  return false;
}

// One all_gather_coalesced of `modules`, right before `piece`; each module's copy is a buffer of
// its own, freed after its last user.
TaskId Zero3::gather(TaskId piece, Work w, const std::vector<std::int32_t>& modules,
                     std::string label) {
  std::int64_t bytes = 0;
  for (std::int32_t i : modules) bytes += module(w.chunk, i).gathered_bytes;
  const TaskId ag =
      ctx_.collective(rank_, {.kind = GroupKind::kData,
                              .op = ir::CollectiveOp::kAllGather,
                              .bytes = bytes,
                              .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
                              .bucket = module(w.chunk, modules.front()).layer,
                              .chunk = w.chunk,
                              .microbatch = w.microbatch,
                              .label = std::move(label)});
  ctx_.issue_before(piece, ag);
  for (std::int32_t i : modules) {
    const Module& m = module(w.chunk, i);
    const BufferId buffer = ctx_.allocate(
        ag, m.gathered_bytes,
        "zero3 params layer " + std::to_string(m.layer) + " mb " + std::to_string(w.microbatch));
    ctx_.use(ag, buffer);
    resident_[{w.chunk, i}] = {.gather = ag, .buffer = buffer};
    available_ += m.gathered_numel;
  }
  return ag;
}

void Zero3::on_gradient_piece(TaskId piece, Work w, TaskId next) {
  const std::vector<TaskId>& pieces = *pieces_.of(rank_, Role::kGradient, w);
  const auto& buckets = chunk(w.chunk).buckets;
  auto [it, fresh] = reductions_.try_emplace(w);
  Reduction& red = it->second;
  if (fresh) red.hooks = hook_pieces(ctx_, pieces, buckets);
  ir::GraphBuilder& b = ctx_.builder();
  const TaskId step = ctx_.optimizer_step(rank_);
  const std::string mb = " mb " + std::to_string(w.microbatch);
  for (; red.next < buckets.size() && red.hooks[red.next] == piece; ++red.next) {
    const ReduceBucket& s = buckets[red.next];
    const std::string name = "bucket " + std::to_string(red.next);
    if (const auto oldest = red.throttle.make_room()) {
      ctx_.issue_after(piece,
                       ctx_.host_wait(rank_, *oldest, "zero3 reduce throttle before " + name + mb));
    }
    const bool epilogue = red.next + 1 == buckets.size();
    const TaskId rs =
        ctx_.collective(rank_, {.kind = GroupKind::kData,
                                .op = ir::CollectiveOp::kReduceScatter,
                                .bytes = s.padded * ctx_.input().grad_bytes,
                                .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
                                .bucket = static_cast<std::int32_t>(red.next),
                                .chunk = w.chunk,
                                .microbatch = w.microbatch,
                                .label = "zero3 RS " + name + " (" + layers_text(s.low, s.high) +
                                         ") " + (epilogue ? "epilogue" : "hook") + mb,
                                .deps = {piece}});
    ctx_.issue_after(piece, rs);
    red.throttle.record(rs);
    red.last = rs;
    if (!cfg_.overlap) depend(b, rs, next);  // the reduce stream is the compute's
    if (w.microbatch == cfg_.last_microbatch) depend(b, rs, step);
  }
  if (piece == pieces.back() && red.last.valid()) {
    ctx_.issue_after(piece, ctx_.host_wait(rank_, red.last, "zero3 epilogue synchronize" + mb));
  }
}

// _post_step: the updated persistent parameters all-gathered (all_gather_coalesced layout).
void Zero3::gather_persistent(TaskId step) {
  std::int64_t bytes = 0;
  for (const ChunkParams& c : ctx_.params(rank_)) {
    for (const ParamTensor& t : c.tensors) {
      if (!partitioned(t.numel)) {
        bytes += round_up(t.numel, ctx_.input().data_parallel) * ctx_.input().param_bytes;
      }
    }
  }
  if (bytes == 0) return;
  const TaskId ag =
      ctx_.collective(rank_, {.kind = GroupKind::kData,
                              .op = ir::CollectiveOp::kAllGather,
                              .bytes = bytes,
                              .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
                              .bucket = 0,
                              .chunk = ctx_.num_chunks(rank_) == 1 ? 0 : -1,
                              .label = "zero3 AG persistent params after step",
                              .deps = {step}});
  ctx_.issue_after(step, ag);
}

}  // namespace

void add_zero_sync(SyncContext& ctx, const SyncOptions& options) {
  const ZeroConfig cfg = resolve(ctx, options);
  if (cfg.stage == 3) {
    Zero3(ctx, cfg, options).run();
  } else {
    Zero12(ctx, cfg).run();
  }
}

}  // namespace metron::schedules::detail
