// How long generating and lowering a schedule takes at training-run sizes: the planner will do
// this for every configuration it simulates.
//
//   build/release/bench/schedules_bench --benchmark_counters_tabular=true

#include <benchmark/benchmark.h>

#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"

namespace {

using metron::pipeline::ScheduleSpec;

// Schedules by registry index at p = 16 (1 for no pipelining), m = 64 (DualPipe needs m >= 2p),
// with the schedule's fixed chunk count, or 2 where any is allowed.
ScheduleSpec spec_for(std::size_t index) {
  const auto& info = metron::pipeline::all_schedules()[index];
  return {.name = std::string(info.name),
          .pp = info.name == "none" ? 1 : 16,
          .vp = info.fixed_vp != 0 ? info.fixed_vp : 2,
          .microbatches = 64};
}

void BM_Generate(benchmark::State& state) {
  const ScheduleSpec spec = spec_for(static_cast<std::size_t>(state.range(0)));
  state.SetLabel(spec.name);
  for (auto _ : state) benchmark::DoNotOptimize(metron::pipeline::generate_order(spec));
}
BENCHMARK(BM_Generate)->DenseRange(0, 11)->Unit(benchmark::kMillisecond);

void BM_GenerateAndLower(benchmark::State& state) {
  const ScheduleSpec spec = spec_for(static_cast<std::size_t>(state.range(0)));
  state.SetLabel(spec.name);
  std::int32_t tasks = 0;
  for (auto _ : state) {
    const auto graph = metron::lowering::lower(metron::pipeline::generate_order(spec),
                                               {.p2p = metron::lowering::P2PMode::kAsync});
    tasks = graph.num_tasks();
    benchmark::DoNotOptimize(graph);
  }
  state.counters["tasks"] = tasks;
}
BENCHMARK(BM_GenerateAndLower)->DenseRange(0, 11)->Unit(benchmark::kMillisecond);

}  // namespace
