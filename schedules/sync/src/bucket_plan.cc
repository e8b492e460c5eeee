#include "metron/sync/bucket_plan.h"

#include <string>

#include "metron/base/error.h"

namespace metron::sync {

namespace {

constexpr std::int64_t kDefaultDdpBucketBytes = std::int64_t{25} << 20;

/// Megatron's bucket size for a chunk (Note [megatron sync] in sync_megatron.cc): bucketing is
/// off (one bucket per buffer) unless gradients are reduced by hooks, which Megatron does on
/// pipeline rank 0's first chunk only, and never with the optimizer step overlapping the gathers.
std::optional<std::int64_t> megatron_bucket_params(const SyncInput& in, const SyncOptions& o,
                                                   std::int32_t pipeline_rank, std::int32_t chunk) {
  if (!o.overlap_grad_reduce.value_or(false) || pipeline_rank > 0 || chunk > 0 ||
      o.overlap_param_gather_with_optimizer_step) {
    return std::nullopt;
  }
  return o.bucket_size.value_or(megatron_default_bucket_params(in.data_parallel));
}

}  // namespace

std::vector<std::vector<PlannedBucket>> policy_buckets(const SyncInput& input,
                                                       const SyncOptions& options) {
  std::vector<std::vector<PlannedBucket>> out(input.params.size());
  for (std::size_t r = 0; r < input.params.size(); ++r) {
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
        default:
          throw InvalidConfig("policy_buckets: " + std::string(to_string(options.policy)) +
                              " communicates units that are not buckets of one gradient buffer; "
                              "expected ddp, megatron-ddp or megatron-distopt");
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
    if (p.chunk < chunk) out.first_id = p.id + 1;
    if (p.chunk != chunk) continue;
    if (!found) out.first_id = p.id;
    found = true;
    out.buckets.push_back(p.bucket);
  }
  return out;
}

}  // namespace metron::sync
