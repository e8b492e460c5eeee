#pragma once
// The planner: search a plan request's space (search_space.h) and rank what fits by simulated
// throughput. Note [bound and simulate]:
//
//   1. Enumerate (search_space.h); drop what breaks a divisibility or schedule rule.
//   2. For every remaining configuration, in parallel: the peak memory per rank from the memory
//      model and the schedule's in-flight activations (candidate_estimate.h); drop what does not
//      fit; a lower bound on the iteration time from its compute and blocking communication.
//   3. Simulate in order of rising bound, on every thread, keeping the k best (iteration time,
//      then enumeration order); a configuration whose bound exceeds the current k-th best time
//      cannot enter the ranking and, since the rest are sorted by bound, ends the search. The
//      k-th best only falls, and every configuration of the exhaustive top k has a bound no
//      higher than its time, so the ranking equals the exhaustive one whatever the thread count.
//
//   A simulated configuration can still be dropped: its simulated peak memory (which adds the
//   sync policy's own buffers to the estimate) exceeds the usable capacity, or its step
//   deadlocks. Both modes apply the same checks to what they simulate, so the ranking stays
//   exact. The exhaustive mode simulates every feasible configuration (for tests).

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "metron/plan/plan_request.h"
#include "metron/plan/search_space.h"
#include "metron/scenario/scenario.h"

namespace metron::plan {

/// One ranked configuration.
struct PlannedConfig {
  Candidate candidate;
  scenario::Scenario scenario;
  std::int64_t gpus = 0;  ///< tp·pp·dp·cp
  double bound_s = 0;     ///< the lower bound it was admitted with
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double exposed_comm_fraction = 0;
  double peak_memory_bytes = 0;       ///< the highest simulated rank
  double estimated_memory_bytes = 0;  ///< the memory model's estimate for the same rank set
  double memory_capacity_bytes = 0;   ///< the GPU's HBM
};

/// What the search did, for the closing line and the benchmark.
struct PlanStats {
  std::int64_t enumerated = 0;  ///< complete configurations
  std::int64_t bounded = 0;     ///< feasible by the rules and memory estimate: given a bound
  std::int64_t simulated = 0;
  std::int64_t pruned = 0;                           ///< bounded but never simulated
  std::array<std::int64_t, kDropReasons> dropped{};  ///< complete configurations, by reason
  std::int32_t threads = 1;
  double seconds = 0;  ///< wall time of the whole search
  /// Where the time went (issue 20's breakdown): enumeration and estimation in wall seconds;
  /// building the simulated steps (graph, lowering, sync policy, durations) and simulating them
  /// in seconds summed over the threads that did them.
  struct Phases {
    double enumerate_s = 0;
    double estimate_s = 0;
    double build_s = 0;     ///< thread seconds
    double simulate_s = 0;  ///< thread seconds
  } phases;
};

/// Progress of the two long phases; reported from one thread at a time. When the bound ends the
/// simulating phase early, its last report has done = total = the configurations simulated.
struct PlanProgress {
  std::string_view phase;  ///< "estimating" or "simulating"
  std::int64_t done = 0;
  std::int64_t total = 0;
};

struct PlanOptions {
  std::int32_t threads = 0;  ///< 0: every core
  bool exhaustive = false;   ///< simulate every feasible configuration (no bound pruning)
  std::function<void(const PlanProgress&)> progress;
};

struct PlanResult {
  std::vector<PlannedConfig> ranked;   ///< best first, at most request.top_k
  std::vector<DroppedFamily> dropped;  ///< rule, memory and simulation drops (see search_space.h)
  PlanStats stats;
};

/// A configuration the user names (`metron plan --compare-with`), estimated and simulated as
/// the search does what it ranks. Note [compared configuration]: its place is among
/// result.ranked by iteration time, as if the search had ranked it — its own position when it
/// is one of them, else 1 + the ranked configurations faster than it (a configuration outside
/// the searched space, another schedule say, is placed the same way). Slower than the last of a
/// full ranking (top k), it has no place: the search keeps only k. Nor has one that does not
/// fit the memory or whose step deadlocks; `problem` says why.
struct ComparedConfig {
  PlannedConfig config;
  std::optional<std::size_t> rank;  ///< 1-based
  std::string problem;              ///< empty when it can run
};

/// Note [compared configuration]. Throws InvalidConfig when the models reject the candidate.
ComparedConfig compare_configuration(const PlanRequest& request, const PlanResult& result,
                                     const Candidate& candidate);

/// Note [bound and simulate]. Throws InvalidConfig for an invalid request.
PlanResult run_plan(const PlanRequest& request, const PlanOptions& options = {});

}  // namespace metron::plan
