// How fast the simulator runs, and how much memory it needs, on graphs of more than a million
// tasks: it sits inside the planner's inner loop (docs/ARCHITECTURE.md, "Simulator"). Targets:
// >= 10 million simulated tasks per second on one core, <= 200 bytes of simulator state per task.
//
//   build/release/bench/sim_bench --benchmark_counters_tabular=true
//
// Workloads: Megatron 1F1B with data-parallel replicas, built by hand
// (tests/support/one_f_one_b_step.h: p2p on send/receive streams, a gradient all-reduce per stage,
// activation buffers), and Megatron interleaved 1F1B lowered with async p2p.
//
// bytes/task counts every byte the simulation allocates and still holds at its peak (its state
// and the SimResult it returns), through the replaced global operator new below.

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <variant>
#include <vector>

#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"
#include "metron/sim/simulator.h"
#include "support/one_f_one_b_step.h"

namespace {

// Live and peak heap bytes, by malloc_usable_size so that unsized deletes are counted too.
std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_peak_bytes{0};

void note_allocated(void* p) {
  const auto now = g_live_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p))) +
                   static_cast<std::int64_t>(malloc_usable_size(p));
  std::int64_t peak = g_peak_bytes.load();
  while (now > peak && !g_peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

// Out of line: inlined into operator delete, GCC 12 mistakes free() for a mismatched
// deallocation of the pointer operator new returned (-Wmismatched-new-delete).
[[gnu::noinline]] void release(void* p) noexcept {
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace

// The replaceable global allocation functions (their names are fixed by the standard).
void* operator new(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  note_allocated(p);
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr) release(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace {

using metron::sim::Time;
namespace ir = metron::ir;

// Durations of the hand-made workload, in ns: roughly a 1.3B-parameter model's layer pair on an
// A100 (forward 10 µs per microbatch here, backward twice that), 1 µs transfers, 50 µs bucket
// all-reduces. Only their ratios matter for speed.
constexpr Time kForward = 10'000;
constexpr Time kBackward = 20'000;
constexpr Time kOptimizer = 5'000;
constexpr Time kTransfer = 1'000;
constexpr Time kAllReduce = 50'000;

std::vector<Time> durations_of(const ir::Graph& g) {
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()), 0);
  for (std::size_t i = 0; i < d.size(); ++i) {
    const ir::Task& t = g.tasks()[i];
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      d[i] = c->phase == ir::Phase::kForward     ? kForward
             : c->phase == ir::Phase::kOptimizer ? kOptimizer
                                                 : kBackward;
    } else if (t.kind() == ir::TaskKind::kCollective) {
      d[i] = kAllReduce;
    } else if (t.is_communication()) {
      d[i] = kTransfer;
    }
  }
  return d;
}

void simulate_and_report(benchmark::State& state, const ir::Graph& g) {
  const std::vector<Time> d = durations_of(g);
  const metron::sim::SimOptions options{.compute_slowdown_during_comm =
                                            static_cast<double>(state.range(0)) / 100.0};
  // Memory: one run outside the timed loop, from a baseline that holds the graph and durations.
  std::int64_t bytes = 0;
  {
    const std::int64_t base = g_live_bytes.load();
    g_peak_bytes.store(base);
    const metron::sim::SimResult r = metron::sim::simulate(g, d, options);
    bytes = g_peak_bytes.load() - base;
    state.counters["makespan_ms"] = static_cast<double>(r.makespan) / 1e6;
  }
  for (auto _ : state) benchmark::DoNotOptimize(metron::sim::simulate(g, d, options));
  const auto tasks = static_cast<double>(g.num_tasks());
  state.counters["ranks"] = g.num_ranks();
  state.counters["tasks"] = tasks;
  state.counters["tasks/s"] = benchmark::Counter(tasks * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["bytes/task"] = static_cast<double>(bytes) / tasks;
}

// 16 stages x 48 replicas = 768 ranks, 256 microbatches: about 1.1 million tasks. Argument:
// compute slow-down during communication, in percent (0 takes the fast path).
void BM_SimulateOneFOneBStep(benchmark::State& state) {
  static const ir::Graph kGraph =
      metron::testing::build_one_f_one_b_step({.pp = 16, .dp = 48, .microbatches = 256});
  simulate_and_report(state, kGraph);
}
BENCHMARK(BM_SimulateOneFOneBStep)->Arg(0)->Arg(10)->Unit(benchmark::kMillisecond);

// Interleaved 1F1B, 32 ranks x 4 chunks, 1,536 microbatches, async p2p: about 1.2 million tasks
// on few ranks (long streams, few concurrent events).
void BM_SimulateInterleaved(benchmark::State& state) {
  static const ir::Graph kGraph = metron::lowering::lower(
      metron::pipeline::generate_order(
          {.name = "interleaved-1f1b", .pp = 32, .vp = 4, .microbatches = 1536}),
      {.p2p = metron::lowering::P2PMode::kAsync});
  simulate_and_report(state, kGraph);
}
BENCHMARK(BM_SimulateInterleaved)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
