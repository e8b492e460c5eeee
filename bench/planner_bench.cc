// The planner's search (issue 7). Calculon's README plans Turing-NLG 530B on 5,128 A100-80GB
// GPUs with a batch of up to 2,520 sequences of 2,048 tokens over tensor/pipeline/data sizes,
// microbatch sizes, interleaving and recompute: 8,112 configurations in 50.8 s on a 2-core
// machine. The analogous search here is `metron plan --model turing-530b --hardware dgx-a100
// --gpus 5128 --global-batch 2520 --seq 2048` (Note [plan space]: 1F1B and interleaved 1F1B,
// Megatron's distributed optimizer, every tp/pp/dp/vp, microbatch size and recompute), with
// event-level simulation of every configuration that could be in the top 10. Target: < 1 s.
//
//   build/release/bench/planner_bench --benchmark_counters_tabular=true
//
// Counters: configurations enumerated, bounded (feasible: given a bound), simulated; the time of
// enumerating and estimating (wall seconds) and of building and simulating the steps (seconds
// summed over the threads).

#include <benchmark/benchmark.h>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/plan/planner.h"

namespace {

metron::plan::PlanRequest turing_530b_on_5128_a100() {
  metron::plan::PlanRequest r;
  r.model = metron::models::model_preset("turing-530b");
  r.hardware = metron::models::hardware_preset("dgx-a100");
  r.gpus = 5128;
  r.global_batch = 2520;
  r.seq_len = 2048;
  return r;
}

void run(benchmark::State& state, const metron::plan::PlanRequest& request) {
  metron::plan::PlanResult result;
  for (auto _ : state) {
    result = metron::plan::run_plan(request, {.threads = 0});
    benchmark::DoNotOptimize(result.ranked.data());
  }
  state.counters["enumerated"] = static_cast<double>(result.stats.enumerated);
  state.counters["bounded"] = static_cast<double>(result.stats.bounded);
  state.counters["simulated"] = static_cast<double>(result.stats.simulated);
  state.counters["best_s"] = result.ranked.empty() ? 0.0 : result.ranked.front().iteration_time_s;
  // Where the last run's time went (PlanStats::Phases): wall seconds, then thread seconds.
  state.counters["enum_s"] = result.stats.phases.enumerate_s;
  state.counters["estim_s"] = result.stats.phases.estimate_s;
  state.counters["build_ts"] = result.stats.phases.build_s;
  state.counters["sim_ts"] = result.stats.phases.simulate_s;
}

void BM_PlanTuring530B(benchmark::State& state) { run(state, turing_530b_on_5128_a100()); }
BENCHMARK(BM_PlanTuring530B)->Unit(benchmark::kMillisecond)->UseRealTime();

// `metron plan` with no arguments: GPT-3 175B on 1,024 H100s, batch 1,536.
void BM_PlanDefault(benchmark::State& state) { run(state, metron::plan::default_plan_request()); }
BENCHMARK(BM_PlanDefault)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
