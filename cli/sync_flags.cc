#include "sync_flags.h"

#include <limits>
#include <string>

#include "integer_flags.h"

namespace metron::cli {
namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

/// A CLI11 validator accepting the names `parse` knows.
template <class Parse>
CLI::Validator names(Parse parse, const std::string& expected) {
  return CLI::Validator(
      [parse, expected](std::string& name) {
        return parse(name) ? std::string() : "unknown name '" + name + "', expected " + expected;
      },
      expected);
}

/// --NAME / --no-NAME into one optional<bool>.
void add_switch(CLI::Option_group& g, const std::string& name, std::optional<bool>& value,
                const std::string& help) {
  g.add_flag_callback(
      "--" + name, [&value] { value = true; }, help);
  g.add_flag_callback(
      "--no-" + name, [&value] { value = false; }, "");
}

}  // namespace

void add_sync_flags(CLI::App& cmd, SyncFlags& f) {
  CLI::Option_group& g = *cmd.add_option_group(
      "Data-parallel sync", "the gradient/parameter synchronisation policy and its knobs");
  g.add_option("--sync", f.policy,
               "policy: " + std::string(sync::sync_policy_names()) +
                   " (docs/SYNC_POLICIES.md); it starts from its own defaults (on a scenario\n"
                   "file, naming the file's own policy keeps the file's knobs)")
      ->check(names(sync::parse_sync_policy, std::string(sync::sync_policy_names())));
  g.add_option("--bucket-size", f.bucket_size,
               "ddp: bucket_cap in bytes (default 25 MiB); megatron: elements "
               "(max(40M, 1M·dp)); zero: reduce_bucket_size (5e8); fairscale: "
               "reduce_buffer_size (2^23)");
  g.add_option("--first-bucket-bytes", f.first_bucket_bytes, "ddp: first bucket (1 MiB)");
  g.add_option("--comm-hook", f.comm_hook, "ddp: none, fp16-compress or bf16-compress")
      ->check(names(sync::parse_comm_hook, "none|fp16-compress|bf16-compress"));
  add_switch(g, "overlap-grad-reduce", f.overlap_grad_reduce,
             "megatron: overlap_grad_reduce; zero: overlap_comm (default on for zero3 only)");
  add_switch(g, "overlap-param-gather", f.overlap_param_gather,
             "megatron-distopt: all-gather in the next forward's pre-hooks");
  add_switch(g, "align-param-gather", f.align_param_gather,
             "megatron-distopt, interleaved: dispatch gathers at the schedule's points "
             "(default on)");
  g.add_flag("--overlap-param-gather-with-optimizer-step",
             f.overlap_param_gather_with_optimizer_step,
             "megatron-distopt, interleaved: gather chunk 0 right after its optimizer step");
  g.add_option("--dist-opt-instances", f.instances,
               "megatron-distopt: num_distributed_optimizer_instances (1)")
      ->check(integer_in(1, kMaxInt32));
  add_switch(g, "grad-reduce-in-fp32", f.grad_reduce_in_fp32,
             "megatron: reduce gradients in fp32 (default: on for bf16, as Megatron)");
  g.add_flag("--no-align-grad-reduce", f.no_align_grad_reduce,
             "megatron, interleaved: gradient sync by hooks instead of grad_sync_func");
  g.add_option("--fsdp-sharding", f.fsdp_sharding,
               "fsdp1: full-shard (default), shard-grad-op or hybrid-shard")
      ->check(names(sync::parse_fsdp_sharding, "full-shard|shard-grad-op|hybrid-shard"));
  g.add_option("--backward-prefetch", f.backward_prefetch, "fsdp1: none, pre (default) or post")
      ->check(names(sync::parse_backward_prefetch, "none|pre|post"));
  g.add_flag("--no-limit-all-gathers", f.no_limit_all_gathers, "fsdp1: no rate limiter");
  g.add_flag("--no-reshard-after-forward", f.no_reshard_after_forward,
             "fsdp2: keep gathered parameters from forward to backward");
  g.add_option("--hsdp-shard-size", f.hsdp_shard_size,
               "fsdp: ranks per shard group for HYBRID_SHARD / HSDP")
      ->check(integer_in(1, kMaxInt32));
  g.add_option("--zero-prefetch-bucket-size", f.zero_prefetch_bucket_size,
               "zero3: stage3_prefetch_bucket_size (5e7 elements)");
  g.add_option("--zero-param-persistence-threshold", f.zero_param_persistence_threshold,
               "zero3: stage3_param_persistence_threshold (1e5)");
  g.add_option("--zero-max-live-parameters", f.zero_max_live_parameters,
               "zero3: stage3_max_live_parameters (1e9)");
  g.add_option("--zero-max-reuse-distance", f.zero_max_reuse_distance,
               "zero3: stage3_max_reuse_distance (1e9)");
  g.add_flag("--broadcast-fp16", f.broadcast_fp16, "fairscale: broadcast parameters in fp16");
  g.add_flag("--zero-synchronous-fetch", f.zero_synchronous_fetch,
             "zero3: DeepSpeed's 2021 fetch (v0.3.13 to v0.5.x), which device-synchronises\n"
             "before each parameter all-gather and after each fetch");
  g.add_flag("--zero-per-tensor-collectives", f.zero_per_tensor_collectives,
             "zero3: DeepSpeed's collectives through v0.5.x, one call per parameter tensor over\n"
             "a list of dp views, whose host time grows with the data-parallel size");
  g.add_flag("--warmup", f.warmup,
             "simulate the first (warm-up) iteration instead of the steady state");
}

sync::SyncOptions apply_sync_flags(const SyncFlags& f, sync::SyncOptions o,
                                   bool same_policy_keeps_knobs) {
  if (f.policy) {
    const sync::SyncPolicy policy = *sync::parse_sync_policy(*f.policy);
    if (policy != o.policy || !same_policy_keeps_knobs) o = sync::SyncOptions{.policy = policy};
  }
  if (f.bucket_size) o.bucket_size = *f.bucket_size;
  if (f.first_bucket_bytes) o.first_bucket_bytes = *f.first_bucket_bytes;
  if (f.comm_hook) o.comm_hook = *sync::parse_comm_hook(*f.comm_hook);
  if (f.overlap_grad_reduce) o.overlap_grad_reduce = *f.overlap_grad_reduce;
  if (f.overlap_param_gather) o.overlap_param_gather = *f.overlap_param_gather;
  if (f.align_param_gather) o.align_param_gather = *f.align_param_gather;
  if (f.overlap_param_gather_with_optimizer_step) o.overlap_param_gather_with_optimizer_step = true;
  if (f.instances) o.distributed_optimizer_instances = *f.instances;
  if (f.grad_reduce_in_fp32) o.grad_reduce_in_fp32 = *f.grad_reduce_in_fp32;
  if (f.no_align_grad_reduce) o.align_grad_reduce = false;
  if (f.fsdp_sharding) o.fsdp_sharding = *sync::parse_fsdp_sharding(*f.fsdp_sharding);
  if (f.backward_prefetch)
    o.backward_prefetch = *sync::parse_backward_prefetch(*f.backward_prefetch);
  if (f.no_limit_all_gathers) o.limit_all_gathers = false;
  if (f.no_reshard_after_forward) o.reshard_after_forward = false;
  if (f.hsdp_shard_size) o.hsdp_shard_size = *f.hsdp_shard_size;
  if (f.zero_prefetch_bucket_size) o.zero_prefetch_bucket_size = *f.zero_prefetch_bucket_size;
  if (f.zero_param_persistence_threshold)
    o.zero_param_persistence_threshold = *f.zero_param_persistence_threshold;
  if (f.zero_max_live_parameters) o.zero_max_live_parameters = *f.zero_max_live_parameters;
  if (f.zero_max_reuse_distance) o.zero_max_reuse_distance = *f.zero_max_reuse_distance;
  if (f.broadcast_fp16) o.broadcast_fp16 = true;
  if (f.zero_synchronous_fetch) o.zero_synchronous_fetch = true;
  if (f.zero_per_tensor_collectives) o.zero_per_tensor_collectives = true;
  if (f.warmup) o.iteration = sync::Iteration::kWarmup;
  return o;
}

}  // namespace metron::cli
