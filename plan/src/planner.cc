// Note [bound and simulate] (planner.h).

#include "metron/plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "metron/base/error.h"
#include "metron/base/parallel_for.h"
#include "metron/models/limits.h"
#include "metron/plan/estimate.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/step_builder.h"
#include "metron/sim/simulator.h"

namespace metron::plan {
namespace {

constexpr double kGb = 1e9;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Why one complete configuration was dropped after enumeration. A memory drop keeps the
/// numbers of its shortfall, not its text: tens of thousands are dropped, and only the
/// least-memory one of each family is ever shown (collect_drops writes that one's detail).
struct Drop {
  DropReason reason = DropReason::kMemory;
  std::string detail;              ///< other drops: what refused the configuration
  double need_bytes = 0;           ///< memory drops: the peak that did not fit
  std::int32_t need_rank = 0;      ///< memory drops: the pipeline rank of that peak
  std::string_view how = "needs";  ///< memory drops: "needs" (estimate) or "simulated peak"
};

/// Reports progress at most every 1/200 of the work, from whichever thread gets there.
class ProgressReporter {
 public:
  ProgressReporter(const PlanOptions& options, std::string_view phase, std::int64_t total)
      : options_(options),
        phase_(phase),
        total_(total),
        step_(std::max<std::int64_t>(1, total / 200)) {
    report(0);
  }
  void tick() {
    const std::lock_guard lock(mutex_);
    ++done_;
    if (done_ % step_ == 0 || done_ == total_) report(done_);
  }
  /// The bound ended the phase after `done` items: report it complete at that size.
  void finish(std::int64_t done) {
    const std::lock_guard lock(mutex_);
    report(done, done);
  }

 private:
  void report(std::int64_t done) const { report(done, total_); }
  void report(std::int64_t done, std::int64_t total) const {
    if (options_.progress) options_.progress({.phase = phase_, .done = done, .total = total});
  }
  const PlanOptions& options_;
  std::string_view phase_;
  std::int64_t total_;
  std::int64_t step_;
  std::int64_t done_ = 0;
  std::mutex mutex_;
};

/// The memory every rank may use.
double usable_bytes(const PlanRequest& r) {
  return static_cast<double>(r.hardware.gpu.hbm_capacity) * (1 - r.memory_headroom);
}

/// "simulated peak 341.1 GB on pipeline rank 1 > 72.0 GB usable (90% of 80.0 GB)".
std::string memory_shortfall(const PlanRequest& r, double need, std::int32_t rank,
                             std::string_view how) {
  return fmt::format("{} {:.1f} GB on pipeline rank {} > {:.1f} GB usable ({:.0f}% of {:.1f} GB)",
                     how, need / kGb, rank, usable_bytes(r) / kGb, 100 * (1 - r.memory_headroom),
                     static_cast<double>(r.hardware.gpu.hbm_capacity) / kGb);
}

/// A dropped family's detail: the shortfall of its least-memory configuration, named.
std::string memory_detail(const PlanRequest& r, double need, std::int32_t rank, const Candidate& c,
                          std::string_view how) {
  return memory_shortfall(r, need, rank, how) + "; least-memory configuration: " + describe(c);
}

/// A simulated configuration, ordered by (iteration time, enumeration index).
struct Simulated {
  sim::Time time = 0;
  std::size_t index = 0;
  PlannedConfig config;
  friend bool operator<(const Simulated& a, const Simulated& b) {
    return std::tie(a.time, a.index) < std::tie(b.time, b.index);
  }
};

/// The pipeline rank with the highest simulated memory (symmetric mode: rank = pipeline rank).
std::int32_t peak_rank(const scenario::Evaluation& e) {
  const auto& peaks = e.peak_memory_bytes;
  return static_cast<std::int32_t>(std::max_element(peaks.begin(), peaks.end()) - peaks.begin()) %
         std::max<std::int32_t>(1, e.step.pipeline_ranks);
}

PlannedConfig planned(const Candidate& c, const scenario::Evaluation& e, const Estimate& estimate,
                      const PlanRequest& r) {
  PlannedConfig p;
  p.candidate = c;
  p.scenario = e.scenario;
  p.gpus = c.parallel.gpus();
  p.bound_s = estimate.bound_s;
  p.iteration_time_s = e.iteration_time_s;
  p.tokens_per_s = e.tokens_per_s;
  p.mfu = e.mfu;
  p.bubble_fraction = e.bubble_fraction;
  p.exposed_comm_fraction = e.exposed_comm_fraction;
  p.peak_memory_bytes = e.peak_memory_bytes.empty() ? 0.0
                                                    : *std::max_element(e.peak_memory_bytes.begin(),
                                                                        e.peak_memory_bytes.end());
  p.estimated_memory_bytes = estimate.peak_memory_bytes;
  p.memory_capacity_bytes = static_cast<double>(r.hardware.gpu.hbm_capacity);
  return p;
}

class Search {
 public:
  Search(const PlanRequest& request, const PlanOptions& options)
      : r_(request), options_(options), estimator_(request) {}

  PlanResult run() {
    const auto start = std::chrono::steady_clock::now();
    PlanResult out;
    out.stats.threads = options_.threads > 0 ? options_.threads : hardware_threads();
    PlanStats::Phases& phases = out.stats.phases;
    SearchSpace space = enumerate_space(r_);
    phases.enumerate_s = seconds_since(start);
    candidates_ = std::move(space.candidates);
    out.stats.enumerated = static_cast<std::int64_t>(candidates_.size());
    for (const DroppedFamily& f : space.dropped) {
      out.stats.enumerated += f.configurations;
      out.stats.dropped[static_cast<std::size_t>(f.reason)] += f.configurations;
    }
    out.dropped = std::move(space.dropped);
    const auto estimating = std::chrono::steady_clock::now();
    estimate_all();
    phases.estimate_s = seconds_since(estimating);
    const std::vector<std::size_t> order = feasible_by_bound();
    out.stats.bounded = static_cast<std::int64_t>(order.size());
    simulate(order);
    out.stats.simulated = simulated_count_;
    phases.build_s = build_s_;
    phases.simulate_s = simulate_s_;
    out.stats.pruned = out.stats.bounded - simulated_count_;
    collect_drops(out);
    std::sort(results_.begin(), results_.end());
    for (std::size_t i = 0; i < results_.size() && i < static_cast<std::size_t>(r_.top_k); ++i) {
      out.ranked.push_back(std::move(results_[i].config));
    }
    out.stats.seconds = seconds_since(start);
    return out;
  }

 private:
  // Phase 2: memory and bound of every configuration, in parallel.
  void estimate_all() {
    estimates_.resize(candidates_.size());
    drops_.resize(candidates_.size());
    ProgressReporter progress(options_, "estimating",
                              static_cast<std::int64_t>(candidates_.size()));
    const double usable = usable_bytes(r_);
    parallel_for(static_cast<std::int64_t>(candidates_.size()), options_.threads,
                 [&](std::int64_t i) {
                   const auto k = static_cast<std::size_t>(i);
                   try {
                     Estimate e = estimator_.estimate(candidates_[k]);
                     if (e.peak_memory_bytes > usable) {
                       drops_[k] = Drop{.reason = DropReason::kMemory,
                                        .need_bytes = e.peak_memory_bytes,
                                        .need_rank = e.peak_rank};
                     }
                     e.memory_bytes.clear();
                     estimates_[k] = std::move(e);
                   } catch (const InvalidConfig& error) {
                     drops_[k] = Drop{.reason = DropReason::kPolicy, .detail = error.what()};
                   }
                   progress.tick();
                 });
  }

  std::vector<std::size_t> feasible_by_bound() const {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      if (!drops_[i]) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return estimates_[a]->bound_s < estimates_[b]->bound_s;
    });
    return order;
  }

  // Phase 3: simulate by rising bound while the bound can still beat the k-th best.
  void simulate(const std::vector<std::size_t>& order) {
    ProgressReporter progress(options_, "simulating", static_cast<std::int64_t>(order.size()));
    const double usable = usable_bytes(r_);
    parallel_for(static_cast<std::int64_t>(order.size()), options_.threads, [&](std::int64_t i) {
      const std::size_t k = order[static_cast<std::size_t>(i)];
      const Estimate& estimate = *estimates_[k];
      if (!options_.exhaustive && !can_enter(estimate.bound_s)) return;
      std::optional<Simulated> done;
      std::optional<Drop> drop;
      double built_s = 0;
      double simulated_s = 0;
      try {
        // scenario::evaluate, timed in its two parts.
        const scenario::Scenario s = to_scenario(r_, candidates_[k]);
        const auto building = std::chrono::steady_clock::now();
        scenario::Step step = scenario::build_step(s);
        built_s = seconds_since(building);
        const auto simulating = std::chrono::steady_clock::now();
        sim::SimResult result = sim::simulate(step.graph, step.durations, step.sim_options());
        simulated_s = seconds_since(simulating);
        const scenario::Evaluation e =
            scenario::evaluation_of(s, std::move(step), std::move(result));
        PlannedConfig p = planned(candidates_[k], e, estimate, r_);
        if (p.peak_memory_bytes > usable) {
          drop = Drop{.reason = DropReason::kMemory,
                      .need_bytes = p.peak_memory_bytes,
                      .need_rank = peak_rank(e),
                      .how = "simulated peak"};
        } else {
          done = Simulated{.time = e.result.makespan, .index = k, .config = std::move(p)};
        }
      } catch (const sim::SimulationDeadlock& error) {
        drop = Drop{.reason = DropReason::kSimulation, .detail = error.what()};
      } catch (const InvalidConfig& error) {
        drop = Drop{.reason = DropReason::kPolicy, .detail = error.what()};
      }
      const std::lock_guard lock(mutex_);
      ++simulated_count_;
      build_s_ += built_s;
      simulate_s_ += simulated_s;
      if (drop) drops_[k] = std::move(drop);
      if (done) admit(std::move(*done));
      progress.tick();
    });
    progress.finish(simulated_count_);
  }

  /// Whether a configuration with this bound could still enter the top k.
  bool can_enter(double bound_s) {
    const std::lock_guard lock(mutex_);
    if (kth_best_.size() < static_cast<std::size_t>(r_.top_k)) return true;
    return bound_s * 1e9 <= static_cast<double>(kth_best_.back());
  }

  void admit(Simulated s) {
    kth_best_.insert(std::upper_bound(kth_best_.begin(), kth_best_.end(), s.time), s.time);
    if (kth_best_.size() > static_cast<std::size_t>(r_.top_k)) kth_best_.pop_back();
    results_.push_back(std::move(s));
  }

  // Drops after enumeration, per (reason, family) in enumeration order; a memory family keeps
  // the detail of its least-memory configuration.
  void collect_drops(PlanResult& out) const {
    std::map<std::pair<DropReason, std::string>, std::size_t> families;
    std::map<std::size_t, std::size_t> least;  // memory family -> its least-memory candidate
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      if (!drops_[i]) continue;
      const Drop& d = *drops_[i];
      ++out.stats.dropped[static_cast<std::size_t>(d.reason)];
      auto [it, fresh] =
          families.try_emplace({d.reason, family_of(candidates_[i])}, out.dropped.size());
      if (fresh) out.dropped.push_back({d.reason, it->first.second, d.detail, 0});
      if (d.reason == DropReason::kMemory) {
        auto [low, first] = least.try_emplace(it->second, i);
        if (!first && d.need_bytes < drops_[low->second]->need_bytes) low->second = i;
      }
      ++out.dropped[it->second].configurations;
    }
    for (const auto& [family, i] : least) {
      const Drop& d = *drops_[i];
      out.dropped[family].detail =
          memory_detail(r_, d.need_bytes, d.need_rank, candidates_[i], d.how);
    }
  }

  const PlanRequest& r_;
  const PlanOptions& options_;
  Estimator estimator_;
  std::vector<Candidate> candidates_;
  std::vector<std::optional<Estimate>> estimates_;
  std::vector<std::optional<Drop>> drops_;
  std::mutex mutex_;
  std::vector<sim::Time> kth_best_;  ///< the best times so far, ascending, at most k
  std::vector<Simulated> results_;
  std::int64_t simulated_count_ = 0;
  double build_s_ = 0;
  double simulate_s_ = 0;
};

}  // namespace

PlanResult run_plan(const PlanRequest& request, const PlanOptions& options) {
  validate(request);
  if (options.threads < 0 || options.threads > models::kMaxThreads) {
    throw InvalidConfig(fmt::format(
        "plan: threads: expected 0 (every core) to {} (the limit of worker threads), got {}",
        models::kMaxThreads, options.threads));
  }
  try {
    return Search(request, options).run();
  } catch (const std::system_error& e) {
    // std::thread reports a machine that cannot start another thread this way.
    throw BackendError(
        fmt::format("plan: cannot run on {} threads: {}", options.threads, e.what()));
  }
}

ComparedConfig compare_configuration(const PlanRequest& request, const PlanResult& result,
                                     const Candidate& candidate) {
  ComparedConfig out;
  const Estimator estimator(request);
  const Estimate estimate = estimator.estimate(candidate);
  out.config.candidate = candidate;
  out.config.gpus = candidate.parallel.gpus();
  out.config.memory_capacity_bytes = static_cast<double>(request.hardware.gpu.hbm_capacity);
  try {
    const scenario::Evaluation e = scenario::evaluate(to_scenario(request, candidate));
    out.config = planned(candidate, e, estimate, request);
    if (out.config.peak_memory_bytes > usable_bytes(request)) {
      out.problem =
          memory_shortfall(request, out.config.peak_memory_bytes, peak_rank(e), "simulated peak");
    }
  } catch (const sim::SimulationDeadlock& error) {
    out.problem = error.what();
  }
  if (!out.problem.empty()) return out;
  const std::vector<PlannedConfig>& ranked = result.ranked;
  std::size_t faster = 0;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].candidate == candidate) {
      out.rank = i + 1;
      return out;
    }
    if (ranked[i].iteration_time_s < out.config.iteration_time_s) ++faster;
  }
  if (faster < ranked.size() || ranked.size() < static_cast<std::size_t>(request.top_k)) {
    out.rank = faster + 1;
  }
  return out;
}

}  // namespace metron::plan
