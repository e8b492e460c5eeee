#pragma once
// The buckets a sync policy communicates, as its collectives name them: the lowering pass
// (sync_policy.h) tags each collective with its bucket's id (ir::Task::bucket) and chunk, and an
// executor that moves real gradients (the model payload, issue 21) packs and unpacks the same
// buckets from these. One function serves both, so that the graph's bucket and the executor's
// cannot drift apart.

#include <cstdint>
#include <vector>

#include "metron/sync/bucketing.h"
#include "metron/sync/sync_policy.h"

namespace metron::sync {

/// The tensors of `bucket` in bucket order, resolved against the rank's `chunks`.
std::vector<TensorRef> bucket_members(const std::vector<ChunkParams>& chunks,
                                      const PlannedBucket& bucket);

/// FSDP's shard group: hsdp_shard_size with HSDP (FSDP2 given one, FSDP1's HYBRID_SHARD), else
/// the whole data-parallel group.
std::int32_t fsdp_shard_size(const SyncInput& input, const SyncOptions& options);

/// Per pipeline rank (SyncInput::params' index), the buckets of the chunks in chunk order, ids
/// counted on across them: ddp's (ddp_buckets, gradient-ready order, [first_bucket_bytes,
/// bucket_size] from the steady state on), megatron-ddp's and megatron-distopt's
/// (megatron_buckets: one bucket per buffer unless overlap_grad_reduce on pipeline rank 0's
/// chunk 0; sharded over dp / instances), all kGradients; fairscale-sdp's (Note [fairscale
/// sync] in sync_fairscale.cc): with Iteration::kWarmup each chunk's start-up broadcast, then
/// per chunk its reduces in the order its backward issues them (a tensor reduced alone, or an
/// owner's bucket when its last member checks in), then per owner the OSS broadcast of its
/// tensors over all chunks; fsdp1's and fsdp2's units (fsdp_units over fsdp_shard_size), all
/// kGradients: gathered before use, their gradients reduce-scattered; zero3's IPG buckets per
/// chunk (zero_ipg_buckets, reduce-scattered per microbatch), then the after-step gather of the
/// persistent tensors (numel <= zero_param_persistence_threshold) over all chunks, when any, all
/// per_tensor_partitions (its per-layer gathers of the other tensors coalesce sets that the
/// prefetch decides while walking the step: SyncContext::add_planned); zero1's and zero2's IPG
/// buckets per chunk (all-reduced; ZeRO-1 without overlap_comm fills them in registration
/// order), then the after-step gather of the dense tensors over all chunks, padded to 2·dp
/// (each rank steps its contiguous share of it), all kGradients.
std::vector<std::vector<PlannedBucket>> policy_buckets(const SyncInput& input,
                                                       const SyncOptions& options);

/// The buckets of `chunk` (>= 0) among one rank's planned buckets, and the id of the first (a
/// chunk's ids are consecutive); no buckets and the next free id for a chunk without any.
struct ChunkBuckets {
  std::vector<Bucket> buckets;
  std::int32_t first_id = 0;
};
ChunkBuckets chunk_buckets(const std::vector<PlannedBucket>& planned, std::int32_t chunk);

}  // namespace metron::sync
