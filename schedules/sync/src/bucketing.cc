// The partitions of bucketing.h, one upstream system each (docs/SYNC_POLICIES.md §2.2, §3.2,
// §4.1–4.2, §5.2, §6). Shared here: input checks, building a Bucket from its members, the
// gradient-ready order at layer granularity.

#include "metron/sync/bucketing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>

#include "metron/base/error.h"

namespace metron::sync {
namespace {

// Megatron's distributed-optimizer alignment: tensors start at 128-byte addresses (64 elements of
// >= 16 bits), buckets end at a multiple of lcm(d, 128) so each shards evenly and 256-byte aligned.
constexpr std::int64_t kParamAlignment = 64;
constexpr std::int64_t kBucketAlignment = 128;

void check_positive(std::string_view where, std::string_view what, std::int64_t value) {
  if (value <= 0)
    throw InvalidConfig(fmt::format("{}: {} is {}; expected >= 1", where, what, value));
}

void check_tensors(std::string_view where, const std::vector<ParamTensor>& tensors) {
  if (tensors.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidConfig(fmt::format("{}: {} tensors; expected at most {}", where, tensors.size(),
                                    std::numeric_limits<std::int32_t>::max()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel < 0) {
      throw InvalidConfig(fmt::format("{}: tensor {} (\"{}\") has numel {}; expected >= 0", where,
                                      i, tensors[i].name, tensors[i].numel));
    }
  }
}

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::int32_t index_of(std::size_t i) { return static_cast<std::int32_t>(i); }

const ParamTensor& at(const std::vector<ParamTensor>& tensors, std::int32_t i) {
  return tensors[static_cast<std::size_t>(i)];
}

void check_order(const std::vector<ParamTensor>& tensors, const std::vector<std::int32_t>& order) {
  std::vector<bool> seen(tensors.size(), false);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int32_t i = order[k];
    if (i < 0 || static_cast<std::size_t>(i) >= tensors.size()) {
      throw InvalidConfig(fmt::format("ddp_assign_by_size: order[{}] is {}; expected 0..{}", k, i,
                                      static_cast<std::int64_t>(tensors.size()) - 1));
    }
    if (seen[static_cast<std::size_t>(i)]) {
      throw InvalidConfig(fmt::format(
          "ddp_assign_by_size: order[{}] names tensor {} again; expected each tensor at most once",
          k, i));
    }
    seen[static_cast<std::size_t>(i)] = true;
  }
}

// One Megatron buffer (dense or expert), laid out as _ParamAndGradBuffer does: `members` in
// registration order, walked in reverse. `bucket_divisor` is 0 without the distributed optimizer
// (no padding, no embedding split), else lcm(d, 128).
void lay_out_megatron_buffer(const std::vector<ParamTensor>& tensors,
                             const std::vector<std::int32_t>& members,
                             std::optional<std::int64_t> bucket_params, std::int64_t bucket_divisor,
                             bool expert, std::vector<Bucket>& out) {
  const bool distopt = bucket_divisor > 0;
  std::int64_t bucket_start = 0;
  std::int64_t param_start = 0;
  std::vector<std::int32_t> current;
  // Closes `current` at unpadded end `end`; returns the padded end, where the next bucket starts.
  auto close = [&](std::int64_t end) {
    Bucket b = make_bucket(tensors, std::move(current));
    current.clear();
    const std::int64_t padded_end = distopt ? round_up(end, bucket_divisor) : end;
    b.padded_numel = padded_end - bucket_start;
    b.expert = expert;
    out.push_back(std::move(b));
    bucket_start = padded_end;
    return padded_end;
  };
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    const ParamTensor& t = at(tensors, *it);
    if (distopt) param_start = round_up(param_start, kParamAlignment);
    // The first and last stage shard the shared embedding identically only if it fills a bucket
    // of its own: close the open bucket (padded end), start the embedding there, close after it.
    const bool own_bucket = distopt && t.shared_embedding;
    if (own_bucket && !current.empty()) param_start = close(param_start);
    const std::int64_t param_end = param_start + t.numel;
    current.push_back(*it);
    const bool full = bucket_params && param_end - bucket_start >= *bucket_params;
    param_start = (full || own_bucket) ? close(param_end) : param_end;
  }
  if (!current.empty()) close(param_start);
}

}  // namespace

Bucket make_bucket(const std::vector<ParamTensor>& tensors, std::vector<std::int32_t> members) {
  Bucket b;
  b.lowest_layer = at(tensors, members.front()).layer;
  b.highest_layer = b.lowest_layer;
  for (std::int32_t i : members) {
    const ParamTensor& t = at(tensors, i);
    b.numel += t.numel;
    b.lowest_layer = std::min(b.lowest_layer, t.layer);
    b.highest_layer = std::max(b.highest_layer, t.layer);
  }
  b.padded_numel = b.numel;
  b.tensors = std::move(members);
  return b;
}

std::vector<std::int32_t> grad_ready_order(const std::vector<ParamTensor>& tensors) {
  std::vector<std::int32_t> order(tensors.size());
  std::iota(order.rbegin(), order.rend(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return at(tensors, a).layer > at(tensors, b).layer;
  });
  return order;
}

std::vector<Bucket> ddp_assign_by_size(const std::vector<ParamTensor>& tensors,
                                       const std::vector<std::int32_t>& order,
                                       std::int64_t element_bytes,
                                       const std::vector<std::int64_t>& byte_limits) {
  constexpr std::string_view kWhere = "ddp_assign_by_size";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "element_bytes", element_bytes);
  if (byte_limits.empty()) {
    throw InvalidConfig("ddp_assign_by_size: byte_limits is empty; expected at least one limit");
  }
  for (std::size_t k = 0; k < byte_limits.size(); ++k) {
    check_positive(kWhere, fmt::format("byte_limits[{}]", k), byte_limits[k]);
  }
  check_order(tensors, order);

  std::vector<Bucket> buckets;
  std::vector<std::int32_t> current;
  std::int64_t bytes = 0;
  std::size_t limit = 0;  // advances per closed bucket and then stays on the last entry
  for (std::int32_t i : order) {
    current.push_back(i);
    bytes += at(tensors, i).numel * element_bytes;
    if (bytes >= byte_limits[limit]) {
      buckets.push_back(make_bucket(tensors, std::move(current)));
      current.clear();
      bytes = 0;
      if (limit + 1 < byte_limits.size()) ++limit;
    }
  }
  if (!current.empty()) buckets.push_back(make_bucket(tensors, std::move(current)));
  return buckets;
}

std::vector<Bucket> ddp_buckets(const std::vector<ParamTensor>& tensors, std::int64_t element_bytes,
                                std::int64_t first_bucket_bytes, std::int64_t bucket_bytes,
                                bool rebuilt) {
  constexpr std::string_view kWhere = "ddp_buckets";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "first_bucket_bytes", first_bucket_bytes);
  check_positive(kWhere, "bucket_bytes", bucket_bytes);
  if (rebuilt) {
    // The rebuild walks the recorded ready order and keeps it: no sort, no reversal.
    return ddp_assign_by_size(tensors, grad_ready_order(tensors), element_bytes,
                              {first_bucket_bytes, bucket_bytes});
  }
  // Construction: registration order with limit [sys.maxsize], then the bucket list sorted by
  // smallest index and reversed (a no-op for the single bucket, kept to mirror upstream).
  std::vector<std::int32_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<Bucket> buckets =
      ddp_assign_by_size(tensors, order, element_bytes, {std::numeric_limits<std::int64_t>::max()});
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

std::vector<Bucket> megatron_buckets(const std::vector<ParamTensor>& tensors,
                                     std::optional<std::int64_t> bucket_params,
                                     std::int64_t data_parallel, bool distributed_optimizer,
                                     std::optional<std::int64_t> expert_data_parallel) {
  constexpr std::string_view kWhere = "megatron_buckets";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "data_parallel", data_parallel);
  if (expert_data_parallel) check_positive(kWhere, "expert_data_parallel", *expert_data_parallel);
  if (bucket_params) check_positive(kWhere, "bucket_params", *bucket_params);

  std::vector<std::int32_t> dense;
  std::vector<std::int32_t> expert;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    (tensors[i].expert ? expert : dense).push_back(index_of(i));
  }
  auto divisor = [&](std::int64_t d) {
    return distributed_optimizer ? std::lcm(d, kBucketAlignment) : std::int64_t{0};
  };
  std::vector<Bucket> buckets;
  lay_out_megatron_buffer(tensors, dense, bucket_params, divisor(data_parallel), false, buckets);
  lay_out_megatron_buffer(tensors, expert, bucket_params,
                          divisor(expert_data_parallel.value_or(data_parallel)), true, buckets);
  return buckets;
}

std::int64_t megatron_default_bucket_params(std::int64_t data_parallel) {
  check_positive("megatron_default_bucket_params", "data_parallel", data_parallel);
  return std::max<std::int64_t>(40'000'000, 1'000'000 * data_parallel);
}

std::vector<std::int32_t> oss_partition(const std::vector<ParamTensor>& tensors,
                                        std::int32_t world) {
  constexpr std::string_view kWhere = "oss_partition";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "world", world);
  std::vector<std::int64_t> totals(static_cast<std::size_t>(world), 0);
  std::vector<std::int32_t> owners;
  owners.reserve(tensors.size());
  for (const ParamTensor& t : tensors) {
    // min_element returns the first minimum: ties go to the lowest rank, as list.index(min()).
    const auto least = std::min_element(totals.begin(), totals.end());
    *least += t.numel;
    owners.push_back(static_cast<std::int32_t>(least - totals.begin()));
  }
  return owners;
}

ShardedDdpPlan sharded_ddp_plan(const std::vector<ParamTensor>& tensors,
                                const std::vector<std::int32_t>& owners, std::int32_t world,
                                std::int64_t capacity) {
  constexpr std::string_view kWhere = "sharded_ddp_plan";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "world", world);
  if (capacity < 0) {
    throw InvalidConfig(fmt::format("{}: capacity is {}; expected >= 0", kWhere, capacity));
  }
  if (owners.size() != tensors.size()) {
    throw InvalidConfig(fmt::format("{}: {} owners for {} tensors; expected one owner per tensor",
                                    kWhere, owners.size(), tensors.size()));
  }
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (owners[i] < 0 || owners[i] >= world) {
      throw InvalidConfig(fmt::format("{}: owner of tensor {} is {}; expected 0..{}", kWhere, i,
                                      owners[i], world - 1));
    }
  }

  std::vector<std::int32_t> by_size(tensors.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::int32_t a, std::int32_t b) {
    return at(tensors, a).numel < at(tensors, b).numel;
  });
  std::vector<std::int64_t> fill(static_cast<std::size_t>(world), 0);
  std::vector<std::vector<std::int32_t>> members(static_cast<std::size_t>(world));
  std::vector<bool> bucketed(tensors.size(), false);
  for (std::int32_t i : by_size) {
    const auto owner = static_cast<std::size_t>(owners[static_cast<std::size_t>(i)]);
    // GradBucket.can_add_grad_view: strictly below capacity.
    if (fill[owner] + at(tensors, i).numel < capacity) {
      fill[owner] += at(tensors, i).numel;
      members[owner].push_back(i);
      bucketed[static_cast<std::size_t>(i)] = true;
    }
  }

  ShardedDdpPlan plan;
  for (std::size_t r = 0; r < members.size(); ++r) {
    if (members[r].empty()) continue;
    Bucket b = make_bucket(tensors, std::move(members[r]));
    b.owner = static_cast<std::int32_t>(r);
    plan.buckets.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!bucketed[i]) plan.direct.push_back(index_of(i));
  }
  return plan;
}

std::vector<Bucket> zero_ipg_buckets(const std::vector<ParamTensor>& tensors,
                                     std::int64_t bucket_elements) {
  constexpr std::string_view kWhere = "zero_ipg_buckets";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "bucket_elements", bucket_elements);
  std::vector<Bucket> buckets;
  std::vector<std::int32_t> current;
  std::int64_t elements = 0;
  for (std::int32_t i : grad_ready_order(tensors)) {
    const std::int64_t numel = at(tensors, i).numel;
    // The check precedes the copy-in, so an oversized tensor lands in an empty bucket and the next
    // gradient flushes it alone.
    if (!current.empty() && elements + numel > bucket_elements) {
      buckets.push_back(make_bucket(tensors, std::move(current)));
      current.clear();
      elements = 0;
    }
    current.push_back(i);
    elements += numel;
  }
  if (!current.empty()) buckets.push_back(make_bucket(tensors, std::move(current)));
  return buckets;
}

std::vector<Bucket> fsdp_units(const std::vector<ParamTensor>& tensors, std::int64_t shards) {
  constexpr std::string_view kWhere = "fsdp_units";
  check_tensors(kWhere, tensors);
  check_positive(kWhere, "shards", shards);
  std::vector<std::int32_t> root;
  std::map<std::int32_t, std::vector<std::int32_t>> layers;  // ordered: forward order
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    (tensors[i].outside_layers ? root : layers[tensors[i].layer]).push_back(index_of(i));
  }
  std::vector<Bucket> units;
  auto add = [&](std::vector<std::int32_t> members) {
    Bucket b = make_bucket(tensors, std::move(members));
    b.padded_numel = round_up(b.numel, shards);
    units.push_back(std::move(b));
  };
  if (!root.empty()) add(std::move(root));
  for (auto& [layer, members] : layers) add(std::move(members));
  return units;
}

}  // namespace metron::sync
