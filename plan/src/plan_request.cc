// Note [plan space] (plan_request.h): the default request and the knobs each policy plans with.

#include "metron/plan/plan_request.h"

#include <fmt/format.h>

#include <limits>

#include "metron/base/error.h"
#include "metron/models/limits.h"
#include "metron/pipeline/registry.h"
#include "metron/scenario/scenario.h"

namespace metron::plan {

PlanRequest default_plan_request() {
  const scenario::Scenario s = scenario::default_scenario();
  PlanRequest r;
  r.model = *s.model;
  r.hardware = s.hardware;
  r.gpus = *s.gpus;
  r.global_batch = *s.parallel.global_batch;
  r.seq_len = s.parallel.sequence_length(*s.model);
  return r;
}

sync::SyncOptions planner_sync_options(sync::SyncPolicy policy) {
  using sync::SyncPolicy;
  sync::SyncOptions o{.policy = policy};
  switch (policy) {
    case SyncPolicy::kMegatronDistopt:
      o.overlap_param_gather = true;
      [[fallthrough]];
    case SyncPolicy::kMegatronDdp:
    case SyncPolicy::kZero1:
    case SyncPolicy::kZero2:
      // Megatron's overlap_grad_reduce; ZeRO's overlap_comm (on by default for stage 3 only).
      o.overlap_grad_reduce = true;
      break;
    default:
      break;
  }
  return o;
}

namespace {

void require_positive_list(const std::vector<std::int64_t>& values, const char* name,
                           std::int64_t limit = models::kMaxGpus) {
  for (std::int64_t v : values) {
    if (v < 1) {
      throw InvalidConfig(fmt::format("plan: {} values must be at least 1; got {}", name, v));
    }
    if (v > limit) {
      throw InvalidConfig(
          fmt::format("plan: {} values: expected at most {} (the limit), got {}", name, limit, v));
    }
  }
}

/// Note [input limits]: a value above its limit would hang the enumeration or overflow.
void require_at_most(std::int64_t value, std::int64_t limit, const char* name, const char* what) {
  if (value > limit) {
    throw InvalidConfig(
        fmt::format("plan: {}: expected at most {} ({}), got {}", name, limit, what, value));
  }
}

}  // namespace

void validate(const PlanRequest& r) {
  if (r.gpus < 1) throw InvalidConfig(fmt::format("plan: gpus must be at least 1; got {}", r.gpus));
  if (r.global_batch < 1) {
    throw InvalidConfig(
        fmt::format("plan: global batch must be at least 1; got {}", r.global_batch));
  }
  if (r.seq_len < 0) {
    throw InvalidConfig(fmt::format("plan: sequence length must be positive; got {}", r.seq_len));
  }
  require_at_most(r.gpus, models::kMaxGpus, "gpus", "the limit of GPUs");
  require_at_most(r.global_batch, models::kMaxGlobalBatch, "global batch",
                  "the limit of global batches");
  require_at_most(r.seq_len, models::kMaxSeqLen, "sequence length",
                  "the limit of sequence lengths");
  if (r.top_k < 1)
    throw InvalidConfig(fmt::format("plan: top k must be at least 1; got {}", r.top_k));
  if (!(r.memory_headroom >= 0 && r.memory_headroom < 1)) {
    throw InvalidConfig(
        fmt::format("plan: memory headroom must be in [0, 1); got {}", r.memory_headroom));
  }
  const PlanSpace& s = r.space;
  require_positive_list(s.tp, "tp");
  require_positive_list(s.pp, "pp");
  require_positive_list(s.dp, "dp");
  require_positive_list(s.vp, "vp");
  require_positive_list(s.cp, "cp");
  require_positive_list(s.ep, "ep");
  require_positive_list(s.microbatch_size, "microbatch size", models::kMaxMicrobatchSize);
  require_positive_list(s.bucket_sizes, "bucket size", std::numeric_limits<std::int64_t>::max());
  for (std::int32_t k : s.group_size_multiples) {
    if (k < 1) {
      throw InvalidConfig(fmt::format("plan: group size multiples must be at least 1; got {}", k));
    }
  }
  if (s.max_tp < 0 || s.max_pp < 0 || s.max_vp < 1 || s.max_microbatch_size < 1) {
    throw InvalidConfig(fmt::format(
        "plan: max tp / pp must be >= 0 (0 = default), max vp and max microbatch size >= 1; got "
        "{}, {}, {}, {}",
        s.max_tp, s.max_pp, s.max_vp, s.max_microbatch_size));
  }
  require_at_most(s.max_tp, models::kMaxGpus, "max tp", "the limit of GPUs");
  require_at_most(s.max_pp, models::kMaxGpus, "max pp", "the limit of GPUs");
  require_at_most(s.max_vp, models::kMaxGpus, "max vp", "the limit of GPUs");
  require_at_most(s.max_microbatch_size, models::kMaxMicrobatchSize, "max microbatch size",
                  "the limit of microbatch sizes");
  for (const std::int32_t k : s.group_size_multiples) {
    require_at_most(k, models::kMaxMicrobatches, "group size multiples",
                    "the limit of microbatches per iteration");
  }
  for (const std::string& name : s.schedules) (void)pipeline::find_schedule(name);
  // Refused, not dropped: every configuration would fail the same way, and the request names
  // the recipe.
  for (const models::Fp8Recipe recipe : s.fp8) {
    if (recipe == models::Fp8Recipe::kOff) continue;
    if (!r.hardware.gpu.peak(models::Precision::kFp8)) {
      throw InvalidConfig(fmt::format(
          "plan: fp8 \"{}\" needs a GPU with an fp8 peak; {}'s {} has none (e.g. dgx-h100 has)",
          models::to_string(recipe), r.hardware.name, r.hardware.gpu.name));
    }
    if (r.model.dtype == models::Precision::kFp8) {
      throw InvalidConfig(fmt::format(
          "plan: fp8 \"{}\" needs a model dtype of bf16, fp16 or fp32 to cast from, got fp8",
          models::to_string(recipe)));
    }
  }
}

}  // namespace metron::plan
