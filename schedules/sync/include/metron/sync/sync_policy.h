#pragma once
// Data-parallel gradient and parameter synchronisation: each system of docs/SYNC_POLICIES.md as a
// named set of parameters, and the lowering pass that adds its collectives to a pipeline graph.
// Note [sync policies]:
//
//   The pass works on a lowered pipeline step (lower_unvalidated + optional data-parallel
//   replicas). It finds, on every rank, the compute tasks whose completion fires a system's hooks
//   (the last microbatch's backward of each chunk, the first microbatch's forward, the optimizer
//   step), splits them at the layer boundaries where a bucket or unit becomes ready
//   (compute_split.h: a hook runs after the accumulate kernel of the bucket's last parameter was
//   enqueued, so the collective depends on everything enqueued on the compute stream up to there)
//   and inserts the collectives in host issue order right after the hook point, on the system's
//   streams:
//
//     ddp                 AR per bucket (25 MiB, first 1 MiB, gradient-ready order), strictly in
//                         bucket order, last microbatch only (no_sync), on "dp"; the step
//                         waits for all. fp16/bf16 compression hook halves fp32 bytes.
//     megatron-ddp        AR per bucket group (max(40M, 1M·d) elements), hook-driven when
//                         overlap_grad_reduce, else all at finish_grad_sync after the backward;
//                         with pipelining: rank 0 / chunk 0 by hooks, the rest at the schedule's
//                         grad_sync_func points (interleaved: virtual microbatch − pp rank).
//     megatron-distopt    RS per bucket group (padded), AG of the updated shards: after the step
//                         (no overlap_param_gather) or in the next forward's pre-hooks through the
//                         one-deep chain; align_param_gather, overlap with the optimizer step,
//                         instances (RS intra + AR inter on "dp-comm"), expert buffers on their own
//                         group ("edp") and stream.
//     fairscale-sdp       reduce(dst=owner) per large tensor, per-owner buckets (2^23 elements) at
//                         the end of backward, a host sync then one broadcast per owner after step.
//     zero1 / zero2       IPG-bucket all-reduce (multi-rank default) of 5e8 elements: ZeRO-1 at
//                         the accumulation boundary (after the last backward, or hooks with
//                         overlap_comm), ZeRO-2 every microbatch; AG of the flat group after step.
//     zero3               per layer AG before forward and backward (prefetch by element budget,
//                         host throttle of 2 fetches, release by reuse distance), RS per IPG
//                         bucket every microbatch on the reduce stream (throttle 2), epilogue host
//                         sync, AG of persistent (small) tensors after the step.
//     fsdp1 / fsdp2       per unit AG before forward (and backward for FULL_SHARD /
//                         reshard_after_forward), RS after the unit's backward (+AR for HSDP),
//                         FSDP1's limiter (host waits on the free of unit i−2), FSDP2's ≤ 2 AG
//                         outputs and ≤ 1 pending RS as stream waits.
//
//   Tags: every inserted collective carries the bucket (ir::Task::bucket), chunk and microbatch
//   it serves, and a label naming the trigger ("RS bucket 2 (layers 4-7) after B mb 7").
//   Gathered parameters and IPG/staging buffers are ir::Buffers, so the simulator's memory
//   timeline shows them (§9.6).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/ir/task.h"
#include "metron/sync/bucketing.h"
#include "metron/sync/param_tensors.h"

namespace metron::sync {

/// The nine systems of docs/SYNC_POLICIES.md.
enum class SyncPolicy : std::uint8_t {
  kDdp,
  kMegatronDdp,
  kMegatronDistopt,
  kFairscaleSdp,
  kZero1,
  kZero2,
  kZero3,
  kFsdp1,
  kFsdp2,
};

/// "ddp", "megatron-ddp", "megatron-distopt", "fairscale-sdp", "zero1", "zero2", "zero3",
/// "fsdp1", "fsdp2".
std::string_view to_string(SyncPolicy policy) noexcept;
std::optional<SyncPolicy> parse_sync_policy(std::string_view name) noexcept;
/// "ddp|megatron-ddp|...", for messages.
std::string_view sync_policy_names() noexcept;

/// Which iteration the graph describes (docs/SYNC_POLICIES.md §1.6).
enum class Iteration : std::uint8_t {
  kSteady,  ///< from iteration 2 (3 for DDP static_graph) on
  kWarmup,  ///< the first: DDP's single bucket, Megatron's disabled pre-hooks and delayed grad
            ///< sync, ZeRO-3 trace recording (no prefetch), fairscale's start-up broadcast
};

enum class FsdpSharding : std::uint8_t { kFullShard, kShardGradOp, kHybridShard };
enum class BackwardPrefetch : std::uint8_t { kNone, kPre, kPost };
enum class CommHook : std::uint8_t { kNone, kFp16Compress, kBf16Compress };

// Names as in JSON and on the command line: "steady"|"warmup"; "full-shard"|"shard-grad-op"|
// "hybrid-shard"; "none"|"pre"|"post"; "none"|"fp16-compress"|"bf16-compress".
std::string_view to_string(Iteration value) noexcept;
std::string_view to_string(FsdpSharding value) noexcept;
std::string_view to_string(BackwardPrefetch value) noexcept;
std::string_view to_string(CommHook value) noexcept;
std::optional<Iteration> parse_iteration(std::string_view name) noexcept;
std::optional<FsdpSharding> parse_fsdp_sharding(std::string_view name) noexcept;
std::optional<BackwardPrefetch> parse_backward_prefetch(std::string_view name) noexcept;
std::optional<CommHook> parse_comm_hook(std::string_view name) noexcept;

/// A policy and its knobs. Unset optionals take the system's own default (see each field).
struct SyncOptions {
  SyncPolicy policy = SyncPolicy::kDdp;
  Iteration iteration = Iteration::kSteady;
  /// DDP: bucket_cap in bytes (25 MiB). Megatron: bucket size in elements (max(40M, 1M·d)).
  /// ZeRO: reduce_bucket_size in elements (5e8). fairscale: reduce_buffer_size (2^23 elements).
  std::optional<std::int64_t> bucket_size;
  std::int64_t first_bucket_bytes = 1 << 20;  ///< DDP's first bucket after the rebuild
  CommHook comm_hook = CommHook::kNone;       ///< DDP
  /// Megatron overlap_grad_reduce (default false); ZeRO overlap_comm (default: stage 3 only).
  std::optional<bool> overlap_grad_reduce;
  bool overlap_param_gather = false;  ///< Megatron distopt (needs overlap_grad_reduce)
  /// Megatron: default true with the interleaved schedule (CLI default), forced off otherwise.
  std::optional<bool> align_param_gather;
  bool overlap_param_gather_with_optimizer_step = false;  ///< Megatron distopt, interleaved only
  std::int32_t distributed_optimizer_instances = 1;       ///< Megatron distopt
  /// Megatron: reduce gradients in fp32 (true) or in the weights' dtype (false); unset: the
  /// gradient bytes of SyncInput (Megatron turns it on for bf16).
  std::optional<bool> grad_reduce_in_fp32;
  /// Megatron: launch grad sync at the schedule's grad_sync_func points (align_grad_reduce).
  bool align_grad_reduce = true;
  FsdpSharding fsdp_sharding = FsdpSharding::kFullShard;        ///< FSDP1
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kPre;  ///< FSDP1
  bool limit_all_gathers = true;                                ///< FSDP1
  bool reshard_after_forward = true;                            ///< FSDP2 (non-root groups)
  /// FSDP HYBRID_SHARD / FSDP2 HSDP: the shard group's size (ranks of one node, typically).
  std::optional<std::int32_t> hsdp_shard_size;
  std::int64_t zero_prefetch_bucket_size = 50'000'000;      ///< ZeRO-3, elements
  std::int64_t zero_param_persistence_threshold = 100'000;  ///< ZeRO-3, elements
  std::int64_t zero_max_live_parameters = 1'000'000'000;    ///< ZeRO-3, elements
  std::int64_t zero_max_reuse_distance = 1'000'000'000;     ///< ZeRO-3, elements
  /// ZeRO-3 as DeepSpeed ran it through 2021 (v0.3.13 to v0.5.x): torch.cuda.synchronize()
  /// before each parameter all-gather and after each fetch, so the host never runs ahead of
  /// the GPU (Note [zero lowering], sync_zero.h).
  bool zero_synchronous_fetch = false;
  /// ZeRO-3 as DeepSpeed ran it through v0.5.x: every partitioned parameter all-gathered, every
  /// gradient reduce-scattered and every persistent parameter re-gathered after the step by a
  /// call of its own, over a list of d views (Note [zero per-tensor collectives], sync_zero.h).
  bool zero_per_tensor_collectives = false;
  bool broadcast_fp16 = false;  ///< fairscale OSS
  friend bool operator==(const SyncOptions&, const SyncOptions&) = default;
};

/// What the pass needs to know about the step beyond the graph.
struct SyncInput {
  std::int32_t pipeline_ranks = 1;  ///< the graph's ranks are pipeline_ranks × replicas
  /// The real data-parallel group of dense parameters (dp·cp): shard counts, padding, owners.
  std::int32_t data_parallel = 1;
  std::int32_t expert_data_parallel = 1;  ///< dp·cp / ep
  /// params[r]: pipeline rank r's chunks, in its stage order (index = ir::ChunkId).
  std::vector<std::vector<ChunkParams>> params;
  std::int64_t param_bytes = 2;  ///< bytes per element of the model's weights (bf16: 2)
  std::int64_t grad_bytes = 2;   ///< of the gradients as the policy holds them (fp32: 4)
  bool interleaved = false;      ///< Megatron's interleaved schedule (align_param_gather, ...)
  /// DualPipe: pipeline rank r's chunk 1 is a copy of pipeline rank P-1-r's chunk 0 (Note
  /// [stage copies] in stage_copies.h). A copy is bucketed as its original and OSS registers a
  /// rank's stages in model-stage order, so that the two copies shard alike (same owners) and
  /// their reduced gradients can be summed element by element.
  bool stage_copies = false;
};

/// By pipeline rank, every bucket the sync pass's collectives carry, by their ir::Task::bucket
/// tags: policy_buckets (bucket_plan.h) and, for ZeRO-3, the per-layer gathers its walk issued.
using SyncPlan = std::vector<std::vector<PlannedBucket>>;

/// Adds the policy's collectives, streams, groups, host waits and buffers (Note [sync policies])
/// to a lowered step, and returns its plan. Throws InvalidConfig naming an option the policy cannot
/// take (e.g. overlap_param_gather without the distributed optimizer) or params of the wrong shape.
SyncPlan add_sync_policy(ir::GraphBuilder& builder, const SyncInput& input,
                         const SyncOptions& options);

}  // namespace metron::sync
