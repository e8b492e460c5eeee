// ZeRO-3 (docs/SYNC_POLICIES.md §5, Note [zero lowering] in sync_zero.h): per-layer parameter
// gathers with DeepSpeed's prefetch, release and reuse distance, gradient reduce-scatters per IPG
// bucket, and the persistent parameters' gather after the step.

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
#include "metron/sync/bucket_plan.h"
#include "sync_zero.h"

namespace metron::sync::detail::zero {
namespace {

/// One module: the tensors of one layer of a chunk.
struct Module {
  std::int32_t layer = 0;
  std::int64_t numel = 0;           ///< all its tensors: what the reuse distance counts
  std::int64_t gathered_numel = 0;  ///< of its partitioned (non-persistent) tensors
  std::int64_t gathered_bytes = 0;  ///< their all-gather output, each tensor padded to d
  std::int32_t gathered_tensors = 0;
};

struct Zero3Chunk {
  std::vector<Module> modules;  ///< by ascending layer
  std::vector<ReduceBucket> buckets;
  /// The backward the chunk runs last (SyncContext::last_gradient_microbatch): the step waits
  /// for its reduce-scatters.
  std::int32_t last_mb = -1;
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
  /// The calls a collective over `tensors` tensors stands for: one per tensor under
  /// zero_per_tensor_collectives (Note [zero per-tensor collectives]), else one coalesced call.
  [[nodiscard]] std::int32_t calls(std::int32_t tensors) const {
    return options_.zero_per_tensor_collectives ? std::max(tensors, 1) : 1;
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
  [[nodiscard]] PlannedBucket gathered(std::int32_t c,
                                       const std::vector<std::int32_t>& modules) const;
  void on_gradient_piece(TaskId piece, Work w, TaskId next);
  void synchronize(TaskId piece, const std::string& why);
  void gather_persistent(TaskId step);

  /// The tag of the rank's reduce-scatters of `chunk`'s bucket `index`, or of its after-step
  /// gather (index -1), as policy_buckets numbers them.
  [[nodiscard]] std::int32_t planned_id(std::int32_t c, std::int32_t index) const {
    const auto& planned = planned_[static_cast<std::size_t>(ctx_.pipeline_rank(rank_))];
    if (index >= 0) return chunk_buckets(planned, c).first_id + index;
    return planned.empty() ? 0 : planned.back().id;
  }
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
  std::vector<std::vector<Zero3Chunk>> chunks_;      // [rank][chunk]
  std::vector<std::vector<PlannedBucket>> planned_;  // [pipeline rank]: the tags
  // The coordinator of the rank being walked.
  RankId rank_;
  std::map<std::pair<std::int32_t, std::int32_t>, Resident> resident_;  // (chunk, module)
  std::int64_t available_ = 0;  ///< elements resident or in flight (max_live_parameters)
  EventThrottle fetches_;
  std::map<Work, std::int32_t> cursor_;  ///< the trace's prefetch queue position
  std::vector<bool> trace_complete_;     ///< by chunk
  std::map<Work, Reduction> reductions_;
  std::map<std::pair<Role, Work>, std::vector<TaskId>> piece_of_module_;
  // zero_synchronous_fetch: the compute piece before the one being walked, and the collectives
  // issued since the host last synchronised.
  TaskId previous_piece_;
  std::vector<TaskId> unsynchronised_;
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
      ++m.gathered_tensors;
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
      Zero3Chunk& plan = chunks_[rank.index()].emplace_back(
          plan_chunk(ctx_.params(rank)[static_cast<std::size_t>(c)]));
      plan.last_mb = ctx_.last_gradient_microbatch(rank, c);  // before the split
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
  planned_ = ctx_.plan(options_);
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
  previous_piece_ = {};
  unsynchronised_.clear();
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
    previous_piece_ = p;
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
  if (!r.waited && options_.zero_synchronous_fetch) {
    // _synchronize_communication: the gather, then the whole device.
    ctx_.issue_before(piece, ctx_.host_wait(rank_, r.gather, "zero3 fetch " + step_text(w, step)));
    std::erase(unsynchronised_, r.gather);
    synchronize(piece, "after fetch " + step_text(w, step));
    r.waited = true;  // AVAILABLE: a later fetch of it (a reused layer) synchronises nothing
  } else if (!r.waited) {
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
  std::int32_t tensors = 0;
  for (std::int32_t i : modules) {
    bytes += module(w.chunk, i).gathered_bytes;
    tensors += module(w.chunk, i).gathered_tensors;
  }
  const std::int32_t tag = ctx_.add_planned(rank_, gathered(w.chunk, modules));
  // _allgather_param synchronises the device before each tensor's gather.
  if (options_.zero_synchronous_fetch) synchronize(piece, "before " + label);
  const TaskId ag =
      ctx_.collective(rank_, {.kind = lowering::GroupKind::kData,
                              .op = ir::CollectiveOp::kAllGather,
                              .bytes = bytes,
                              .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
                              .bucket = tag,
                              .chunk = w.chunk,
                              .microbatch = w.microbatch,
                              .label = std::move(label),
                              .count = calls(tensors)});
  ctx_.issue_before(piece, ag);
  if (options_.zero_synchronous_fetch) unsynchronised_.push_back(ag);
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
        ctx_.collective(rank_, {.kind = lowering::GroupKind::kData,
                                .op = ir::CollectiveOp::kReduceScatter,
                                .bytes = s.padded * ctx_.input().grad_bytes,
                                .dtype = SyncContext::dtype_of(ctx_.input().grad_bytes),
                                .bucket = planned_id(w.chunk, static_cast<std::int32_t>(red.next)),
                                .chunk = w.chunk,
                                .microbatch = w.microbatch,
                                .label = "zero3 RS " + name + " (" + layers_text(s.low, s.high) +
                                         ") " + (epilogue ? "epilogue" : "hook") + mb,
                                .deps = {piece},
                                .count = calls(s.tensors)});
    ctx_.issue_after(piece, rs);
    if (options_.zero_synchronous_fetch) unsynchronised_.push_back(rs);
    red.throttle.record(rs);
    red.last = rs;
    if (!cfg_.overlap) depend(b, rs, next);  // the reduce stream is the compute's
    if (w.microbatch == chunk(w.chunk).last_mb) depend(b, rs, step);
  }
  if (piece == pieces.back() && red.last.valid()) {
    ctx_.issue_after(piece, ctx_.host_wait(rank_, red.last, "zero3 epilogue synchronize" + mb));
  }
}

// torch.cuda.synchronize() before `piece`: the host waits for the compute before it and every
// collective issued since it last synchronised (zero_synchronous_fetch). A HostWait on the
// previous piece already waited for adds nothing, so it is issued once.
void Zero3::synchronize(TaskId piece, const std::string& why) {
  const std::string label = "zero3 synchronize " + why;
  if (previous_piece_.valid()) {
    ctx_.issue_before(piece, ctx_.host_wait(rank_, previous_piece_, label));
    previous_piece_ = {};
  }
  for (TaskId c : unsynchronised_) ctx_.issue_before(piece, ctx_.host_wait(rank_, c, label));
  unsynchronised_.clear();
}

// What a gather of `modules` carries, for the plan: their partitioned tensors, module by module,
// in DeepSpeed's per-tensor partitions.
PlannedBucket Zero3::gathered(std::int32_t c, const std::vector<std::int32_t>& modules) const {
  const std::vector<ParamTensor>& tensors = ctx_.params(rank_)[static_cast<std::size_t>(c)].tensors;
  const std::int64_t d = ctx_.input().data_parallel;
  std::vector<std::int32_t> members;
  for (const std::int32_t i : modules) {
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].layer == module(c, i).layer && partitioned(tensors[t].numel)) {
        members.push_back(static_cast<std::int32_t>(t));
      }
    }
  }
  Bucket b = make_bucket(tensors, std::move(members));
  b.padded_numel = 0;
  for (const std::int32_t t : b.tensors) {
    b.padded_numel += round_up(tensors[static_cast<std::size_t>(t)].numel, d);
  }
  return {.chunk = c, .bucket = std::move(b), .per_tensor_partitions = true};
}

// _post_step: the updated persistent parameters all-gathered (all_gather_coalesced layout).
void Zero3::gather_persistent(TaskId step) {
  std::int64_t bytes = 0;
  std::int32_t tensors = 0;
  for (const ChunkParams& c : ctx_.params(rank_)) {
    for (const ParamTensor& t : c.tensors) {
      if (!partitioned(t.numel)) {
        bytes += round_up(t.numel, ctx_.input().data_parallel) * ctx_.input().param_bytes;
        ++tensors;
      }
    }
  }
  if (bytes == 0) return;
  const TaskId ag =
      ctx_.collective(rank_, {.kind = lowering::GroupKind::kData,
                              .op = ir::CollectiveOp::kAllGather,
                              .bytes = bytes,
                              .dtype = SyncContext::dtype_of(ctx_.input().param_bytes),
                              .bucket = planned_id(0, -1),
                              .chunk = ctx_.num_chunks(rank_) == 1 ? 0 : -1,
                              .label = "zero3 AG persistent params after step",
                              .deps = {step},
                              .count = calls(tensors)});
  ctx_.issue_after(step, ag);
}

}  // namespace

void add_zero3_sync(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options) {
  Zero3(ctx, cfg, options).run();
}

}  // namespace metron::sync::detail::zero
