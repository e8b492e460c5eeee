// PyTorch FSDP1 (FullyShardedDataParallel) and FSDP2 (fully_shard), docs/SYNC_POLICIES.md §6.
// Note [fsdp sync]:
//
//   Every chunk is its own FSDP root (torch.distributed.pipelining wraps each stage module), with
//   one unit per transformer layer plus the root unit (embeddings, final norm, head) when the
//   chunk has such tensors (fsdp_units, padded to the shard group). Every forward, backward-start
//   (B or I) and gradient (B or W) task of every microbatch is cut at every layer, and a state
//   machine per root walks the root's calls in issue order, because a unit's sharded state
//   carries across microbatches (1F1B runs F1 before B0): a hook all-gathers only a sharded unit.
//
//   Forward (per call): the root pre-forward makes the all-gather streams wait for the compute
//   stream (the next all-gather depends on the compute task issued before the forward); the root
//   unit is gathered first, then each layer unit right before its piece. CPU run-ahead is the
//   prefetch: unit i+1's all-gather is issued right after piece i, so it overlaps piece i. Non-root
//   units are resharded after their piece with FULL_SHARD / HYBRID_SHARD (FSDP1) or
//   reshard_after_forward (FSDP2); the root never is.
//   Backward (per call, units from the top, the root's pre-backward first and its post-backward
//   last, as its hooks sit on the chunk's outputs and its embedding gradient comes last): the
//   pre-backward gathers the unit if it is sharded and prefetches the next unit in backward order
//   (the unit before it in post-forward order, where the root is last): FSDP1 BACKWARD_PRE and
//   FSDP2 there, FSDP1 BACKWARD_POST in the post-backward hook after the reshard instead, NONE not
//   at all. The post-backward reshards (FSDP2 always; FSDP1 when syncing or with a strategy that
//   reshards after forward: _should_free_in_backward) and, when syncing, reduce-scatters the
//   unit's padded gradient on the shard group, waiting for the piece; HSDP then all-reduces the
//   shard over the replicate group (skipped for a replicate group of one rank: it moves nothing).
//   Gradient sync: torch.distributed.pipelining turns gradient sync off for every backward but the
//   last one the stage runs (set_requires_gradient_sync; SyncContext::last_gradient_microbatch:
//   microbatch M−1 except where a schedule runs backwards from the highest microbatch down, as
//   looped BFS does), so only that one reduces; FSDP1 is modelled the same way (its no_sync).
//   PyTorch ≥ 2.6 instead keeps units unsharded after every backward and issues all of a stage's
//   reduce-scatters after its last backward; we follow the per-unit hooks. The final callback makes
//   the compute stream wait for every reduction of the chunk: the next compute task after the
//   chunk's last backward and the optimizer step depend on them.
//
//   Limits: FSDP1's rate limiter queues a free event (the unit's last piece) per reshard that
//   frees, and every _unshard call (pre-forward, pre-backward unless prefetched, prefetch) first
//   blocks the host on the oldest one when two are queued (a HostWait). FSDP2 has no host
//   limiter: an all-gather waits for the copy-out of the previous one (issued on the compute
//   stream right before that unit's first piece: we depend on the compute task issued before it),
//   so at most two all-gather outputs are alive; and the compute stream waits for the previous
//   reduce-scatter before the next copy-in (the compute task after the hook depends on it), so at
//   most one is pending. FSDP1's pre-hooks make the compute stream wait for its unshard stream
//   (the root's last all-gather); FSDP2's for the unit's own all-gather.
//
//   Memory: each all-gather allocates the unit's unsharded parameters (padded·param_bytes), used
//   by every piece that runs while the unit stays unsharded and freed after its last one.
//   Unsharded gradients, copy-in/copy-out staging and casts are not modelled. Fidelity limits:
//   the embedding and head run inside the first and last layer's pieces, so the root's compute
//   cannot start before the first layer unit's all-gather; with split backward the unit is
//   gathered for I and resharded after W.

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/sync/bucket_plan.h"
#include "metron/sync/bucketing.h"
#include "sync_passes.h"

namespace metron::sync::detail {
namespace {

using ir::TaskId;

struct FsdpConfig {
  bool fsdp2 = false;
  std::int32_t shard = 1;             // ranks in a shard group
  std::int32_t replicate = 1;         // HSDP replicate group size
  bool hybrid = false;                // shard group kDataIntra + replicate group kDataInter
  bool reshard_after_forward = true;  // non-root units
  bool free_unsynced = true;          // reshard after a backward that does not sync
  bool limit_all_gathers = false;     // FSDP1's host-blocking rate limiter
  BackwardPrefetch prefetch = BackwardPrefetch::kPre;
  std::int64_t param_bytes = 2;
  std::int64_t grad_bytes = 2;
  std::string name;  // "fsdp1" / "fsdp2", for labels
};

FsdpConfig make_config(const SyncContext& ctx, const SyncOptions& o) {
  FsdpConfig c;
  c.fsdp2 = o.policy == SyncPolicy::kFsdp2;
  c.name = c.fsdp2 ? "fsdp2" : "fsdp1";
  const std::string where = "sync policy " + c.name + ": ";
  if (c.fsdp2) {
    if (o.fsdp_sharding == FsdpSharding::kShardGradOp)
      throw InvalidConfig(where + "SHARD_GRAD_OP is FSDP1's; use reshard_after_forward = false");
    if (o.backward_prefetch != BackwardPrefetch::kPre || !o.limit_all_gathers)
      throw InvalidConfig(where + "backward_prefetch and limit_all_gathers are FSDP1's options");
    c.hybrid = o.hsdp_shard_size.has_value();
    c.reshard_after_forward = o.reshard_after_forward;
  } else {
    if (!o.reshard_after_forward)
      throw InvalidConfig(where + "reshard_after_forward is FSDP2's; use SHARD_GRAD_OP");
    c.hybrid = o.fsdp_sharding == FsdpSharding::kHybridShard;
    if (o.hsdp_shard_size && !c.hybrid)
      throw InvalidConfig(where + "hsdp_shard_size needs fsdp_sharding HYBRID_SHARD");
    c.reshard_after_forward = o.fsdp_sharding != FsdpSharding::kShardGradOp;
    c.free_unsynced = c.reshard_after_forward;
    c.limit_all_gathers = o.limit_all_gathers;
    c.prefetch = o.backward_prefetch;
  }
  // add_sync_policy checked that the shard size divides the data-parallel size.
  c.shard = fsdp_shard_size(ctx.input(), o);
  c.replicate = ctx.input().data_parallel / c.shard;
  c.param_bytes = ctx.input().param_bytes;
  c.grad_bytes = ctx.input().grad_bytes;
  return c;
}

// A rank's compute tasks in issue order: each one's neighbours on its own stream.
class StreamNeighbours {
 public:
  StreamNeighbours(SyncContext& ctx, ir::RankId rank) {
    std::unordered_map<std::int32_t, TaskId> last;  // by stream
    const std::vector<TaskId> order = ctx.compute_order(rank);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const TaskId t = order[i];
      position_[t.value()] = static_cast<std::int32_t>(i);
      TaskId& prev = last[ctx.builder().data().tasks[t.index()].stream.value()];
      if (prev.valid()) {
        prev_[t.value()] = prev;
        next_[prev.value()] = t;
      }
      prev = t;
    }
  }
  [[nodiscard]] TaskId prev(TaskId t) const { return find(prev_, t); }
  [[nodiscard]] TaskId next(TaskId t) const { return find(next_, t); }
  [[nodiscard]] std::int32_t position(TaskId t) const { return position_.at(t.value()); }

 private:
  static TaskId find(const std::unordered_map<std::int32_t, TaskId>& m, TaskId t) {
    const auto it = m.find(t.value());
    return it == m.end() ? TaskId{} : it->second;
  }
  std::unordered_map<std::int32_t, TaskId> prev_, next_;
  std::unordered_map<std::int32_t, std::int32_t> position_;
};

// One forward or backward of a chunk as its hooks see it: a forward has `pre` pieces only; a
// backward B has both (the same pieces); a split backward is two calls, I (pre) and W (post).
struct Call {
  std::int32_t microbatch = 0;
  bool forward = false;
  std::vector<TaskId> pre;   // forward, or backward-start pieces, in execution order
  std::vector<TaskId> post;  // gradient pieces, in execution order
  std::int32_t position = 0;
  std::size_t root = 0;  // which of the rank's roots
};

struct Unit {
  Bucket bucket;
  bool root = false;
  std::int32_t layer = 0;  // layer units
  std::int32_t id = 0;     // tag: rank-wide unit number
  bool unsharded = false;
  ir::BufferId buffer;
  TaskId fresh_ag;                // FSDP2: an all-gather not yet waited for
  bool prefetched = false;        // FSDP1's handle._prefetched (cleared when freed)
  bool pre_backward_ran = false;  // in the current backward
};

// Where a hook's tasks go in issue order.
struct Anchor {
  TaskId task;
  bool after = false;
};

// One root's state machine (Note [fsdp sync]).
class RootPass {
 public:
  RootPass(SyncContext& ctx, const FsdpConfig& config, const StreamNeighbours& neighbours,
           ir::RankId rank, std::int32_t chunk, std::vector<Unit> units, std::int32_t syncing_mb)
      : ctx_(ctx),
        cfg_(config),
        nb_(neighbours),
        rank_(rank),
        chunk_(chunk),
        syncing_mb_(syncing_mb),
        units_(std::move(units)) {
    for (std::size_t i = 0; i < units_.size(); ++i) {
      if (!units_[i].root) post_forward_order_.push_back(i);
    }
    if (!units_.empty() && units_.front().root) post_forward_order_.push_back(0);
  }

  void run(const Call& call) {
    mb_ = call.microbatch;
    if (call.forward) {
      forward(call);
    } else {
      backward(call);
    }
  }

 private:
  [[nodiscard]] Unit* root() { return !units_.empty() && units_[0].root ? &units_[0] : nullptr; }
  [[nodiscard]] bool syncing() const { return mb_ == syncing_mb_; }
  [[nodiscard]] lowering::GroupKind shard_kind() const {
    return cfg_.hybrid ? lowering::GroupKind::kDataIntra : lowering::GroupKind::kData;
  }

  void forward(const Call& call);
  void backward(const Call& call);
  // Layer units from the top (backward) or bottom, grouped by the piece that runs them.
  [[nodiscard]] std::vector<std::vector<Unit*>> layer_groups(const std::vector<TaskId>& pieces,
                                                             bool from_top);
  void pre_hook(Unit& u, TaskId piece, const char* pass);
  void unshard(Unit& u, Anchor at, const std::string& why);
  void reshard(Unit& u, TaskId last_user);
  void pre_backward(Unit& u, TaskId piece);
  void post_backward(Unit& u, TaskId piece);
  void prefetch(const Unit& from, Anchor at);
  void reduce(const Unit& u, TaskId piece);
  void final_callback(TaskId last_piece);

  void place(Anchor at, TaskId task) {
    if (at.after) {
      ctx_.issue_after(at.task, task);
    } else {
      ctx_.issue_before(at.task, task);
    }
  }
  void add_dep(TaskId before, TaskId after) {
    if (!before.valid() || !after.valid()) return;
    const std::vector<TaskId>& deps = ctx_.builder().data().tasks[after.index()].deps;
    if (std::find(deps.begin(), deps.end(), before) == deps.end())
      ctx_.builder().precede(before, after);
  }
  void use(const Unit& u, TaskId piece) {
    if (u.unsharded) ctx_.use(piece, u.buffer);
  }
  [[nodiscard]] std::string unit_text(const Unit& u) const {
    return "unit " + std::to_string(u.id) +
           (u.root ? std::string(" (root)") : " (layer " + std::to_string(u.layer) + ")");
  }

  SyncContext& ctx_;
  const FsdpConfig& cfg_;
  const StreamNeighbours& nb_;
  ir::RankId rank_;
  std::int32_t chunk_ = 0;
  std::int32_t syncing_mb_ = -1;  // the backward that reduces: the last the chunk runs
  std::vector<Unit> units_;       // forward order, the root first
  std::vector<std::size_t> post_forward_order_;  // the root last
  std::int32_t mb_ = 0;
  TaskId stream_wait_;              // root pre-forward: all-gather streams wait for compute
  TaskId copy_out_;                 // FSDP2: the last copy-out not yet waited for
  TaskId last_ag_;                  // FSDP1: the unshard stream's last all-gather
  std::deque<TaskId> free_events_;  // FSDP1 limiter queue, oldest first
  TaskId last_rs_;                  // FSDP2: the pending reduce-scatter
  std::vector<TaskId> reductions_;  // of the syncing backward, for the final callback
};

std::vector<std::vector<Unit*>> RootPass::layer_groups(const std::vector<TaskId>& pieces,
                                                       bool from_top) {
  std::vector<std::vector<Unit*>> groups;
  TaskId current;
  const auto visit = [&](Unit& u) {
    if (u.root) return;
    const TaskId piece = ctx_.piece_with_layer(pieces, u.layer);
    if (groups.empty() || piece != current) groups.emplace_back();
    groups.back().push_back(&u);
    current = piece;
  };
  if (from_top) {
    std::for_each(units_.rbegin(), units_.rend(), visit);
  } else {
    std::for_each(units_.begin(), units_.end(), visit);
  }
  return groups;
}

void RootPass::forward(const Call& call) {
  stream_wait_ = nb_.prev(call.pre.front());
  if (Unit* r = root()) pre_hook(*r, call.pre.front(), "forward");
  for (const std::vector<Unit*>& group : layer_groups(call.pre, false)) {
    const TaskId piece = ctx_.piece_with_layer(call.pre, group.front()->layer);
    for (Unit* u : group) pre_hook(*u, piece, "forward");
    if (!cfg_.reshard_after_forward) continue;
    for (Unit* u : group) reshard(*u, piece);
  }
  if (Unit* r = root()) {
    for (TaskId piece : call.pre) use(*r, piece);
  }
}

void RootPass::backward(const Call& call) {
  const bool pre = !call.pre.empty();
  const bool post = !call.post.empty();
  Unit* r = root();
  if (pre) {
    for (Unit& u : units_) u.pre_backward_ran = false;
    if (r != nullptr) {
      pre_backward(*r, call.pre.front());
      for (TaskId piece : call.pre) use(*r, piece);
    }
  }
  for (const std::vector<Unit*>& group : layer_groups(pre ? call.pre : call.post, true)) {
    if (pre) {
      const TaskId piece = ctx_.piece_with_layer(call.pre, group.front()->layer);
      for (Unit* u : group) pre_backward(*u, piece);
    }
    if (post) {
      const TaskId piece = ctx_.piece_with_layer(call.post, group.front()->layer);
      for (Unit* u : group) post_backward(*u, piece);
    }
  }
  if (!post) return;
  if (r != nullptr) {
    for (TaskId piece : call.post) use(*r, piece);
    post_backward(*r, call.post.back());
  }
  if (syncing()) final_callback(call.post.back());
}

// A pre-forward or pre-backward hook: unshard (FSDP1: unless prefetched), make the compute
// stream wait for the gather, and read the unsharded parameters.
void RootPass::pre_hook(Unit& u, TaskId piece, const char* pass) {
  const std::string why = std::string("before ") + pass + " mb " + std::to_string(mb_);
  if (cfg_.fsdp2) {
    unshard(u, {piece}, why);
    if (u.fresh_ag.valid()) {  // wait_for_unshard: copy-out on the compute stream
      add_dep(u.fresh_ag, piece);
      copy_out_ = nb_.prev(piece);
      u.fresh_ag = TaskId{};
    }
  } else {
    if (!u.prefetched) unshard(u, {piece}, why);
    add_dep(last_ag_, piece);  // current_stream().wait_stream(unshard_stream)
  }
  use(u, piece);
}

void RootPass::unshard(Unit& u, Anchor at, const std::string& why) {
  if (cfg_.limit_all_gathers && free_events_.size() >= 2) {
    const TaskId oldest = free_events_.front();
    free_events_.pop_front();
    place(at, ctx_.host_wait(rank_, oldest,
                             cfg_.name + " rate limiter before the gather of " + unit_text(u)));
  }
  if (u.unsharded) return;
  const std::int64_t bytes = u.bucket.padded_numel * cfg_.param_bytes;
  CollectiveSpec spec{.kind = shard_kind(),
                      .op = ir::CollectiveOp::kAllGather,
                      .bytes = bytes,
                      .dtype = SyncContext::dtype_of(cfg_.param_bytes),
                      .bucket = u.id,
                      .chunk = chunk_,
                      .microbatch = mb_,
                      .label = cfg_.name + " AG " + unit_text(u) + " " + why,
                      .intra_size = cfg_.hybrid ? cfg_.shard : 0};
  if (stream_wait_.valid()) spec.deps.push_back(stream_wait_);
  if (copy_out_.valid() && copy_out_ != stream_wait_) spec.deps.push_back(copy_out_);
  stream_wait_ = copy_out_ = TaskId{};
  const TaskId ag = ctx_.collective(rank_, spec);
  place(at, ag);
  u.buffer = ctx_.allocate(ag, bytes, cfg_.name + " " + unit_text(u) + " unsharded");
  ctx_.use(ag, u.buffer);
  u.unsharded = true;
  u.fresh_ag = ag;
  last_ag_ = ag;
}

void RootPass::reshard(Unit& u, TaskId last_user) {
  if (!u.unsharded) return;
  u.unsharded = false;
  u.buffer = ir::BufferId{};
  u.fresh_ag = TaskId{};
  u.prefetched = false;
  if (cfg_.limit_all_gathers) free_events_.push_back(last_user);
}

void RootPass::pre_backward(Unit& u, TaskId piece) {
  u.pre_backward_ran = true;
  pre_hook(u, piece, "backward");
  if (cfg_.prefetch == BackwardPrefetch::kPre) prefetch(u, {piece});
}

void RootPass::post_backward(Unit& u, TaskId piece) {
  use(u, piece);
  if (syncing() || cfg_.fsdp2 || cfg_.free_unsynced) reshard(u, piece);
  if (cfg_.prefetch == BackwardPrefetch::kPost) prefetch(u, {piece, true});
  if (syncing()) reduce(u, piece);
}

// The next unit in backward order: the one before `from` in post-forward order.
void RootPass::prefetch(const Unit& from, Anchor at) {
  const auto self = static_cast<std::size_t>(&from - units_.data());
  const auto it = std::find(post_forward_order_.begin(), post_forward_order_.end(), self);
  if (it == post_forward_order_.begin() || it == post_forward_order_.end()) return;
  Unit& target = units_[*(it - 1)];
  if (target.pre_backward_ran || (!cfg_.fsdp2 && target.prefetched)) return;
  unshard(target, at,
          "prefetched at the " + std::string(at.after ? "post" : "pre") + "-backward of " +
              unit_text(from) + " mb " + std::to_string(mb_));
  target.prefetched = true;
}

void RootPass::reduce(const Unit& u, TaskId piece) {
  const ir::DType dtype = SyncContext::dtype_of(cfg_.grad_bytes);
  const std::string after = " after backward mb " + std::to_string(mb_);
  const TaskId rs = ctx_.collective(rank_, {.kind = shard_kind(),
                                            .op = ir::CollectiveOp::kReduceScatter,
                                            .bytes = u.bucket.padded_numel * cfg_.grad_bytes,
                                            .dtype = dtype,
                                            .bucket = u.id,
                                            .chunk = chunk_,
                                            .microbatch = mb_,
                                            .label = cfg_.name + " RS " + unit_text(u) + after,
                                            .deps = {piece},
                                            .intra_size = cfg_.hybrid ? cfg_.shard : 0});
  ctx_.issue_after(piece, rs);
  reductions_.push_back(rs);
  if (cfg_.fsdp2) {  // the compute stream waits for the previous reduce-scatter
    add_dep(last_rs_, nb_.next(piece));
    last_rs_ = rs;
  }
  if (!cfg_.hybrid || cfg_.replicate == 1) return;
  const TaskId ar =
      ctx_.collective(rank_, {.kind = lowering::GroupKind::kDataInter,
                              .op = ir::CollectiveOp::kAllReduce,
                              .bytes = u.bucket.padded_numel / cfg_.shard * cfg_.grad_bytes,
                              .dtype = dtype,
                              .bucket = u.id,
                              .chunk = chunk_,
                              .microbatch = mb_,
                              .label = cfg_.name + " AR " + unit_text(u) + " shard" + after,
                              .deps = {rs},
                              .intra_size = cfg_.shard});
  ctx_.issue_after(piece, ar);
  reductions_.push_back(ar);
}

void RootPass::final_callback(TaskId last_piece) {
  const TaskId next = nb_.next(last_piece);
  const TaskId step = ctx_.optimizer_step(rank_);
  for (TaskId r : reductions_) {
    add_dep(r, next);
    add_dep(r, step);
  }
  reductions_.clear();
  last_rs_ = TaskId{};
}

/// The chunk's units as policy_buckets plans them (fsdp_units), ids included.
std::vector<Unit> make_units(const ChunkParams& params, const std::vector<PlannedBucket>& planned,
                             std::int32_t chunk) {
  ChunkBuckets buckets = chunk_buckets(planned, chunk);
  std::vector<Unit> units;
  std::int32_t id = buckets.first_id;
  for (Bucket& b : buckets.buckets) {
    Unit u{.bucket = std::move(b)};
    u.root = params.tensors[static_cast<std::size_t>(u.bucket.tensors.front())].outside_layers;
    u.layer = u.bucket.lowest_layer;
    u.id = id++;
    units.push_back(std::move(u));
  }
  return units;
}

std::vector<std::int32_t> layer_cuts(const std::vector<Unit>& units) {
  std::vector<std::int32_t> cuts;
  for (const Unit& u : units) {
    if (!u.root) cuts.push_back(u.layer);
  }
  return cuts;
}

// The chunk's split requests: forward, backward-start and gradient task of every microbatch.
struct ChunkRequests {
  std::vector<std::array<std::int32_t, 3>> slots;  // per microbatch: request index or -1
};

ChunkRequests request_splits(const ChunkTasks& tasks, std::int32_t microbatches,
                             const std::vector<std::int32_t>& cuts,
                             std::vector<lowering::SplitRequest>& requests) {
  ChunkRequests out;
  const auto at = [](const std::vector<TaskId>& v, std::int32_t mb) {
    return static_cast<std::size_t>(mb) < v.size() ? v[static_cast<std::size_t>(mb)] : TaskId{};
  };
  for (std::int32_t mb = 0; mb < microbatches; ++mb) {
    std::array<std::int32_t, 3> slot{-1, -1, -1};
    const std::array<TaskId, 3> ids{at(tasks.forward, mb), at(tasks.backward_start, mb),
                                    at(tasks.gradient, mb)};
    for (std::size_t k = 0; k < ids.size(); ++k) {
      if (!ids[k].valid()) continue;
      slot[k] = static_cast<std::int32_t>(requests.size());
      requests.push_back({.task = ids[k], .cuts = cuts});
    }
    out.slots.push_back(slot);
  }
  return out;
}

// Appends the root's calls (unsorted).
void make_calls(const ChunkRequests& req, const std::vector<std::vector<TaskId>>& pieces,
                const StreamNeighbours& nb, std::size_t root, std::vector<Call>& calls) {
  const auto of = [&](std::int32_t slot) {
    return slot < 0 ? std::vector<TaskId>{} : pieces[static_cast<std::size_t>(slot)];
  };
  const auto add = [&](Call call) {
    call.position = nb.position(call.pre.empty() ? call.post.front() : call.pre.front());
    call.root = root;
    calls.push_back(std::move(call));
  };
  for (std::size_t mb = 0; mb < req.slots.size(); ++mb) {
    const auto m = static_cast<std::int32_t>(mb);
    const auto& slot = req.slots[mb];
    if (slot[0] >= 0) add({.microbatch = m, .forward = true, .pre = of(slot[0])});
    std::vector<TaskId> start = of(slot[1]);
    std::vector<TaskId> grad = of(slot[2]);
    if (!start.empty() && !grad.empty() && start.back() == grad.back()) {
      add({.microbatch = m, .pre = std::move(start), .post = std::move(grad)});
      continue;
    }
    if (!start.empty()) add({.microbatch = m, .pre = std::move(start)});
    if (!grad.empty()) add({.microbatch = m, .post = std::move(grad)});
  }
}

}  // namespace

void add_fsdp_sync(SyncContext& ctx, const SyncOptions& options) {
  const FsdpConfig config = make_config(ctx, options);
  struct Root {
    ir::RankId rank;
    std::int32_t chunk = 0;
    std::vector<Unit> units;
    ChunkRequests requests;
    std::int32_t syncing_mb = -1;
  };
  std::vector<Root> roots;
  std::vector<lowering::SplitRequest> requests;
  const SyncPlan& planned = ctx.plan(options);
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r) {
    const ir::RankId rank{r};
    for (std::int32_t c = 0; c < ctx.num_chunks(rank); ++c) {
      // Before the split adds pieces: the chunk's last backward in issue order.
      Root root{.rank = rank, .chunk = c, .syncing_mb = ctx.last_gradient_microbatch(rank, c)};
      root.units = make_units(ctx.params(rank)[static_cast<std::size_t>(c)],
                              planned[static_cast<std::size_t>(ctx.pipeline_rank(rank))], c);
      if (root.units.empty()) continue;
      root.requests = request_splits(ctx.chunk_tasks(rank, c), ctx.num_microbatches(),
                                     layer_cuts(root.units), requests);
      roots.push_back(std::move(root));
    }
  }
  const std::vector<std::vector<TaskId>> pieces = ctx.split(requests);
  // Each rank's calls in issue order across its roots (interleaved chunks alternate), so tasks are
  // created in the order they are issued.
  for (std::int32_t r = 0; r < ctx.num_ranks(); ++r) {
    const ir::RankId rank{r};
    const StreamNeighbours nb(ctx, rank);
    std::vector<RootPass> passes;
    std::vector<Call> calls;
    for (Root& root : roots) {
      if (root.rank != rank) continue;
      make_calls(root.requests, pieces, nb, passes.size(), calls);
      passes.emplace_back(ctx, config, nb, rank, root.chunk, std::move(root.units),
                          root.syncing_mb);
    }
    std::stable_sort(calls.begin(), calls.end(),
                     [](const Call& a, const Call& b) { return a.position < b.position; });
    for (const Call& call : calls) passes[call.root].run(call);
  }
}

}  // namespace metron::sync::detail
