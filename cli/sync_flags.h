#pragma once
// The data-parallel sync flags shared by `simulate` and `schedule`: the policy and its knobs
// (schedules/sync_policy.h). Flags override a scenario's "sync" object knob by knob; naming a
// different policy starts from that policy's defaults.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "metron/sync/sync_policy.h"

namespace metron::cli {

struct SyncFlags {
  std::optional<std::string> policy;
  std::optional<std::int64_t> bucket_size;
  std::optional<std::int64_t> first_bucket_bytes;
  std::optional<std::string> comm_hook;
  std::optional<bool> overlap_grad_reduce;
  std::optional<bool> overlap_param_gather;
  std::optional<bool> align_param_gather;
  bool overlap_param_gather_with_optimizer_step = false;
  std::optional<std::int32_t> instances;
  std::optional<bool> grad_reduce_in_fp32;
  bool no_align_grad_reduce = false;
  std::optional<std::string> fsdp_sharding;
  std::optional<std::string> backward_prefetch;
  bool no_limit_all_gathers = false;
  bool no_reshard_after_forward = false;
  std::optional<std::int32_t> hsdp_shard_size;
  std::optional<std::int64_t> zero_prefetch_bucket_size, zero_param_persistence_threshold,
      zero_max_live_parameters, zero_max_reuse_distance;
  bool broadcast_fp16 = false;
  bool zero_synchronous_fetch = false;
  bool zero_per_tensor_collectives = false;
  bool warmup = false;
};

/// Adds the flags to `cmd` in an option group "Data-parallel sync".
void add_sync_flags(CLI::App& cmd, SyncFlags& flags);

/// `options` with the flags applied. `--sync X` starts from X's defaults, except that with
/// `same_policy_keeps_knobs` (a scenario file's options) naming the policy already in force keeps
/// its knobs: on a built-in scenario the flag means the same in every command, whatever that
/// command's built-in policy is.
sync::SyncOptions apply_sync_flags(const SyncFlags& flags, sync::SyncOptions options,
                                   bool same_policy_keeps_knobs);

}  // namespace metron::cli
