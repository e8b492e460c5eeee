// One training step of GPT-3 175B on 1,024 H100 GPUs — tp 8, pp 16, dp 8, interleaved 1F1B with
// 2 chunks, 64 microbatches, Megatron's distributed optimizer — built (schedule, lowering,
// data-parallel all-reduce, durations from the cost models) and simulated, as the planner will
// do for every configuration it keeps. Target (issue 5): under 20 ms.
//
//   build/release/bench/plan_bench --benchmark_counters_tabular=true
//
// Symmetric mode simulates one data-parallel replica (16 ranks) and charges the collectives for
// all 8; the full graph (128 ranks) is measured beside it for comparison.

#include <benchmark/benchmark.h>

#include "metron/scenario/evaluation.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"

namespace {

metron::scenario::Scenario gpt3_175b_on_1024_h100() {
  metron::scenario::Scenario s = metron::scenario::default_scenario();
  s.parallel.global_batch.reset();
  s.parallel.num_microbatches = 64;
  return s;
}

void BM_BuildStep(benchmark::State& state) {
  const metron::scenario::Scenario s = gpt3_175b_on_1024_h100();
  const auto replication = static_cast<metron::scenario::Replication>(state.range(0));
  std::int64_t tasks = 0;
  for (auto _ : state) {
    const metron::scenario::Step step = metron::scenario::build_step(s, replication);
    tasks = step.graph.num_tasks();
    benchmark::DoNotOptimize(step.durations.data());
  }
  state.counters["tasks"] = static_cast<double>(tasks);
}
BENCHMARK(BM_BuildStep)->Arg(0)->Arg(1)->ArgName("full")->Unit(benchmark::kMillisecond);

void BM_BuildAndSimulateStep(benchmark::State& state) {
  const metron::scenario::Scenario s = gpt3_175b_on_1024_h100();
  const auto replication = static_cast<metron::scenario::Replication>(state.range(0));
  double iteration_ms = 0;
  for (auto _ : state) {
    const metron::scenario::Evaluation e = metron::scenario::evaluate(s, replication);
    iteration_ms = e.iteration_time_s * 1e3;
    benchmark::DoNotOptimize(e.result.makespan);
  }
  state.counters["iteration_ms"] = iteration_ms;
}
BENCHMARK(BM_BuildAndSimulateStep)->Arg(0)->Arg(1)->ArgName("full")->Unit(benchmark::kMillisecond);

}  // namespace
