// The executor's dispatch overhead (issue 16): what the core and the CPU backend add per task,
// measured on a rank whose tasks do nothing. The graph is one rank of the 1F1B step lowered with
// async p2p, its communication replaced by nothing, so every task still goes through the host
// walk (waits, launches, events), the stream threads, the hardware-queue turns, the buffer
// accounting and the timing. Reported: time per task (items_per_second inverted).
//
//   build/release/bench/exec_bench --benchmark_filter=Dispatch

#include <benchmark/benchmark.h>

#include <chrono>

#include "metron/exec/cpu_backend.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"

namespace {

using namespace metron;

void BM_DispatchPerTask(benchmark::State& state) {
  const ir::Graph graph = lowering::lower(
      pipeline::generate_order({.name = "1f1b",
                                .pp = 4,
                                .vp = 1,
                                .microbatches = static_cast<std::int32_t>(state.range(0))}),
      {.p2p = lowering::P2PMode::kAsync});
  // Rank 0 only: its transfers must not wait for peers that are not running.
  exec::RankExecutor executor(graph, exec::rank_program(graph, ir::RankId{0}));
  exec::CpuBackend backend(executor.program(),
                           {.compute = [](const exec::Launch&, const ir::Compute&) {},
                            .collective = [](const exec::Launch&, const ir::Collective&) {},
                            .send = [](const exec::Launch&, const ir::Send&) {},
                            .recv = [](const exec::Launch&, const ir::Recv&) {}},
                           std::chrono::milliseconds(60000));
  std::int64_t iteration = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(executor.run(backend, iteration++));
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<std::int64_t>(executor.program().steps.size()));
}
BENCHMARK(BM_DispatchPerTask)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
