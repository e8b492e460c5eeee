// Whole runs on the CPU backend with real processes, Gloo and libtorch (exec/cpu_run.h): a run
// that obeys the ordering rules (checked independently, tests/support/ordering_check.h) and
// measures the graph's memory peak, and the two ways a run fails at runtime: a rank killed
// mid-run ends the others with a message, a hung rank is named by the watchdog. The launcher
// reaps every worker before it returns, so no process outlives a test.

#include "metron/exec/cpu_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/exec/local_launcher.h"
#include "metron/exec/torch_compute.h"
#include "metron/models/hardware_presets.h"
#include "metron/scenario/step_builder.h"
#include "support/free_port.h"
#include "support/ordering_check.h"
#include "support/tiny_models.h"

namespace metron::exec {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

using testing::free_port;

/// 1F1B on 2 pipeline ranks × 2 replicas of a 4-layer tiny GPT with the Megatron DDP sync:
/// p2p, all-reduces on their own streams, and the operations of every compute task.
scenario::Step small_step() {
  scenario::Scenario s;
  s.model = models::testing::tiny_gelu(4);
  s.hardware = models::hardware_preset("cpu-local");
  s.parallel = {.tp = 1, .pp = 2, .dp = 2, .microbatch_size = 1, .seq_len = 4};
  s.parallel.num_microbatches = 4;
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp, .overlap_grad_reduce = true};
  return scenario::build_step(s, scenario::Replication::kFull, scenario::Payload::kOperations);
}

/// The peak of rank `rank`'s memory effects in issue order, worked out from the graph alone.
std::int64_t issue_order_peak(const ir::Graph& g, std::int32_t rank) {
  std::map<std::int32_t, std::int32_t> users;
  for (const ir::TaskId t : g.issue_order(ir::RankId{rank})) {
    for (const auto* list : {&g.task(t).allocates, &g.task(t).uses}) {
      for (const ir::BufferId b : *list) ++users[b.value()];
    }
  }
  std::int64_t live = 0;
  std::int64_t peak = 0;
  for (const ir::TaskId t : g.issue_order(ir::RankId{rank})) {
    for (const ir::BufferId b : g.task(t).allocates) live += g.buffer(b).bytes;
    peak = std::max(peak, live);
    for (const auto* list : {&g.task(t).allocates, &g.task(t).uses}) {
      for (const ir::BufferId b : *list) {
        if (--users[b.value()] == 0) live -= g.buffer(b).bytes;
      }
    }
  }
  return peak;
}

LaunchResult launch(const scenario::Step& step, milliseconds watchdog, const RunOptions& options,
                    const std::function<void(std::int32_t)>& sabotage,
                    const std::function<void(const MeasuredStep&)>& check) {
  const std::int32_t port = free_port();
  stop_blas_threads();  // the launcher forks a single-threaded process
  return launch_local(
      {.workers = step.graph.num_ranks(), .timeout = watchdog, .grace = milliseconds(500)},
      [&](std::int32_t rank, WorkerChannel& channel) {
        sabotage(rank);
        const std::optional<MeasuredStep> measured = run_cpu_rank(
            step.graph,
            {.port = port,
             .rank = rank,
             .world_size = step.graph.num_ranks(),
             .timeout = options.timeout},
            options, [&channel](std::string_view status) { channel.set_status(status); });
        if (measured) check(*measured);
      });
}

TEST(CpuRun, FourRanksRunTheStepObeyingTheRulesAndMeasureTheMemoryPeak) {
  const scenario::Step step = small_step();
  ASSERT_EQ(step.graph.num_ranks(), 4);
  const LaunchResult r = launch(
      step, milliseconds(60000), {.iterations = 2, .warmup = 1, .timeout = milliseconds(60000)},
      [](std::int32_t) {},
      [&](const MeasuredStep& m) {
        // In the worker of rank 0: a failed check fails the worker, and the launch with it.
        // Clocks are one machine's, so cross-rank comparisons need no tolerance.
        const std::vector<std::string> violations =
            testing::ordering_violations(step.graph, m.timeline, 0);
        if (!violations.empty()) throw std::runtime_error("rule broken: " + violations.front());
        if (m.iteration_ns.size() != 2) throw std::runtime_error("expected 2 iterations");
        for (std::int32_t rank = 0; rank < 4; ++rank) {
          // Compute is on the compute stream only, so the effects' order is the issue order.
          if (m.peak_memory_bytes[static_cast<std::size_t>(rank)] !=
              issue_order_peak(step.graph, rank)) {
            throw std::runtime_error(
                "rank " + std::to_string(rank) + ": peak " +
                std::to_string(m.peak_memory_bytes[static_cast<std::size_t>(rank)]) +
                ", expected " + std::to_string(issue_order_peak(step.graph, rank)));
          }
        }
      });
  ASSERT_TRUE(r.ok()) << r.failure->message;
}

/// A real run (processes, Gloo, libtorch) of `s` must obey the rules; kept to a few graphs:
/// every family and policy also runs in-process in rank_executor_test.cc.
void expect_real_run_obeys_the_rules(scenario::Scenario s) {
  s.model = models::testing::tiny_gelu(4);
  s.hardware = models::hardware_preset("cpu-local");
  s.parallel.microbatch_size = 1;
  s.parallel.seq_len = 4;
  const scenario::Step step =
      scenario::build_step(s, scenario::Replication::kFull, scenario::Payload::kOperations);
  const LaunchResult r = launch(
      step, milliseconds(60000), {.iterations = 1, .warmup = 0, .timeout = milliseconds(60000)},
      [](std::int32_t) {},
      [&](const MeasuredStep& m) {
        const std::vector<std::string> violations =
            testing::ordering_violations(step.graph, m.timeline, 0);
        if (!violations.empty()) throw std::runtime_error("rule broken: " + violations.front());
      });
  EXPECT_TRUE(r.ok()) << r.failure->message;
}

TEST(CpuRun, ScheduleFamiliesRunForRealWithBatchedAndAsyncP2p) {
  for (const auto& [name, vp, p2p] :
       std::vector<std::tuple<std::string, std::int64_t, lowering::P2PMode>>{
           {"interleaved-1f1b", 2, lowering::P2PMode::kBatched},
           {"zb-h1", 1, lowering::P2PMode::kAsync},
           {"dualpipe-v", 2, lowering::P2PMode::kAsync}}) {
    SCOPED_TRACE(name);
    scenario::Scenario s;
    s.parallel = {.tp = 1, .pp = 2, .dp = 1, .vp = vp};
    s.parallel.num_microbatches = 4;
    s.schedule = {.name = name, .p2p = p2p};
    expect_real_run_obeys_the_rules(s);
  }
}

TEST(CpuRun, ShardedSyncPoliciesRunForRealWithDataParallelismTwo) {
  for (const sync::SyncPolicy policy :
       {sync::SyncPolicy::kMegatronDistopt, sync::SyncPolicy::kFairscaleSdp,
        sync::SyncPolicy::kZero3, sync::SyncPolicy::kFsdp2}) {
    SCOPED_TRACE(std::string(sync::to_string(policy)));
    scenario::Scenario s;
    s.parallel = {.tp = 1, .pp = 1, .dp = 2};
    s.parallel.num_microbatches = 2;
    s.schedule = {.name = "1f1b"};
    s.sync = {.policy = policy};
    expect_real_run_obeys_the_rules(s);
  }
}

TEST(CpuRun, ARankKilledMidRunEndsTheOthersWithAMessage) {
  const scenario::Step step = small_step();
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult r = launch(
      step, milliseconds(60000),
      {.iterations = 100000, .warmup = 0, .timeout = milliseconds(60000)},
      [](std::int32_t rank) {
        if (rank != 1) return;
        std::thread([] {
          std::this_thread::sleep_for(milliseconds(1500));
          std::raise(SIGKILL);
        }).detach();
      },
      [](const MeasuredStep&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->kind, FailureKind::kSignal);
  EXPECT_EQ(r.failure->rank, 1);
  EXPECT_THAT(r.failure->message, HasSubstr("rank 1 was killed by signal 9"));
  // No process survives: every worker was reaped (its pid no longer exists).
  for (const WorkerReport& w : r.workers) {
    EXPECT_EQ(::kill(w.pid, 0), -1) << "rank " << w.rank << " is still alive";
    EXPECT_EQ(errno, ESRCH);
  }
  // Within seconds, not after the 60 s timeouts.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

/// A folder for what the ranks flush on failure: one file per rank, "<iterations> <tasks of the
/// last one>".
struct FlushFolder {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("metron-flush-" + std::to_string(::getpid()));
  FlushFolder() { std::filesystem::create_directories(dir); }
  ~FlushFolder() { std::filesystem::remove_all(dir); }
  FlushFolder(const FlushFolder&) = delete;
  FlushFolder& operator=(const FlushFolder&) = delete;
  FlushFolder(FlushFolder&&) = delete;
  FlushFolder& operator=(FlushFolder&&) = delete;

  [[nodiscard]] std::function<void(const std::vector<RankIteration>&)> writer() const {
    return [this](const std::vector<RankIteration>& iterations) {
      write_file_atomically((dir / ("rank-" + std::to_string(::getpid()))).string(),
                            std::to_string(iterations.size()) + " " +
                                std::to_string(iterations.back().record.launches.size()));
    };
  }
  [[nodiscard]] std::vector<std::string> contents() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      out.push_back(read_file(entry.path().string()));
    }
    return out;
  }
};

TEST(CpuRun, AHungRankIsNamedByTheWatchdogWithWhatEachRankWaitsFor) {
  const scenario::Step step = small_step();
  const FlushFolder flushed;
  const LaunchResult r = launch(
      step, milliseconds(2000),
      {.iterations = 100000,
       .warmup = 0,
       .timeout = milliseconds(60000),
       .on_failure = flushed.writer()},
      [](std::int32_t rank) {
        if (rank != 1) return;
        std::thread([] {
          std::this_thread::sleep_for(milliseconds(1500));
          std::raise(SIGSTOP);  // hung: alive, silent, holding its peers
        }).detach();
      },
      [](const MeasuredStep&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->kind, FailureKind::kTimeout);
  // Every rank's last status names the task its streams run or wait for.
  EXPECT_THAT(r.failure->message, HasSubstr("no progress for"));
  EXPECT_THAT(r.failure->message,
              ::testing::ContainsRegex("rank 0: (at the barrier before )?iteration"));
  EXPECT_THAT(r.failure->message, HasSubstr("\"task "));
  // Nothing recorded is lost: the three ranks the launcher ended (SIGTERM) flushed what they
  // had, the iterations they finished and the current one; the stopped rank only gets SIGKILL.
  const std::vector<std::string> contents = flushed.contents();
  EXPECT_EQ(contents.size(), 3U);
  for (const std::string& c : contents) {
    EXPECT_GT(std::stoll(c.substr(0, c.find(' '))), 1) << c;  // finished ones + the current one
  }
}

}  // namespace
}  // namespace metron::exec
