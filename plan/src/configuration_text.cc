// Note [configuration text] (configuration_text.h).

#include "metron/plan/configuration_text.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/limits.h"
#include "metron/pipeline/registry.h"

namespace metron::plan {
namespace {

constexpr std::string_view kFields =
    "tpN, ppN, dpN, cpN, epN, vpN, mbsN, firstN, lastN, sp, nosp, recompute=MODE, N=K, bucket=B, "
    "attention=KERNEL, fp8=RECIPE, tpoverlap, notpoverlap, account=embedding+loss, a schedule or "
    "a sync policy";

constexpr std::int64_t kMaxBucket = std::int64_t{1} << 40;

/// The fields a configuration names, before the planner's defaults fill the rest.
struct Named {
  std::optional<std::int64_t> tp, pp, dp, cp, ep, vp, mbs, first, last, group_size, bucket;
  std::optional<bool> sp, tp_comm_overlap;
  std::optional<models::Recompute> recompute;
  std::optional<models::AttentionKernel> attention;
  std::optional<models::Fp8Recipe> fp8;
  std::optional<std::string_view> schedule;
  std::optional<sync::SyncPolicy> policy;
  bool account_named = false;  // account=embedding, account=loss, account=embedding+loss
  bool account_embedding = false;
  bool account_loss = false;
};

[[noreturn]] void refuse(std::string_view text, const std::string& why) {
  throw InvalidConfig(fmt::format("--compare-with '{}': {}", text, why));
}

/// N in "tp8" or "tp=8" after `prefix`; nullopt when `token` does not start with it.
std::optional<std::int64_t> number_after(std::string_view token, std::string_view prefix,
                                         std::int64_t max, std::string_view text) {
  if (!token.starts_with(prefix)) return std::nullopt;
  std::string_view digits = token.substr(prefix.size());
  if (digits.starts_with('=')) digits.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || value < 1 ||
      value > max) {
    refuse(text, fmt::format("'{}': expected {} followed by a whole number in [1, {}]", token,
                             prefix, max));
  }
  return value;
}

/// Sets `field` once; a second mention is refused (which of the two would be meant?).
template <class T>
void set_once(std::optional<T>& field, T value, std::string_view token, std::string_view text) {
  if (field) refuse(text, fmt::format("'{}' names a field a second time", token));
  field = value;
}

Named read_tokens(std::string_view text) {
  Named n;
  const std::array<std::pair<std::string_view, std::optional<std::int64_t> Named::*>, 11> numbers{{
      {"tp", &Named::tp},
      {"pp", &Named::pp},
      {"dp", &Named::dp},
      {"cp", &Named::cp},
      {"ep", &Named::ep},
      {"vp", &Named::vp},
      {"mbs", &Named::mbs},
      {"first", &Named::first},
      {"last", &Named::last},
      {"N=", &Named::group_size},
      {"bucket=", &Named::bucket},
  }};
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t start = text.find_first_not_of(' ', at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(text.find(' ', start), text.size());
    const std::string_view token = text.substr(start, end - start);
    at = end;
    bool known = false;
    for (const auto& [prefix, field] : numbers) {
      if (!token.starts_with(prefix)) continue;
      // A schedule or policy may start like a field ("dualpipe" with "dp"): only digits make
      // the token a number.
      const std::string_view rest = token.substr(prefix.size());
      if (rest.empty() || (rest.front() != '=' && (rest.front() < '0' || rest.front() > '9'))) {
        continue;
      }
      // Sizes are bounded as the GPUs are; a bucket is bytes or elements.
      const std::int64_t max = field == &Named::bucket ? kMaxBucket : models::kMaxGpus;
      set_once(n.*field, *number_after(token, prefix, max, text), token, text);
      known = true;
      break;
    }
    if (known) continue;
    if (token == "sp" || token == "nosp") {
      set_once(n.sp, token == "sp", token, text);
    } else if (token == "tpoverlap" || token == "notpoverlap") {
      set_once(n.tp_comm_overlap, token == "tpoverlap", token, text);
    } else if (token.starts_with("recompute=")) {
      const std::optional<models::Recompute> r = models::parse_recompute(token.substr(10));
      if (!r) refuse(text, fmt::format("'{}': expected recompute=none|selective|full", token));
      set_once(n.recompute, *r, token, text);
    } else if (token.starts_with("attention=")) {
      const std::optional<models::AttentionKernel> a =
          models::parse_attention_kernel(token.substr(10));
      if (!a) refuse(text, fmt::format("'{}': expected attention=unfused|fused", token));
      set_once(n.attention, *a, token, text);
    } else if (token.starts_with("account=")) {
      const std::string_view what = token.substr(8);
      if (what != "embedding" && what != "loss" && what != "embedding+loss") {
        refuse(text, fmt::format("'{}': expected account=embedding|loss|embedding+loss", token));
      }
      if (n.account_named) refuse(text, fmt::format("'{}' names a field a second time", token));
      n.account_named = true;
      n.account_embedding = what != "loss";
      n.account_loss = what != "embedding";
    } else if (token.starts_with("fp8=")) {
      const std::optional<models::Fp8Recipe> r = models::parse_fp8_recipe(token.substr(4));
      if (!r) refuse(text, fmt::format("'{}': expected fp8=off|delayed|current", token));
      set_once(n.fp8, *r, token, text);
    } else if (const std::optional<sync::SyncPolicy> p = sync::parse_sync_policy(token)) {
      set_once(n.policy, *p, token, text);
    } else {
      bool schedule = false;
      for (const pipeline::ScheduleInfo& info : pipeline::all_schedules()) {
        if (info.name != token) continue;
        set_once(n.schedule, info.name, token, text);
        schedule = true;
      }
      if (!schedule) {
        refuse(text, fmt::format("'{}' is not a configuration field; expected {}", token, kFields));
      }
    }
  }
  return n;
}

// The kernel options the configuration text takes where it names none: the request's first
// allowed value, the scenario's default when the request lists none (Note [plan space]); the
// overlap only with sequence parallelism.
struct KernelDefaults {
  models::AttentionKernel attention;
  models::Fp8Recipe fp8;
  bool tp_comm_overlap;
};

KernelDefaults kernel_defaults(const PlanRequest& request, bool sequence_parallel) {
  const PlanSpace& space = request.space;
  return {.attention =
              space.attention.empty() ? models::AttentionKernel::kUnfused : space.attention.front(),
          .fp8 = space.fp8.empty() ? models::Fp8Recipe::kOff : space.fp8.front(),
          .tp_comm_overlap =
              !space.tp_comm_overlap.empty() && space.tp_comm_overlap.front() && sequence_parallel};
}

}  // namespace

std::string describe(const PlanRequest& request, const Candidate& c) {
  // describe(c) names every option that differs from the scenario's default; what it leaves out
  // is the default, which the request's first listed value may not be.
  std::string out = describe(c);
  const models::ParallelSpec& p = c.parallel;
  const KernelDefaults taken = kernel_defaults(request, p.sp());
  if (p.attention == models::AttentionKernel::kUnfused && taken.attention != p.attention) {
    out += " attention=unfused";
  }
  if (p.fp8 == models::Fp8Recipe::kOff && taken.fp8 != p.fp8) out += " fp8=off";
  if (!p.tp_comm_overlap && taken.tp_comm_overlap) out += " notpoverlap";
  return out;
}

Candidate parse_configuration(const PlanRequest& request, std::string_view text) {
  const Named n = read_tokens(text);
  Candidate c;
  models::ParallelSpec& p = c.parallel;
  p.tp = n.tp.value_or(1);
  p.pp = n.pp.value_or(1);
  p.cp = n.cp.value_or(1);
  p.ep = n.ep.value_or(1);
  c.schedule = n.schedule.value_or(n.vp.value_or(1) > 1 ? "interleaved-1f1b" : "1f1b");
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(c.schedule);
  const std::int64_t default_vp =
      info.fixed_vp != 0 ? info.fixed_vp : (takes_many_chunks(c.schedule) ? 2 : 1);
  p.vp = n.vp.value_or(default_vp);
  const std::int64_t model_parallel = p.tp * p.pp * p.cp;
  p.dp = n.dp.value_or(std::max<std::int64_t>(1, request.gpus / model_parallel));
  p.microbatch_size = n.mbs.value_or(1);
  p.global_batch = request.global_batch;
  const std::int64_t seq = request.seq_len > 0 ? request.seq_len : request.model.seq_len;
  p.seq_len = seq;
  // At tp 1 there is nothing to shard the sequence over: "sp" there is off, as Megatron turns it
  // off (and as the search never pairs it with tp 1).
  p.sequence_parallel = n.sp.value_or(seq % (p.tp * p.cp) == 0) && p.tp > 1;
  p.recompute = n.recompute.value_or(models::Recompute::kNone);
  const KernelDefaults taken = kernel_defaults(request, p.sp());
  p.attention = n.attention.value_or(taken.attention);
  p.fp8 = n.fp8.value_or(taken.fp8);
  p.tp_comm_overlap = n.tp_comm_overlap.value_or(taken.tp_comm_overlap);
  p.first_stage_layers = n.first;
  p.last_stage_layers = n.last;
  const std::int64_t model_stages =
      info.placement == pipeline::Placement::kBidirectional ? p.pp : p.pp * p.vp;
  p.account_for_embedding_in_pipeline_split = n.account_embedding;
  p.account_for_loss_in_pipeline_split = n.account_loss;
  if (!n.first && !n.last && !n.account_named && request.model.layers % model_stages != 0 &&
      info.placement == pipeline::Placement::kLoop) {
    (void)split_unevenly(p, request.model.layers);
  }
  if (n.group_size) c.group_size = static_cast<std::int32_t>(*n.group_size);
  c.policy = n.policy.value_or(sync::SyncPolicy::kMegatronDistopt);
  c.bucket_size = n.bucket;
  try {
    models::validate(p, request.model, p.gpus());
  } catch (const InvalidConfig& e) {
    refuse(text, fmt::format("as {}: {}", describe(c), e.what()));
  }
  if (p.gpus() > request.gpus) {
    refuse(text,
           fmt::format("{} uses {} GPUs; the request has {}", describe(c), p.gpus(), request.gpus));
  }
  return c;
}

}  // namespace metron::plan
