#pragma once
// add_zero_sync: DeepSpeed ZeRO stages 1, 2 and 3 (docs/SYNC_POLICIES.md §5). Note [zero lowering]:
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
//     - zero_synchronous_fetch (DeepSpeed v0.3.13 to v0.5.x: torch.cuda.synchronize() in
//       _allgather_param before each tensor's all-gather, and in _synchronize_communication at
//       the end of every fetch that gathered or found its tensors in flight): before each AG
//       and after a fetch's first wait on its AG, the host waits for the rank's previous
//       compute piece and every collective issued since the last such synchronisation
//       (HostWaits, skipped when they add nothing). Gathers then run at most one prefetch ahead
//       of the compute, and a backward's reduce-scatters are waited for at the next fetch.
//     - zero_per_tensor_collectives: Note [zero per-tensor collectives].
//     - after the step: a synchronous AG of the persistent tensors, when there are any (also in
//       warm-up, whose first gathers of them are not modelled).
//   Resident layers are per rank and carry across microbatches (under pipelining a layer kept
//   for mb 0's backward is found resident by mb 1's forward), while prefetch and reuse distance
//   look at one (chunk, microbatch) trace: DeepSpeed runs ZeRO-3 without pipelining, where this is
//   exact.
//
//   Buckets are per chunk (each chunk's backward flushes its own). Tags: bucket = IPG bucket index
//   within the chunk; for ZeRO-3 gathers the first gathered layer; 0 (1 for the expert group) for
//   the post-step gathers, whose chunk is -1 when the rank holds several. ZeRO-3's collectives
//   take the plan's ids instead (bucket_plan.h: bucket k of chunk c is the rank's chunk-0..c−1
//   bucket count + k, the post-step gather the last id, then each per-layer gather the next
//   free id as the walk issues it, SyncContext::add_planned), by which the model payload finds
//   the tensors each carries.
//
//   Note [zero per-tensor collectives]: DeepSpeed through v0.5.x gathered and reduced one
//   tensor per call. partition_parameters.py's _allgather_param (v0.3.13, line 596) and
//   _reduce_scatter_gradient (line 733) each build d narrow views of a flat buffer in a Python
//   loop and hand the list to c10d, whose NCCL all_gather / reduce_scatter copies between the
//   flat buffer and each of the d views (one copy each); _post_step re-gathers every persistent
//   tensor the same way. With zero_per_tensor_collectives a ZeRO-3 gather, reduce-scatter or
//   post-step gather stands for one call per tensor it holds (ir::Collective::count), and the
//   step's pricing charges the host's O(d) work per call (Note [per-tensor host work] in
//   scenario/src/step_builder.cc).
//
//   The pieces both passes share (configuration, pieces, IPG buckets, event throttling) are
//   here; ZeRO-1/2 are in sync_zero12.cc, ZeRO-3 in sync_zero3.cc, add_zero_sync in
//   sync_zero.cc.

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

#include "metron/sync/bucketing.h"
#include "sync_passes.h"

namespace metron::sync::detail::zero {

using ir::BufferId;
using ir::RankId;
using ir::TaskId;

constexpr std::int64_t kDefaultReduceBucket = kZeroDefaultReduceBucket;
/// DeepSpeed's max_ongoing_fetch_events and max_param_reduce_events.
constexpr std::size_t kMaxOutstandingEvents = 2;

inline std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

inline std::string layers_text(std::int32_t low, std::int32_t high) {
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

/// The options of `o`, resolved; throws InvalidConfig for a non-ZeRO policy or a bad bucket size.
ZeroConfig resolve(const SyncContext& ctx, const SyncOptions& o);

/// before → after, unless either is invalid or the edge exists.
void depend(ir::GraphBuilder& b, TaskId before, TaskId after);

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
  std::vector<lowering::SplitRequest> requests_;
  std::map<Key, std::vector<TaskId>> pieces_;
  std::unordered_map<TaskId, std::vector<std::pair<Role, Work>>> roles_;
  std::vector<std::pair<Role, Work>> none_;
};

/// The compute task issued after each one on its rank (invalid for the last).
std::unordered_map<TaskId, TaskId> next_compute(const std::vector<TaskId>& order);

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
  std::int32_t tensors = 0;  ///< how many parameter tensors it holds
  std::int32_t low = 0;      ///< lowest layer: its backward completes the bucket
  std::int32_t high = 0;
};

/// zero_ipg_buckets in gradient-ready order, or in registration order (`registration_order`).
std::vector<ReduceBucket> reduce_buckets(const std::vector<ParamTensor>& tensors,
                                         std::int64_t bucket, bool registration_order,
                                         std::int64_t d);

/// The piece after which each bucket's collective is issued: the one running its lowest layer,
/// the whole backward's last piece for the last bucket (the epilogue).
std::vector<TaskId> hook_pieces(const SyncContext& ctx, const std::vector<TaskId>& pieces,
                                const std::vector<ReduceBucket>& buckets);

/// ZeRO-1 or ZeRO-2 (sync_zero12.cc).
void add_zero12_sync(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options);
/// ZeRO-3 (sync_zero3.cc).
void add_zero3_sync(SyncContext& ctx, const ZeroConfig& cfg, const SyncOptions& options);

}  // namespace metron::sync::detail::zero
