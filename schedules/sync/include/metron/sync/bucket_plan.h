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

/// One bucket of one chunk of a pipeline rank.
struct PlannedBucket {
  std::int32_t chunk = 0;
  std::int32_t id = 0;  ///< ir::Task::bucket of its collectives: unique per rank
  Bucket bucket;        ///< tensors index the chunk's SyncInput tensors
};

/// Per pipeline rank (SyncInput::params' index), the buckets of the chunks in chunk order, ids
/// counted on across them: ddp's (ddp_buckets, gradient-ready order, [first_bucket_bytes,
/// bucket_size] from the steady state on), megatron-ddp's and megatron-distopt's
/// (megatron_buckets: one bucket per buffer unless overlap_grad_reduce on pipeline rank 0's
/// chunk 0; sharded over dp / instances). Throws InvalidConfig for the other policies, whose
/// units are not buckets of one gradient buffer.
std::vector<std::vector<PlannedBucket>> policy_buckets(const SyncInput& input,
                                                       const SyncOptions& options);

/// The buckets of `chunk` among one rank's planned buckets, and the id of the first (a chunk's
/// ids are consecutive); no buckets and the next free id for a chunk without any.
struct ChunkBuckets {
  std::vector<Bucket> buckets;
  std::int32_t first_id = 0;
};
ChunkBuckets chunk_buckets(const std::vector<PlannedBucket>& planned, std::int32_t chunk);

}  // namespace metron::sync
