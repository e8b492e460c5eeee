// How long the IR's own work takes on graphs of training-run size: building and validating,
// the static deadlock check, and the JSON and text forms. The workload is Megatron 1F1B with
// `pp` stages, `dp` replicas and `m` microbatches (tests/support/one_f_one_b_step.h), i.e.
// pp·dp ranks and about 4·m + 2 tasks per rank.
//
//   build/release/bench/ir_bench --benchmark_counters_tabular=true

#include <benchmark/benchmark.h>

#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/json_format.h"
#include "metron/ir/rows_graph.h"
#include "support/one_f_one_b_step.h"

namespace {

using metron::testing::OneFOneBStep;

OneFOneBStep config(const benchmark::State& state) {
  return {.pp = static_cast<std::int32_t>(state.range(0)),
          .dp = static_cast<std::int32_t>(state.range(1)),
          .microbatches = static_cast<std::int32_t>(state.range(2))};
}

void report_tasks(benchmark::State& state, const metron::ir::Graph& g) {
  state.counters["ranks"] = g.num_ranks();
  state.counters["tasks"] = g.num_tasks();
  state.counters["tasks/s"] = benchmark::Counter(
      static_cast<double>(g.num_tasks()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// pp, dp, microbatches: a small pipeline, a 1,024-rank job, and a deep one with many microbatches.
void sizes(benchmark::internal::Benchmark* b) {
  b->Args({4, 2, 8})->Args({16, 64, 64})->Args({64, 4, 256})->Unit(benchmark::kMillisecond);
}

void BM_BuildAndValidate(benchmark::State& state) {
  const OneFOneBStep cfg = config(state);
  metron::ir::Graph g = metron::testing::build_one_f_one_b_step(cfg);
  for (auto _ : state) {
    g = metron::testing::build_one_f_one_b_step(cfg);
    benchmark::DoNotOptimize(g);
  }
  report_tasks(state, g);
}
BENCHMARK(BM_BuildAndValidate)->Apply(sizes);

// Validation and indexing alone: rebuild an existing graph's data.
void BM_Revalidate(benchmark::State& state) {
  const metron::ir::Graph g = metron::testing::build_one_f_one_b_step(config(state));
  for (auto _ : state) benchmark::DoNotOptimize(metron::ir::GraphBuilder(g).build());
  report_tasks(state, g);
}
BENCHMARK(BM_Revalidate)->Apply(sizes);

void BM_DeadlockDryRun(benchmark::State& state) {
  const metron::ir::Graph g = metron::testing::build_one_f_one_b_step(config(state));
  for (auto _ : state) benchmark::DoNotOptimize(metron::ir::find_deadlock(g));
  report_tasks(state, g);
}
BENCHMARK(BM_DeadlockDryRun)->Apply(sizes);

void BM_JsonWriteRead(benchmark::State& state) {
  const metron::ir::Graph g = metron::testing::build_one_f_one_b_step(config(state));
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = metron::ir::to_json(g);
    bytes = text.size();
    benchmark::DoNotOptimize(metron::ir::graph_from_json(text));
  }
  report_tasks(state, g);
  state.counters["json_MiB"] = static_cast<double>(bytes) / (1024.0 * 1024.0);
}
BENCHMARK(BM_JsonWriteRead)->Apply(sizes);

void BM_TextParseAndLower(benchmark::State& state) {
  const metron::ir::Graph g = metron::testing::build_one_f_one_b_step(config(state));
  const std::string text = metron::ir::format_rows(metron::ir::graph_to_rows(g));
  for (auto _ : state) {
    benchmark::DoNotOptimize(metron::ir::rows_to_graph(metron::ir::parse_rows(text)));
  }
  report_tasks(state, g);
}
BENCHMARK(BM_TextParseAndLower)->Apply(sizes);

}  // namespace
