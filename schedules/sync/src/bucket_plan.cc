#include "metron/sync/bucket_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "metron/base/error.h"

namespace metron::sync {

namespace {

constexpr std::int64_t kDefaultDdpBucketBytes = std::int64_t{25} << 20;

/// Megatron's bucket size for a chunk (Note [megatron sync] in sync_megatron.cc): bucketing is
/// off (one bucket per buffer) unless gradients are reduced by hooks, which Megatron does on
/// pipeline rank 0's first chunk only, and never with the optimizer step overlapping the gathers.
/// DualPipe's copy of that chunk is bucketed alike (SyncInput::stage_copies).
std::optional<std::int64_t> megatron_bucket_params(const SyncInput& in, const SyncOptions& o,
                                                   std::int32_t pipeline_rank, std::int32_t chunk) {
  if (in.stage_copies && chunk == 1) {  // a DualPipe copy: as its original (SyncInput)
    pipeline_rank = in.pipeline_ranks - 1 - pipeline_rank;
    chunk = 0;
  }
  if (!o.overlap_grad_reduce.value_or(false) || pipeline_rank > 0 || chunk > 0 ||
      o.overlap_param_gather_with_optimizer_step) {
    return std::nullopt;
  }
  return o.bucket_size.value_or(megatron_default_bucket_params(in.data_parallel));
}

constexpr std::int64_t kDefaultReduceBufferElements = std::int64_t{1} << 23;

std::int64_t total_numel(const std::vector<ParamTensor>& tensors) {
  return std::accumulate(tensors.begin(), tensors.end(), std::int64_t{0},
                         [](std::int64_t s, const ParamTensor& t) { return s + t.numel; });
}

/// A bucket of `members` of `tensors` (indices), owned by `owner`, without padding.
Bucket owned_bucket(const std::vector<ParamTensor>& tensors, std::vector<std::int32_t> members,
                    std::int32_t owner) {
  Bucket b = make_bucket(tensors, std::move(members));
  b.owner = owner;
  return b;
}

/// One chunk's ShardedDataParallel reduces, in the order its backward issues them.
void add_fairscale_reduces(const std::vector<ParamTensor>& tensors,
                           const std::vector<std::int32_t>& owners, const SyncInput& input,
                           const SyncOptions& options, std::int32_t chunk,
                           std::vector<PlannedBucket>& out) {
  const std::int32_t world = input.data_parallel;
  const std::int64_t capacity =
      world == 1 ? 0
                 : std::min(options.bucket_size.value_or(kDefaultReduceBufferElements),
                            total_numel(tensors));
  const ShardedDdpPlan plan = sharded_ddp_plan(tensors, owners, world, capacity);
  std::vector<std::int32_t> bucket_of(tensors.size(), -1);
  for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
    for (const std::int32_t t : plan.buckets[b].tensors) {
      bucket_of[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(b);
    }
  }
  std::vector<std::size_t> checked_in(plan.buckets.size(), 0);
  const auto add = [&](Bucket b) {
    const std::int32_t id = out.empty() ? 0 : out.back().id + 1;
    out.push_back(
        {.chunk = chunk, .id = id, .bucket = std::move(b), .role = BucketRole::kReduceToOwner});
  };
  for (const std::int32_t t : grad_ready_order(tensors)) {
    const std::int32_t b = bucket_of[static_cast<std::size_t>(t)];
    if (b < 0) {
      add(owned_bucket(tensors, {t}, owners[static_cast<std::size_t>(t)]));
      continue;
    }
    const Bucket& bucket = plan.buckets[static_cast<std::size_t>(b)];
    if (++checked_in[static_cast<std::size_t>(b)] == bucket.tensors.size()) add(bucket);
  }
}

/// Note [zero lowering] (sync_zero.h): one pipeline rank's ZeRO-3 reduce-scatter buckets and
/// after-step gather, in id order.
std::vector<PlannedBucket> zero3_buckets(const std::vector<ChunkParams>& chunks,
                                         const SyncInput& input, const SyncOptions& options) {
  const std::int64_t d = input.data_parallel;
  const auto padded = [d](const std::vector<ParamTensor>& tensors, Bucket& b) {
    b.padded_numel = 0;
    for (const std::int32_t t : b.tensors) {
      b.padded_numel += (tensors[static_cast<std::size_t>(t)].numel + d - 1) / d * d;
    }
  };
  std::vector<PlannedBucket> out;
  std::vector<ParamTensor> all;
  std::vector<std::int32_t> persistent;  // indices into `all`
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::vector<ParamTensor>& tensors = chunks[c].tensors;
    for (const ParamTensor& t : tensors) {
      if (t.numel <= options.zero_param_persistence_threshold) {
        persistent.push_back(static_cast<std::int32_t>(all.size()));
      }
      all.push_back(t);
    }
    for (Bucket& b :
         zero_ipg_buckets(tensors, options.bucket_size.value_or(kZeroDefaultReduceBucket))) {
      padded(tensors, b);
      out.push_back({.chunk = static_cast<std::int32_t>(c),
                     .id = static_cast<std::int32_t>(out.size()),
                     .bucket = std::move(b),
                     .per_tensor_partitions = true});
    }
  }
  if (persistent.empty()) return out;
  Bucket gathered = make_bucket(all, std::move(persistent));
  padded(all, gathered);
  if (gathered.padded_numel == 0) return out;  // the pass gathers nothing then
  out.push_back({.chunk = kAllChunks,
                 .id = static_cast<std::int32_t>(out.size()),
                 .bucket = std::move(gathered),
                 .per_tensor_partitions = true});
  return out;
}

/// Note [zero lowering] (sync_zero.h): one pipeline rank's ZeRO-1/2 all-reduce buckets per
/// chunk (registration order for ZeRO-1 without overlap_comm, which reduces after the backward),
/// then the after-step gather of its dense tensors over all chunks, padded to 2·d.
std::vector<PlannedBucket> zero12_buckets(const std::vector<ChunkParams>& chunks,
                                          const SyncInput& input, const SyncOptions& options) {
  const bool zero2 = options.policy == SyncPolicy::kZero2;
  const bool registration_order = !zero2 && !options.overlap_grad_reduce.value_or(false);
  std::vector<PlannedBucket> out;
  std::vector<ParamTensor> all;
  std::vector<std::int32_t> dense;  // indices into `all`
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    std::vector<ParamTensor> tensors = chunks[c].tensors;
    for (const ParamTensor& t : tensors) {
      if (!t.expert) dense.push_back(static_cast<std::int32_t>(all.size()));
      all.push_back(t);
    }
    // zero_ipg_buckets walks gradient-ready order; layer −i makes it registration order.
    if (registration_order) {
      for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].layer = -static_cast<int>(i);
    }
    for (Bucket& b :
         zero_ipg_buckets(tensors, options.bucket_size.value_or(kZeroDefaultReduceBucket))) {
      out.push_back({.chunk = static_cast<std::int32_t>(c),
                     .id = static_cast<std::int32_t>(out.size()),
                     .bucket = make_bucket(chunks[c].tensors, std::move(b.tensors))});
    }
  }
  if (dense.empty()) return out;
  Bucket gathered = make_bucket(all, std::move(dense));
  const std::int64_t shares = 2 * std::int64_t{input.data_parallel};
  gathered.padded_numel = (gathered.numel + shares - 1) / shares * shares;
  if (gathered.numel == 0) return out;  // the pass gathers nothing then
  out.push_back({.chunk = kAllChunks,
                 .id = static_cast<std::int32_t>(out.size()),
                 .bucket = std::move(gathered)});
  return out;
}

/// Note [fairscale sync] (sync_fairscale.cc): one pipeline rank's units, in id order.
std::vector<PlannedBucket> fairscale_buckets(const std::vector<ChunkParams>& chunks,
                                             const SyncInput& input, const SyncOptions& options) {
  std::vector<PlannedBucket> out;
  const auto add = [&out](std::int32_t chunk, Bucket b) {
    const std::int32_t id = out.empty() ? 0 : out.back().id + 1;
    out.push_back({.chunk = chunk,
                   .id = id,
                   .bucket = std::move(b),
                   .role = BucketRole::kBroadcastParameters});
  };
  std::vector<ParamTensor> all;  // OSS's registration order: chunk 0 first
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::vector<ParamTensor>& tensors = chunks[c].tensors;
    all.insert(all.end(), tensors.begin(), tensors.end());
    if (options.iteration != Iteration::kWarmup || tensors.empty()) continue;
    std::vector<std::int32_t> members(tensors.size());
    std::iota(members.begin(), members.end(), 0);
    add(static_cast<std::int32_t>(c), owned_bucket(tensors, std::move(members), 0));
  }
  // OSS assigns owners in registration order. DualPipe's two copies of a stage must get the same
  // owners, for the sum of their reduced gradients (SyncInput::stage_copies): a rank registers
  // its stages in model-stage order, its copy first where that is the lower stage.
  std::vector<std::size_t> registered(all.size());
  std::iota(registered.begin(), registered.end(), 0);
  if (input.stage_copies && chunks.size() == 2 &&
      chunks[1].stage % input.pipeline_ranks < chunks[0].stage % input.pipeline_ranks) {
    std::rotate(registered.begin(),
                registered.begin() + static_cast<std::ptrdiff_t>(chunks[0].tensors.size()),
                registered.end());
  }
  std::vector<ParamTensor> in_registration_order;
  for (const std::size_t i : registered) in_registration_order.push_back(all[i]);
  const std::vector<std::int32_t> registered_owners =
      oss_partition(in_registration_order, input.data_parallel);
  std::vector<std::int32_t> owners(all.size());
  for (std::size_t k = 0; k < registered.size(); ++k) owners[registered[k]] = registered_owners[k];
  std::size_t offset = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::vector<ParamTensor>& tensors = chunks[c].tensors;
    const std::vector<std::int32_t> chunk_owners(
        owners.begin() + static_cast<std::ptrdiff_t>(offset),
        owners.begin() + static_cast<std::ptrdiff_t>(offset + tensors.size()));
    offset += tensors.size();
    if (tensors.empty()) continue;
    add_fairscale_reduces(tensors, chunk_owners, input, options, static_cast<std::int32_t>(c), out);
  }
  for (std::int32_t owner = 0; owner < input.data_parallel; ++owner) {
    std::vector<std::int32_t> members;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (owners[i] == owner) members.push_back(static_cast<std::int32_t>(i));
    }
    if (members.empty()) continue;
    Bucket b = owned_bucket(all, std::move(members), owner);
    if (b.numel > 0) add(kAllChunks, std::move(b));  // nothing to broadcast otherwise
  }
  return out;
}

}  // namespace

std::int32_t fsdp_shard_size(const SyncInput& input, const SyncOptions& options) {
  const bool hybrid = options.policy == SyncPolicy::kFsdp2
                          ? options.hsdp_shard_size.has_value()
                          : options.fsdp_sharding == FsdpSharding::kHybridShard;
  return hybrid ? options.hsdp_shard_size.value_or(input.data_parallel) : input.data_parallel;
}

std::vector<TensorRef> bucket_members(const std::vector<ChunkParams>& chunks,
                                      const PlannedBucket& bucket) {
  std::vector<TensorRef> out;
  for (const std::int32_t index : bucket.bucket.tensors) {
    if (bucket.chunk != kAllChunks) {
      out.push_back({.chunk = bucket.chunk, .tensor = index});
      continue;
    }
    std::int32_t chunk = 0;
    std::int32_t tensor = index;
    while (static_cast<std::size_t>(chunk) < chunks.size() &&
           tensor >= std::ssize(chunks[static_cast<std::size_t>(chunk)].tensors)) {
      tensor -= static_cast<std::int32_t>(chunks[static_cast<std::size_t>(chunk)].tensors.size());
      ++chunk;
    }
    out.push_back({.chunk = chunk, .tensor = tensor});
  }
  return out;
}

std::vector<std::vector<PlannedBucket>> policy_buckets(const SyncInput& input,
                                                       const SyncOptions& options) {
  std::vector<std::vector<PlannedBucket>> out(input.params.size());
  for (std::size_t r = 0; r < input.params.size(); ++r) {
    if (options.policy == SyncPolicy::kFairscaleSdp) {
      out[r] = fairscale_buckets(input.params[r], input, options);
      continue;
    }
    if (options.policy == SyncPolicy::kZero3) {
      out[r] = zero3_buckets(input.params[r], input, options);
      continue;
    }
    if (options.policy == SyncPolicy::kZero1 || options.policy == SyncPolicy::kZero2) {
      out[r] = zero12_buckets(input.params[r], input, options);
      continue;
    }
    const auto pipeline_rank = static_cast<std::int32_t>(r);
    std::int32_t next_id = 0;
    for (std::size_t c = 0; c < input.params[r].size(); ++c) {
      const auto chunk = static_cast<std::int32_t>(c);
      const std::vector<ParamTensor>& tensors = input.params[r][c].tensors;
      std::vector<Bucket> buckets;
      switch (options.policy) {
        case SyncPolicy::kDdp:
          buckets = ddp_buckets(tensors, input.grad_bytes, options.first_bucket_bytes,
                                options.bucket_size.value_or(kDefaultDdpBucketBytes),
                                options.iteration == Iteration::kSteady);
          break;
        case SyncPolicy::kMegatronDdp:
        case SyncPolicy::kMegatronDistopt: {
          const bool distopt = options.policy == SyncPolicy::kMegatronDistopt;
          buckets = megatron_buckets(
              tensors, megatron_bucket_params(input, options, pipeline_rank, chunk),
              input.data_parallel / options.distributed_optimizer_instances, distopt);
          break;
        }
        case SyncPolicy::kFsdp1:
        case SyncPolicy::kFsdp2:
          buckets = fsdp_units(tensors, fsdp_shard_size(input, options));
          break;
        default:
          throw InvalidConfig("policy_buckets: " + std::string(to_string(options.policy)) +
                              " communicates units that are not buckets of one gradient buffer; "
                              "expected ddp, megatron-ddp, megatron-distopt, fairscale-sdp, "
                              "zero1-3, fsdp1 or fsdp2");
      }
      for (Bucket& b : buckets) {
        out[r].push_back({.chunk = chunk, .id = next_id++, .bucket = std::move(b)});
      }
    }
  }
  return out;
}

ChunkBuckets chunk_buckets(const std::vector<PlannedBucket>& planned, std::int32_t chunk) {
  ChunkBuckets out;
  bool found = false;
  for (const PlannedBucket& p : planned) {
    if (p.chunk == kAllChunks) continue;
    if (p.chunk < chunk) out.first_id = p.id + 1;
    if (p.chunk != chunk) continue;
    if (!found) out.first_id = p.id;
    found = true;
    out.buckets.push_back(p.bucket);
  }
  return out;
}

}  // namespace metron::sync
