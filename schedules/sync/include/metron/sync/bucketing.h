#pragma once
// How each data-parallel system partitions a chunk's parameters into the units it communicates:
// buckets, shards, owners, wrapping units (docs/SYNC_POLICIES.md §2.2, §3.2–3.3, §4, §5.2–5.3, §6).
// Pure functions of the tensor list; the sync-policy passes (sync_policy.h) turn their result into
// collectives. Every function takes the chunk's tensors in registration order and returns buckets
// whose `tensors` index into that list. Bad input (a negative numel, a non-positive size, world
// or limit, an index or owner out of range) throws InvalidConfig naming the function and value.

#include <cstdint>
#include <optional>
#include <vector>

#include "metron/sync/param_tensors.h"

namespace metron::sync {

/// One unit of communication: a bucket, a shard owner's set, an FSDP unit.
struct Bucket {
  std::vector<std::int32_t> tensors;  ///< indices into the chunk's tensor list, in bucket order
  std::int64_t numel = 0;             ///< sum of the members' elements
  std::int64_t padded_numel = 0;      ///< with the system's padding; == numel without
  std::int32_t owner = -1;            ///< fairscale: the data-parallel rank that owns it; else -1
  bool expert = false;                ///< expert-parallel parameters (Megatron's separate buffers)
  /// The lowest `layer` of the members: the backward produces the bucket's last gradient there.
  std::int32_t lowest_layer = 0;
  /// The highest `layer` of the members: the forward first reads the bucket there.
  std::int32_t highest_layer = 0;
  friend bool operator==(const Bucket&, const Bucket&) = default;
};

/// What the collectives of a planned bucket do with its tensors.
enum class BucketRole : std::uint8_t {
  /// Reduce the gradients among the replicas: all-reduce (ddp, megatron-ddp), or reduce-scatter
  /// and all-gather the stepped parameters back (megatron-distopt).
  kGradients,
  /// Reduce the gradients to bucket.owner, whose optimizer alone steps them (fairscale).
  kReduceToOwner,
  /// Broadcast the parameters from bucket.owner: fairscale's start-up broadcast (owner 0) and
  /// OSS's broadcast of each owner's parameters after the step.
  kBroadcastParameters,
};

/// `PlannedBucket::chunk` of a bucket that holds tensors of every chunk of the rank.
inline constexpr std::int32_t kAllChunks = -1;

/// One bucket of a pipeline rank.
struct PlannedBucket {
  /// The chunk whose tensors `bucket.tensors` index; kAllChunks: they index the rank's chunks'
  /// tensors one after another, chunk 0 first (OSS's registration order; bucket_members).
  std::int32_t chunk = 0;
  std::int32_t id = 0;  ///< ir::Task::bucket of its collectives: unique per rank
  Bucket bucket;
  BucketRole role = BucketRole::kGradients;
  /// DeepSpeed ZeRO-3's layout: each member padded to a multiple of the group size d and cut
  /// into d equal partitions, rank r owning partition r of every member, and r's share of the
  /// collective's buffer holding its partitions one after another (the interleaved
  /// reduce-scatter buffer, all_gather_coalesced's output). Otherwise members lie one after
  /// another and a rank's share is a contiguous run of the concatenation.
  bool per_tensor_partitions = false;
};

/// One tensor of a pipeline rank: its chunk and its index among the chunk's tensors.
struct TensorRef {
  std::int32_t chunk = 0;
  std::int32_t tensor = 0;
  friend bool operator==(const TensorRef&, const TensorRef&) = default;
};

/// A bucket of `members` (indices into `tensors`, non-empty) in that order: their numel, their
/// layer span, no padding, no owner.
Bucket make_bucket(const std::vector<ParamTensor>& tensors, std::vector<std::int32_t> members);

/// Gradient-ready order at layer granularity: the backward reaches higher layers first, and
/// within one layer autograd finishes the later-registered parameters first (reverse
/// registration). Tensor indices.
std::vector<std::int32_t> grad_ready_order(const std::vector<ParamTensor>& tensors);

/// PyTorch's compute_bucket_assignment_by_size: walks `order` (tensor indices), appending each
/// tensor (numel · element_bytes bytes) to the current bucket and closing it once its bytes reach
/// (>=) the current limit (so a bucket may overshoot by one tensor, and a tensor at or above the
/// limit closes its bucket alone); `byte_limits[k]` caps the k-th bucket, the last entry every
/// later one. Buckets come out in `order`'s order (no sort, no reversal: the caller does those),
/// members in walk order. One dtype and device: upstream keeps one accumulator per (dtype,
/// device), which a single chunk of one dtype reduces to. `order` must name each tensor at most
/// once; tensors it omits are in no bucket.
std::vector<Bucket> ddp_assign_by_size(const std::vector<ParamTensor>& tensors,
                                       const std::vector<std::int32_t>& order,
                                       std::int64_t element_bytes,
                                       const std::vector<std::int64_t>& byte_limits);

/// DDP's buckets in reduction order (bucket 0 reduced first). `rebuilt` (steady state, from
/// iteration 2): gradient-ready order — higher `layer` first, within a layer reverse registration
/// order — with limits [first_bucket_bytes, bucket_bytes], so the small first bucket holds the
/// last layers. Not rebuilt (iteration 1 with find_unused_parameters=False): limits [maxsize],
/// i.e. one bucket of everything, its members in registration order (upstream walks the
/// parameters in registration order; the sort-and-reverse of its bucket list is then a no-op).
std::vector<Bucket> ddp_buckets(const std::vector<ParamTensor>& tensors, std::int64_t element_bytes,
                                std::int64_t first_bucket_bytes, std::int64_t bucket_bytes,
                                bool rebuilt);

/// Megatron's _ParamAndGradBuffer layout for one chunk: dense and expert tensors in separate
/// buffers (dense buckets first), each walked in reverse registration order, a bucket closing once
/// the span from its start to the end of the tensor just added (start padding included, end
/// padding not) is >= bucket_params elements (nullopt: no size limit, one bucket per buffer).
/// With `distributed_optimizer` padding: every tensor starts at a multiple of 64 elements, every
/// bucket ends at a multiple of lcm(d, 128), and a tensor flagged `shared_embedding` gets a bucket
/// of its own (the bucket before it is closed, it starts the next one); without it neither
/// padding nor the embedding split (upstream ties both to the distributed optimizer). d is
/// `data_parallel` for the dense buffer and `expert_data_parallel` (default: `data_parallel`)
/// for the expert buffer, whose buckets upstream shard over the expert-data-parallel group.
/// `padded_numel` is the bucket's span in the buffer, padding included.
/// Bucket 0 holds the last layers (reduced first); bucket groups are one bucket each (no FP8).
std::vector<Bucket> megatron_buckets(
    const std::vector<ParamTensor>& tensors, std::optional<std::int64_t> bucket_params,
    std::int64_t data_parallel, bool distributed_optimizer,
    std::optional<std::int64_t> expert_data_parallel = std::nullopt);

/// Megatron's default bucket size: max(40,000,000, 1,000,000 · data_parallel) elements.
std::int64_t megatron_default_bucket_params(std::int64_t data_parallel);

/// fairscale OSS's partition: each tensor, in registration order, goes to the rank with the
/// smallest running total of elements (ties to the lowest rank). Returns the owner per tensor.
/// Every tensor counts as trainable (upstream counts a frozen one as 1 element).
std::vector<std::int32_t> oss_partition(const std::vector<ParamTensor>& tensors,
                                        std::int32_t world);

/// fairscale ShardedDataParallel's reduction plan: tensors sorted by increasing numel (stable, so
/// ties keep registration order); a tensor joins its owner's bucket if fill + numel < `capacity`
/// (strictly), else it is reduced on its own. Members are in that sorted order; `numel` and
/// `padded_numel` are the fill (upstream shrinks buckets to it). `capacity` is upstream's
/// reduce_buffer_size after its cap at the model size; 0 disables bucketing (fairscale does so
/// for world size 1 or reduce_buffer_size=0): everything is then direct.
struct ShardedDdpPlan {
  std::vector<Bucket> buckets;       ///< one per owner that has bucketed tensors, by owner
  std::vector<std::int32_t> direct;  ///< tensors reduced individually, in registration order
};
ShardedDdpPlan sharded_ddp_plan(const std::vector<ParamTensor>& tensors,
                                const std::vector<std::int32_t>& owners, std::int32_t world,
                                std::int64_t capacity);

/// DeepSpeed's IPG buckets in gradient-ready order (as ddp_buckets when rebuilt: higher `layer`
/// first, within a layer reverse registration): a bucket is reduced when the next gradient would
/// take it past (>) `bucket_elements`, so a bucket may be exactly full; a tensor larger than that
/// is reduced on its own.
std::vector<Bucket> zero_ipg_buckets(const std::vector<ParamTensor>& tensors,
                                     std::int64_t bucket_elements);

/// DeepSpeed's default reduce_bucket_size, elements.
inline constexpr std::int64_t kZeroDefaultReduceBucket = 500'000'000;

/// Wrapping units in forward order, as the transformer auto-wrap policy of FSDP1 and one
/// fully_shard per layer in FSDP2 make them: one unit per transformer layer (its tensors), and
/// the root unit (the tensors outside the layers: embeddings, final norm, head) first when the
/// chunk has any; layer units in ascending `layer`, members in registration order. The padded
/// size rounds each unit up to a multiple of `shards` (the FlatParameter split into equal shards).
std::vector<Bucket> fsdp_units(const std::vector<ParamTensor>& tensors, std::int64_t shards);

}  // namespace metron::sync
