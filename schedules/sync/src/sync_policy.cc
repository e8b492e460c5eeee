// Names of the sync policies and the dispatch of add_sync_policy (Note [sync policies] in
// sync_policy.h); each system's pass lives in its own sync_<system>.cc.

#include "metron/sync/sync_policy.h"

#include <array>
#include <string>

#include "metron/base/error.h"
#include "sync_context.h"
#include "sync_passes.h"

namespace metron::sync {
namespace {

constexpr std::array<std::string_view, 9> kNames{
    "ddp",   "megatron-ddp", "megatron-distopt", "fairscale-sdp", "zero1", "zero2", "zero3",
    "fsdp1", "fsdp2"};
constexpr std::array<std::string_view, 2> kIterationNames{"steady", "warmup"};
constexpr std::array<std::string_view, 3> kShardingNames{"full-shard", "shard-grad-op",
                                                         "hybrid-shard"};
constexpr std::array<std::string_view, 3> kPrefetchNames{"none", "pre", "post"};
constexpr std::array<std::string_view, 3> kHookNames{"none", "fp16-compress", "bf16-compress"};

/// The enumerator whose name (by index in `names`) is `name`.
template <class Enum, std::size_t N>
std::optional<Enum> parse_by_name(const std::array<std::string_view, N>& names,
                                  std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

bool is_megatron(SyncPolicy p) {
  return p == SyncPolicy::kMegatronDdp || p == SyncPolicy::kMegatronDistopt;
}

/// Options that only some systems have, rejected elsewhere so a typo'd combination is not
/// silently ignored.
void check_options(const SyncOptions& o, const SyncInput& in) {
  const std::string name(to_string(o.policy));
  const auto reject = [&](const char* what, const char* who) {
    throw InvalidConfig("sync policy " + name + ": " + what + " applies to " + who + " only");
  };
  if (o.overlap_param_gather && o.policy != SyncPolicy::kMegatronDistopt)
    reject("overlap_param_gather", "megatron-distopt");
  if (o.overlap_param_gather && !o.overlap_grad_reduce.value_or(false)) {
    throw InvalidConfig("sync policy " + name +
                        ": overlap_param_gather needs overlap_grad_reduce (Megatron asserts it)");
  }
  if (o.overlap_param_gather_with_optimizer_step) {
    if (!o.overlap_param_gather) {
      throw InvalidConfig("sync policy " + name +
                          ": overlap_param_gather_with_optimizer_step needs overlap_param_gather");
    }
    if (!in.interleaved) {
      throw InvalidConfig("sync policy " + name +
                          ": overlap_param_gather_with_optimizer_step needs the interleaved "
                          "schedule (Megatron supports it with virtual pipelining only)");
    }
  }
  if (o.distributed_optimizer_instances != 1) {
    if (o.policy != SyncPolicy::kMegatronDistopt)
      reject("distributed_optimizer_instances", "megatron-distopt");
    if (o.distributed_optimizer_instances < 1 ||
        in.data_parallel % o.distributed_optimizer_instances != 0) {
      throw InvalidConfig("sync policy " + name + ": distributed_optimizer_instances " +
                          std::to_string(o.distributed_optimizer_instances) +
                          " must divide the data-parallel size " +
                          std::to_string(in.data_parallel));
    }
  }
  if (o.overlap_grad_reduce && !is_megatron(o.policy) && o.policy != SyncPolicy::kZero1 &&
      o.policy != SyncPolicy::kZero2 && o.policy != SyncPolicy::kZero3) {
    reject("overlap_grad_reduce (overlap_comm)", "Megatron and ZeRO");
  }
  if (o.comm_hook != CommHook::kNone && o.policy != SyncPolicy::kDdp)
    reject("a communication hook", "ddp");
  if (o.zero_synchronous_fetch && o.policy != SyncPolicy::kZero3)
    reject("zero_synchronous_fetch", "zero3");
  if (o.zero_per_tensor_collectives && o.policy != SyncPolicy::kZero3)
    reject("zero_per_tensor_collectives", "zero3");
  if (o.bucket_size && *o.bucket_size < 1) {
    throw InvalidConfig("sync policy " + name + ": bucket size " + std::to_string(*o.bucket_size) +
                        "; expected a positive size");
  }
  if (o.hsdp_shard_size) {
    if (o.policy != SyncPolicy::kFsdp1 && o.policy != SyncPolicy::kFsdp2)
      reject("hsdp_shard_size", "fsdp1 and fsdp2");
    if (*o.hsdp_shard_size < 1 || in.data_parallel % *o.hsdp_shard_size != 0) {
      throw InvalidConfig(
          "sync policy " + name + ": HSDP shard group of " + std::to_string(*o.hsdp_shard_size) +
          " ranks must divide the data-parallel size " + std::to_string(in.data_parallel));
    }
  }
  if (o.fsdp_sharding == FsdpSharding::kHybridShard && !o.hsdp_shard_size) {
    throw InvalidConfig("sync policy " + name +
                        ": HYBRID_SHARD needs the shard group's size (hsdp_shard_size)");
  }
}

}  // namespace

std::string_view to_string(SyncPolicy policy) noexcept {
  return kNames[static_cast<std::size_t>(policy)];
}

std::optional<SyncPolicy> parse_sync_policy(std::string_view name) noexcept {
  return parse_by_name<SyncPolicy>(kNames, name);
}

std::string_view to_string(Iteration value) noexcept {
  return kIterationNames[static_cast<std::size_t>(value)];
}
std::string_view to_string(FsdpSharding value) noexcept {
  return kShardingNames[static_cast<std::size_t>(value)];
}
std::string_view to_string(BackwardPrefetch value) noexcept {
  return kPrefetchNames[static_cast<std::size_t>(value)];
}
std::string_view to_string(CommHook value) noexcept {
  return kHookNames[static_cast<std::size_t>(value)];
}
std::optional<Iteration> parse_iteration(std::string_view name) noexcept {
  return parse_by_name<Iteration>(kIterationNames, name);
}
std::optional<FsdpSharding> parse_fsdp_sharding(std::string_view name) noexcept {
  return parse_by_name<FsdpSharding>(kShardingNames, name);
}
std::optional<BackwardPrefetch> parse_backward_prefetch(std::string_view name) noexcept {
  return parse_by_name<BackwardPrefetch>(kPrefetchNames, name);
}
std::optional<CommHook> parse_comm_hook(std::string_view name) noexcept {
  return parse_by_name<CommHook>(kHookNames, name);
}

std::string_view sync_policy_names() noexcept {
  return "ddp|megatron-ddp|megatron-distopt|fairscale-sdp|zero1|zero2|zero3|fsdp1|fsdp2";
}

SyncPlan add_sync_policy(ir::GraphBuilder& builder, const SyncInput& input,
                         const SyncOptions& options) {
  check_options(options, input);
  detail::SyncContext ctx(builder, input);
  switch (options.policy) {
    case SyncPolicy::kDdp:
      detail::add_ddp_sync(ctx, options);
      break;
    case SyncPolicy::kMegatronDdp:
    case SyncPolicy::kMegatronDistopt:
      detail::add_megatron_sync(ctx, options);
      break;
    case SyncPolicy::kFairscaleSdp:
      detail::add_fairscale_sync(ctx, options);
      break;
    case SyncPolicy::kZero1:
    case SyncPolicy::kZero2:
    case SyncPolicy::kZero3:
      detail::add_zero_sync(ctx, options);
      break;
    case SyncPolicy::kFsdp1:
    case SyncPolicy::kFsdp2:
      detail::add_fsdp_sync(ctx, options);
      break;
  }
  ctx.finish();
  return ctx.take_plan();
}

}  // namespace metron::sync
