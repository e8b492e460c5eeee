// Note [plan space] (plan_request.h), enumerated outermost dimension first (search_space.h).

#include "metron/plan/search_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include "metron/base/error.h"
#include "metron/pipeline/registry.h"

namespace metron::plan {
namespace {

using pipeline::Placement;
using pipeline::ScheduleInfo;

constexpr std::array<std::string_view, kDropReasons> kReasonNames = {
    "tensor-parallel", "layers",   "sequence", "experts", "gpus",
    "batch",           "schedule", "policy",   "memory",  "simulation"};

/// Megatron's two schedules: what the planner searches unless told otherwise.
constexpr std::array<std::string_view, 2> kDefaultSchedules = {"1f1b", "interleaved-1f1b"};

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(d);
    if (d != n / d) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = first; v <= last; ++v) out.push_back(v);
  return out;
}

/// The listed values, else the default ones.
std::vector<std::int64_t> values_or(const std::vector<std::int64_t>& listed,
                                    std::vector<std::int64_t> defaults) {
  if (listed.empty()) return defaults;
  std::vector<std::int64_t> out = listed;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// Chunks per rank a schedule runs with (the vp of its Candidate).
std::vector<std::int64_t> chunk_counts(const ScheduleInfo& info, const PlanSpace& space) {
  if (info.fixed_vp != 0) return {info.fixed_vp};
  if (!takes_many_chunks(info.name)) return {1};
  std::vector<std::int64_t> out;
  for (std::int64_t v : values_or(space.vp, range(2, space.max_vp))) {
    if (v >= 2) out.push_back(v);
  }
  return out;
}

class Enumerator {
 public:
  explicit Enumerator(const PlanRequest& r) : r_(r), m_(r.model) {
    seq_ = r.seq_len > 0 ? r.seq_len : m_.seq_len;
    for (std::string_view name : kDefaultSchedules) schedules_.push_back(name);
    if (!r.space.schedules.empty()) {
      schedules_.clear();
      for (const std::string& name : r.space.schedules) {
        schedules_.push_back(pipeline::find_schedule(name).name);
      }
    }
    policies_ = r.space.policies;
    if (policies_.empty()) policies_ = {sync::SyncPolicy::kMegatronDistopt};
    buckets_.assign(r.space.bucket_sizes.begin(), r.space.bucket_sizes.end());
    if (buckets_.empty()) buckets_.emplace_back(std::nullopt);
  }

  SearchSpace run() {
    const std::int64_t max_tp = r_.space.max_tp > 0
                                    ? r_.space.max_tp
                                    : std::max<std::int64_t>(1, r_.hardware.gpus_per_node);
    for (std::int64_t tp : values_or(r_.space.tp, range(1, max_tp))) {
      if (!tensor_parallel_fits(tp)) continue;
      for (std::int64_t cp : values_or(r_.space.cp, default_context_parallel_sizes(seq_))) {
        over_cp(tp, cp);
      }
    }
    return std::move(out_);
  }

 private:
  void drop(DropReason reason, std::string family, std::string detail) {
    out_.dropped.push_back({reason, std::move(family), std::move(detail), 0});
  }

  // Complete configurations dropped by one rule, counted per family of tp/cp/pp/schedule/vp.
  void drop_complete(DropReason reason, const std::string& family, const std::string& detail,
                     std::int64_t configurations) {
    const auto key = std::make_pair(reason, family);
    auto [it, fresh] = counted_.try_emplace(key, out_.dropped.size());
    if (fresh) out_.dropped.push_back({reason, family, detail, 0});
    out_.dropped[it->second].configurations += configurations;
  }

  // The interleaved group sizes a candidate is tried with (nullopt: the schedule's default).
  std::vector<std::optional<std::int32_t>> group_sizes(const Candidate& c) const {
    if (c.schedule != "interleaved-1f1b" || r_.space.group_size_multiples.empty())
      return {std::nullopt};
    std::vector<std::optional<std::int32_t>> out;
    for (std::int32_t k : r_.space.group_size_multiples) {
      out.emplace_back(static_cast<std::int32_t>(k * c.parallel.pp));
    }
    return out;
  }

  // Complete configurations below one choice of sizes: group size × policy × bucket size.
  std::int64_t below_sizes(const Candidate& c) const {
    return static_cast<std::int64_t>(group_sizes(c).size() * policies_.size() * buckets_.size());
  }

  bool tensor_parallel_fits(std::int64_t tp) {
    const std::string family = fmt::format("tp={}", tp);
    std::vector<std::string> problems;
    if (m_.heads % tp != 0) problems.push_back(fmt::format("heads ({})", m_.heads));
    if (m_.num_kv_heads() % tp != 0) {
      problems.push_back(fmt::format("kv heads ({})", m_.num_kv_heads()));
    }
    if (m_.ffn_size() % tp != 0) problems.push_back(fmt::format("ffn ({})", m_.ffn_size()));
    if (!problems.empty()) {
      drop(DropReason::kTensorParallel, family,
           fmt::format("{} not divisible by tp = {}", fmt::join(problems, ", "), tp));
      return false;
    }
    if (tp > r_.gpus) {
      drop(DropReason::kGpus, family, fmt::format("tp = {} exceeds the {} GPUs", tp, r_.gpus));
      return false;
    }
    return true;
  }

  void over_cp(std::int64_t tp, std::int64_t cp) {
    const std::string family = fmt::format("tp={} cp={}", tp, cp);
    if (cp > 1 && seq_ % (2 * cp) != 0) {
      drop(DropReason::kSequence, family,
           fmt::format("sequence {} not divisible by 2·cp = {} (load-balanced context split)", seq_,
                       2 * cp));
      return;
    }
    if (tp * cp > r_.gpus) {
      drop(DropReason::kGpus, family,
           fmt::format("tp·cp = {} exceeds the {} GPUs", tp * cp, r_.gpus));
      return;
    }
    const std::int64_t max_pp = r_.space.max_pp > 0 ? r_.space.max_pp : m_.layers;
    for (std::int64_t pp : values_or(r_.space.pp, range(1, std::min(max_pp, m_.layers)))) {
      const std::string pp_family =
          fmt::format("tp={}{} pp={}", tp, cp > 1 ? fmt::format(" cp={}", cp) : "", pp);
      models::ParallelSpec one_chunk{.pp = pp};
      if (m_.layers % pp != 0 && !split_unevenly(one_chunk, m_.layers)) {
        drop(DropReason::kLayers, pp_family,
             fmt::format("layers ({}) split over pp = {} neither evenly nor with lighter first "
                         "and last ranks",
                         m_.layers, pp));
        continue;
      }
      if (tp * cp * pp > r_.gpus) {
        drop(DropReason::kGpus, pp_family,
             fmt::format("tp·cp·pp = {} exceeds the {} GPUs", tp * cp * pp, r_.gpus));
        continue;
      }
      for (std::string_view name : schedules_)
        over_schedule(tp, cp, pp, pipeline::find_schedule(name));
    }
  }

  void over_schedule(std::int64_t tp, std::int64_t cp, std::int64_t pp, const ScheduleInfo& info) {
    for (std::int64_t vp : chunk_counts(info, r_.space)) {
      const std::string family = family_of(
          Candidate{.parallel = {.tp = tp, .pp = pp, .vp = vp, .cp = cp}, .schedule = info.name});
      if (pp == 1 && (vp > 1 || info.placement != Placement::kLoop)) {
        drop(DropReason::kSchedule, family, "needs pp >= 2 (several stages)");
        continue;
      }
      if (pp == 1 && info.name != "1f1b" &&
          std::find(schedules_.begin(), schedules_.end(), "1f1b") != schedules_.end()) {
        drop(DropReason::kSchedule, family,
             "with one stage it runs as 1f1b (gradient accumulation): ranked there");
        continue;
      }
      const std::int64_t model_stages = info.placement == Placement::kBidirectional ? pp : pp * vp;
      models::ParallelSpec split{.pp = pp, .vp = vp};
      if (m_.layers % model_stages != 0) {
        // Uneven splits for the loop placements only: a V or DualPipe puts the first and the
        // last model stage on the same rank, which Megatron's first/last counts do not describe.
        if (info.placement != Placement::kLoop || !split_unevenly(split, m_.layers)) {
          drop(DropReason::kLayers, family,
               fmt::format("layers ({}) not divisible by {} model stages (pp·vp){}", m_.layers,
                           model_stages,
                           info.placement == Placement::kLoop
                               ? ", nor split with lighter first and last ranks"
                               : ""));
          continue;
        }
      }
      const std::int64_t max_dp = r_.gpus / (tp * cp * pp);
      std::vector<std::int64_t> dps;
      if (r_.space.dp.empty()) {
        for (std::int64_t d : divisors(r_.global_batch)) {
          if (d <= max_dp) dps.push_back(d);
        }
      } else {
        for (std::int64_t d : values_or(r_.space.dp, {})) {
          if (d > max_dp) {
            drop(DropReason::kGpus, family + fmt::format(" dp={}", d),
                 fmt::format("tp·cp·pp·dp = {} exceeds the {} GPUs", tp * cp * pp * d, r_.gpus));
          } else if (r_.global_batch % d != 0) {
            drop(DropReason::kBatch, family + fmt::format(" dp={}", d),
                 fmt::format("global batch {} not divisible by dp = {}", r_.global_batch, d));
          } else {
            dps.push_back(d);
          }
        }
      }
      for (std::int64_t dp : dps) {
        Candidate c{.parallel = {.tp = tp, .pp = pp, .dp = dp, .vp = vp, .cp = cp},
                    .schedule = info.name};
        c.parallel.first_stage_layers = split.first_stage_layers;
        c.parallel.last_stage_layers = split.last_stage_layers;
        c.parallel.account_for_embedding_in_pipeline_split =
            split.account_for_embedding_in_pipeline_split;
        c.parallel.account_for_loss_in_pipeline_split = split.account_for_loss_in_pipeline_split;
        over_dp(c, family);
      }
    }
  }

  void over_dp(Candidate c, const std::string& family) {
    const std::int64_t local = r_.global_batch / c.parallel.dp;
    std::vector<std::int64_t> sizes;
    for (std::int64_t b : values_or(r_.space.microbatch_size, divisors(local))) {
      if (!r_.space.microbatch_size.empty() && local % b != 0) {
        drop(DropReason::kBatch, family + fmt::format(" dp={} mbs={}", c.parallel.dp, b),
             fmt::format("global batch {} not divisible by dp·mbs = {}", r_.global_batch,
                         c.parallel.dp * b));
      } else if (!r_.space.microbatch_size.empty() || b <= r_.space.max_microbatch_size) {
        sizes.push_back(b);
      }
    }
    std::vector<bool> sps;
    if (r_.space.sequence_parallel.empty()) {
      // On wherever the sequence splits over tp·cp (Megatron needs seq divisible by it).
      sps = {c.parallel.tp > 1 && seq_ % (c.parallel.tp * c.parallel.cp) == 0};
    } else {
      for (bool sp : r_.space.sequence_parallel) {
        if (c.parallel.tp == 1 && sp) continue;  // Megatron turns it off at tp = 1: a duplicate
        if (std::find(sps.begin(), sps.end(), sp) == sps.end()) sps.push_back(sp);
      }
      if (sps.empty()) sps = {false};
    }
    std::vector<models::Recompute> recomputes = r_.space.recompute;
    if (recomputes.empty()) {
      recomputes = {models::Recompute::kNone, models::Recompute::kSelective,
                    models::Recompute::kFull};
    }
    const std::vector<models::AttentionKernel> attentions =
        r_.space.attention.empty() ? std::vector{models::AttentionKernel::kUnfused}
                                   : r_.space.attention;
    const std::vector<models::Fp8Recipe> fp8s =
        r_.space.fp8.empty() ? std::vector{models::Fp8Recipe::kOff} : r_.space.fp8;
    std::vector<std::int64_t> eps = {1};
    if (m_.moe) {
      eps.clear();
      for (std::int64_t e : values_or(r_.space.ep, divisors(m_.moe->experts))) {
        if ((c.parallel.dp * c.parallel.cp) % e == 0 && m_.moe->experts % e == 0) eps.push_back(e);
      }
    }
    for (std::int64_t mbs : sizes) {
      c.parallel.microbatch_size = mbs;
      c.parallel.global_batch = r_.global_batch;
      c.parallel.seq_len = seq_;
      const std::int64_t m = local / mbs;
      for (bool sp : sps) {
        c.parallel.sequence_parallel = sp;
        const std::int64_t split = (sp ? c.parallel.tp : 1) * c.parallel.cp;
        if (split > 1 && seq_ % split != 0) {
          // Every recompute, ep, group size, policy and bucket below this choice.
          drop_complete(DropReason::kSequence, family,
                        fmt::format("sequence {} not divisible by tp·cp = {} (sequence parallel)",
                                    seq_, split),
                        static_cast<std::int64_t>(attentions.size() * fp8s.size() *
                                                  tp_comm_overlaps(c.parallel).size() *
                                                  recomputes.size() * eps.size()) *
                            below_sizes(c));
          continue;
        }
        const std::vector<bool> overlaps = tp_comm_overlaps(c.parallel);
        for (const models::AttentionKernel attention : attentions) {
          c.parallel.attention = attention;
          for (const models::Fp8Recipe fp8 : fp8s) {
            c.parallel.fp8 = fp8;
            for (const bool overlap : overlaps) {
              c.parallel.tp_comm_overlap = overlap;
              for (models::Recompute rc : recomputes) {
                c.parallel.recompute = rc;
                for (std::int64_t ep : eps) {
                  c.parallel.ep = ep;
                  over_schedule_sizes(c, m, family);
                }
              }
            }
          }
        }
      }
    }
  }

  // The tp_comm_overlap values a configuration is tried with: the listed ones where they mean
  // something. At tp 1 there is no tensor-parallel collective to overlap (on would be a
  // duplicate of off); without sequence parallelism Megatron refuses it, so on is not tried
  // there (the sequence-parallel configurations beside it are).
  std::vector<bool> tp_comm_overlaps(const models::ParallelSpec& p) const {
    std::vector<bool> out;
    for (const bool on : r_.space.tp_comm_overlap) {
      if (on && (p.tp == 1 || !p.sequence_parallel)) continue;
      if (std::find(out.begin(), out.end(), on) == out.end()) out.push_back(on);
    }
    if (out.empty()) out = {false};
    return out;
  }

  // The schedule's own rules for this microbatch count and group size, then policy × bucket.
  void over_schedule_sizes(Candidate c, std::int64_t m, const std::string& family) {
    const auto per_group = static_cast<std::int64_t>(policies_.size() * buckets_.size());
    for (const std::optional<std::int32_t>& n : group_sizes(c)) {
      c.group_size = n;
      if (const std::optional<std::string> why = schedule_problem(c, m)) {
        drop_complete(DropReason::kSchedule, family, *why, per_group);
        continue;
      }
      for (sync::SyncPolicy policy : policies_) {
        c.policy = policy;
        if (policy == sync::SyncPolicy::kZero3 && c.parallel.ep > 1) {
          drop_complete(DropReason::kPolicy, family, "zero3 does not shard expert tensors",
                        static_cast<std::int64_t>(buckets_.size()));
          continue;
        }
        for (const std::optional<std::int64_t>& bucket : buckets_) {
          c.bucket_size = bucket;
          out_.candidates.push_back(c);
        }
      }
    }
  }

  // The schedule generator's verdict, remembered per (schedule, pp, vp, m, group size).
  std::optional<std::string> schedule_problem(const Candidate& c, std::int64_t m) {
    const auto key =
        std::make_tuple(c.schedule, c.parallel.pp, c.parallel.vp, m, c.group_size.value_or(0));
    auto it = schedule_checks_.find(key);
    if (it != schedule_checks_.end()) return it->second;
    std::optional<std::string> problem;
    try {
      pipeline::check_spec({.name = std::string(c.schedule),
                            .pp = static_cast<std::int32_t>(c.parallel.pp),
                            .vp = static_cast<std::int32_t>(c.parallel.vp),
                            .microbatches = static_cast<std::int32_t>(m),
                            .group_size = c.group_size});
    } catch (const InvalidConfig& e) {
      problem = e.what();
    }
    schedule_checks_.emplace(key, problem);
    return problem;
  }

  const PlanRequest& r_;
  const models::ModelSpec& m_;
  std::int64_t seq_ = 0;
  std::vector<std::string_view> schedules_;
  std::vector<sync::SyncPolicy> policies_;
  std::vector<std::optional<std::int64_t>> buckets_;
  SearchSpace out_;
  std::map<std::pair<DropReason, std::string>, std::size_t> counted_;
  std::map<std::tuple<std::string_view, std::int64_t, std::int64_t, std::int64_t, std::int32_t>,
           std::optional<std::string>>
      schedule_checks_;
};

}  // namespace

std::optional<std::pair<std::int64_t, std::int64_t>> uneven_stage_layers(std::int64_t layers,
                                                                         std::int64_t pp,
                                                                         std::int64_t vp) {
  if (pp < 2 || layers < pp * vp) return std::nullopt;
  if (pp == 2) {
    const std::int64_t first = layers / 2 / vp * vp;
    if (first < vp || (layers - first) % vp != 0) return std::nullopt;
    return std::make_pair(first, layers - first);
  }
  for (std::int64_t edge = layers / pp / vp * vp; edge >= vp; edge -= vp) {
    const std::int64_t rest = layers - 2 * edge;
    if (rest % (pp - 2) != 0) continue;
    const std::int64_t middle = rest / (pp - 2);
    if (middle % vp == 0 && middle >= edge) return std::make_pair(edge, edge);
  }
  return std::nullopt;
}

bool split_unevenly(models::ParallelSpec& spec, std::int64_t layers) {
  if (const auto edges = uneven_stage_layers(layers, spec.pp, spec.vp)) {
    spec.first_stage_layers = edges->first;
    spec.last_stage_layers = edges->second;
    return true;
  }
  const std::int64_t stages = spec.pp * spec.vp;
  if (spec.pp < 2 || (layers + 2) % stages != 0 || (layers + 2) / stages < 2) return false;
  spec.account_for_embedding_in_pipeline_split = true;
  spec.account_for_loss_in_pipeline_split = true;
  return true;
}

std::vector<std::int64_t> default_context_parallel_sizes(std::int64_t seq) {
  std::vector<std::int64_t> out = {1};
  for (std::int64_t cp = 2; seq / cp >= kMinContextShard && seq % (2 * cp) == 0; cp *= 2) {
    out.push_back(cp);
  }
  return out;
}

bool takes_many_chunks(std::string_view schedule) noexcept {
  return schedule == "interleaved-1f1b" || schedule == "interleaved-1f1b-legacy" ||
         schedule == "looped-bfs";
}

std::string_view to_string(DropReason reason) noexcept {
  return kReasonNames[static_cast<std::size_t>(reason)];
}

std::string family_of(const Candidate& c) {
  const models::ParallelSpec& p = c.parallel;
  return fmt::format("tp={}{} pp={} {} vp={}", p.tp, p.cp > 1 ? fmt::format(" cp={}", p.cp) : "",
                     p.pp, c.schedule, p.vp);
}

std::string describe(const Candidate& c) {
  const models::ParallelSpec& p = c.parallel;
  std::string out = fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) out += fmt::format(" cp{}", p.cp);
  if (p.ep > 1) out += fmt::format(" ep{}", p.ep);
  out += fmt::format(" vp{} mbs{}", p.vp, p.microbatch_size);
  // Each as set: one alone leaves the rest to split evenly ("first0" would name a first stage of
  // no layers).
  if (p.first_stage_layers) out += fmt::format(" first{}", *p.first_stage_layers);
  if (p.last_stage_layers) out += fmt::format(" last{}", *p.last_stage_layers);
  if (p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split) {
    out += p.account_for_embedding_in_pipeline_split
               ? (p.account_for_loss_in_pipeline_split ? " account=embedding+loss"
                                                       : " account=embedding")
               : " account=loss";
  }
  // Said either way where tensor parallelism could shard the sequence: the configuration text
  // takes sequence parallelism on at tp > 1 when it is not named (Note [configuration text]).
  if (p.sp()) {
    out += " sp";
  } else if (p.tp > 1) {
    out += " nosp";
  }
  out += fmt::format(" {}", c.schedule);
  if (c.group_size) out += fmt::format(" N={}", *c.group_size);
  out += fmt::format(" {}", sync::to_string(c.policy));
  if (c.bucket_size) out += fmt::format(" bucket={}", *c.bucket_size);
  if (p.recompute != models::Recompute::kNone) {
    out += fmt::format(" recompute={}", models::to_string(p.recompute));
  }
  if (p.attention != models::AttentionKernel::kUnfused) {
    out += fmt::format(" attention={}", models::to_string(p.attention));
  }
  if (p.fp8 != models::Fp8Recipe::kOff) out += fmt::format(" fp8={}", models::to_string(p.fp8));
  if (p.tp_comm_overlap) out += " tpoverlap";
  return out;
}

scenario::Scenario to_scenario(const PlanRequest& request, const Candidate& c) {
  scenario::Scenario s;
  s.model = request.model;
  s.hardware = request.hardware;
  s.gpus = c.parallel.gpus();
  s.parallel = c.parallel;
  s.schedule = {.name = std::string(c.schedule), .group_size = c.group_size};
  s.sync = planner_sync_options(c.policy);
  s.sync.bucket_size = c.bucket_size;
  return s;
}

SearchSpace enumerate_space(const PlanRequest& request) {
  validate(request);
  return Enumerator(request).run();
}

}  // namespace metron::plan
