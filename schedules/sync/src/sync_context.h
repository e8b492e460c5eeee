#pragma once
// What every sync-policy pass (sync_policy.h) does to a step besides deciding its collectives:
// finding the compute tasks that fire hooks, splitting them, creating the data-parallel groups and
// their streams, numbering collectives, and placing new tasks in host issue order. One
// SyncContext per add_sync_policy call:
//
//   SyncContext ctx(builder, input);
//   auto pieces = ctx.split({...});                 // once, before placing anything
//   TaskId rs = ctx.collective(rank, {.kind = GroupKind::kData, .op = kReduceScatter, ...});
//   ctx.issue_after(pieces[0][1], rs);              // the hook point
//   ctx.finish();                                   // rebuilds every issue order once
//
// Streams: one per group kind and rank, named like the kind ("dp", "edp", "dp-intra", ...),
// because ProcessGroupNCCL runs every collective of a communicator on that communicator's one
// internal stream (docs/SYNC_POLICIES.md §1.3): collectives of one group serialise in issue order
// whichever user stream issued them; different groups overlap.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/lowering/comm_groups.h"
#include "metron/lowering/compute_split.h"
#include "metron/sync/sync_policy.h"

namespace metron::sync::detail {

/// The compute tasks of one chunk of one rank, by microbatch (invalid ids where absent).
struct ChunkTasks {
  std::vector<ir::TaskId> forward;
  /// The task after which the weight gradients of the microbatch exist: W when the backward is
  /// split, else B (or DualPipe's F&B unit holding that backward).
  std::vector<ir::TaskId> gradient;
  /// The task that starts the microbatch's backward (B or I; the unit for DualPipe).
  std::vector<ir::TaskId> backward_start;
};

/// Tags and wiring of one inserted collective.
struct CollectiveSpec {
  lowering::GroupKind kind = lowering::GroupKind::kData;
  ir::CollectiveOp op = ir::CollectiveOp::kAllReduce;
  std::int64_t bytes = 0;
  ir::DType dtype = ir::DType::kBf16;
  std::int32_t bucket = -1;
  std::int32_t chunk = -1;
  std::int32_t microbatch = -1;
  std::string label;
  std::vector<ir::TaskId> deps;    ///< same-rank tasks it waits for (stream waits)
  std::int32_t root_replica = -1;  ///< reduce / broadcast: the owning data-parallel rank
  /// kDataIntra / kDataInter (and expert ones): ranks per intra group (instance or HSDP shard).
  std::int32_t intra_size = 0;
  /// A stream other than the group's own: a system that issues several groups' collectives
  /// synchronously from one side stream (Megatron's optimizer instances), which serialises them.
  std::string stream;
  /// How many back-to-back calls of bytes/count each the task stands for (ir::Collective).
  std::int32_t count = 1;
  /// A group across pipeline ranks instead of replicas (DualPipe's stage copies, Megatron's
  /// embedding group): these pipeline ranks of the rank's own replica, the group named
  /// kind + group_index.
  std::vector<std::int32_t> pipeline_members;
  std::int32_t group_index = 0;
};

class SyncContext {
 public:
  /// Which compute tasks the context finds: every chunk's by microbatch and the optimizer steps
  /// (what a policy's hooks fire on), or none, for a pass that only adds collectives before the
  /// step (a walk over every task the planner would pay on each step it builds).
  enum class ComputeIndex : std::uint8_t { kBuild, kSkip };
  SyncContext(ir::GraphBuilder& builder, const SyncInput& input,
              ComputeIndex index = ComputeIndex::kBuild);

  [[nodiscard]] ir::GraphBuilder& builder() { return builder_; }
  [[nodiscard]] const SyncInput& input() const { return input_; }
  [[nodiscard]] std::int32_t num_ranks() const { return num_ranks_; }
  [[nodiscard]] std::int32_t replicas() const { return replicas_; }
  [[nodiscard]] std::int32_t pipeline_rank(ir::RankId rank) const;
  [[nodiscard]] std::int32_t num_microbatches() const {
    require_index();
    return microbatches_;
  }
  /// The rank's chunks' parameters (input().params of its pipeline rank).
  [[nodiscard]] const std::vector<ChunkParams>& params(ir::RankId rank) const;
  [[nodiscard]] std::int32_t num_chunks(ir::RankId rank) const;
  [[nodiscard]] const ChunkTasks& chunk_tasks(ir::RankId rank, std::int32_t chunk) const;
  /// The rank's optimizer step, or an invalid id.
  [[nodiscard]] ir::TaskId optimizer_step(ir::RankId rank) const;
  /// The rank's compute tasks in issue order (after split()).
  [[nodiscard]] std::vector<ir::TaskId> compute_order(ir::RankId rank) const;
  /// The microbatch of the chunk's gradient task the rank issues last, or -1 without any: where
  /// a system that skips the sync on all but the last backward (DDP's no_sync, Megatron's
  /// grad-sync switch, fairscale's) reduces. That is the last backward executed, not the
  /// highest microbatch: PyTorch's pipelining counts the backwards a stage has run, and a
  /// looped-BFS schedule runs them from the highest microbatch down.
  [[nodiscard]] std::int32_t last_gradient_microbatch(ir::RankId rank, std::int32_t chunk) const;
  /// The microbatch of the chunk's forward the rank issues first, or -1 without any: where a
  /// forward pre-hook fires first in a step (Megatron's parameter-gather chain). Not always
  /// microbatch 0: DualPipe's second direction runs microbatches m/2 to m-1.
  [[nodiscard]] std::int32_t first_forward_microbatch(ir::RankId rank, std::int32_t chunk) const;

  /// Splits compute tasks (compute_split.h); call before placing anything.
  std::vector<std::vector<ir::TaskId>> split(const std::vector<lowering::SplitRequest>& requests);
  /// Of `pieces` (one task's, in execution order), the one that runs `layer`, else the last.
  [[nodiscard]] ir::TaskId piece_with_layer(const std::vector<ir::TaskId>& pieces,
                                            std::int32_t layer) const;

  /// A collective on the group of `spec.kind` joining `rank` with its replicas, on that group's
  /// stream. Not placed yet: see issue_*; finish() numbers it in issue order.
  ir::TaskId collective(ir::RankId rank, const CollectiveSpec& spec);
  /// A collective of the rank between its backward and its optimizer step: it waits for what
  /// the step waits for and for the last compute of each stream issued before the step (which
  /// the step follows through its stream's order, and a collective on a stream of its own does
  /// not), is issued right before the step, and every optimizer task of the rank waits for it.
  /// Throws InvalidConfig naming `what` when the rank has no optimizer step. `spec.deps` is
  /// ignored.
  ir::TaskId collective_before_step(ir::RankId rank, CollectiveSpec spec, std::string_view what);
  /// A host wait on `target`, not placed yet.
  ir::TaskId host_wait(ir::RankId rank, ir::TaskId target, std::string label);
  /// A buffer of the rank, allocated when `allocator` starts.
  ir::BufferId allocate(ir::TaskId allocator, std::int64_t bytes, std::string name);
  /// Marks `user` as a user of `buffer` (freed after its last user completes).
  void use(ir::TaskId user, ir::BufferId buffer);

  /// Host issue order: `task` right after `anchor` (after what was placed after it before),
  /// or right before it (after what was placed before it before).
  void issue_after(ir::TaskId anchor, ir::TaskId task);
  void issue_before(ir::TaskId anchor, ir::TaskId task);
  /// Applies the placements: each rank's issue order rebuilt once. Tasks added but not placed
  /// stay at the end of their rank's order.
  void finish();

  /// policy_buckets of the input (bucket_plan.h), computed once: the buckets, with their tags,
  /// that the pass's collectives carry.
  const SyncPlan& plan(const SyncOptions& options);
  /// A bucket the pass decided while walking `rank`'s tasks (ZeRO-3's gathers): its tag, the
  /// rank's next after the plan's. Kept in the plan from the first replica's ranks (the other
  /// replicas walk alike and get the same tags).
  std::int32_t add_planned(ir::RankId rank, PlannedBucket bucket);
  /// The plan, handed over once the pass is done.
  [[nodiscard]] SyncPlan take_plan() { return std::move(plan_); }

  /// The element type of a size in bytes (2: bf16, 4: fp32, 1: fp8).
  [[nodiscard]] static ir::DType dtype_of(std::int64_t element_bytes);

 private:
  void index_tasks();
  void require_index() const;
  void number_collectives();
  void mark_placed(ir::TaskId task);
  struct Placement {
    std::vector<ir::TaskId> before, after;
  };
  /// Appends `t` to `order` with what was placed before and after it, recursively.
  static void emit(ir::TaskId t, const std::vector<const Placement*>& by_anchor,
                   std::vector<ir::TaskId>& order);
  ir::GroupId group(ir::RankId rank, const CollectiveSpec& spec);

  ir::GraphBuilder& builder_;
  const SyncInput& input_;
  std::int32_t num_ranks_ = 0;
  std::int32_t replicas_ = 1;
  std::int32_t microbatches_ = 0;
  bool indexed_ = false;
  /// By rank: whether this context added a collective there (only those ranks are numbered).
  std::vector<char> issued_;
  std::vector<std::vector<ChunkTasks>> chunks_;  // [rank][chunk]
  std::vector<ir::TaskId> steps_;                // [rank]
  std::map<std::string, ir::GroupId> groups_;
  std::map<std::int32_t, Placement> placements_;  // by anchor task
  std::vector<bool> placed_;                      // by task
  SyncPlan plan_;                                 // by pipeline rank
  bool planned_ = false;
  std::vector<std::int32_t> first_walked_id_;             // by pipeline rank: after the plan's
  std::map<std::int32_t, std::int32_t> next_planned_id_;  // by rank
};

}  // namespace metron::sync::detail
