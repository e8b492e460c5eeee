// The executor's core (rank program, rank executor, CPU backend, measured step) over real step
// graphs of every schedule family and sync policy, with every rank on a thread of this process
// and an in-process fabric for the communication (Gloo's own tests are gloo_world_test.cc and
// the CLI's). What each run did is checked against the ordering rules by an independent checker
// (tests/support/ordering_check.h), and its memory against the graph's memory effects.

#include "metron/exec/rank_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/cpu_backend.h"
#include "metron/exec/measured_step.h"
#include "metron/exec/rank_program.h"
#include "metron/exec/rank_run.h"
#include "metron/exec/tcp_store.h"
#include "metron/models/hardware_presets.h"
#include "metron/scenario/step_builder.h"
#include "metron/sim/simulator.h"
#include "support/free_port.h"
#include "support/ordering_check.h"
#include "support/tiny_models.h"

namespace metron::exec {
namespace {

using std::chrono::milliseconds;

/// Rendezvous for the ranks of one process: a collective returns once every member of its group
/// has called it with the same ordinal; a send returns once its receive was posted and vice
/// versa. Whatever can wait forever gives up after a patience, so a broken core fails the test.
class Fabric {
 public:
  explicit Fabric(const ir::Graph& graph) : graph_(graph) {}

  void collective(std::int32_t group, std::int64_t ordinal) {
    const auto size = graph_.group(ir::GroupId{group}).ranks.size();
    meet({0, group, ordinal}, size);
  }
  void transfer(std::int32_t from, std::int32_t to, std::int32_t tag) {
    meet({1, from * 100000 + to, tag}, 2);
  }

 private:
  void meet(std::tuple<int, std::int64_t, std::int64_t> key, std::size_t members) {
    std::unique_lock<std::mutex> lock(mutex_);
    // A transfer's key comes back every iteration: the n-th arrival meets the others of its
    // round, the arrivals up to the next multiple of `members`.
    const std::size_t arrived = ++arrived_[key];
    const std::size_t round_end = (arrived + members - 1) / members * members;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return arrived_[key] >= round_end; })) {
      throw BackendError("fabric: nobody came (" + std::to_string(arrived) + " of " +
                         std::to_string(members) + ")");
    }
  }

  const ir::Graph& graph_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::tuple<int, std::int64_t, std::int64_t>, std::size_t> arrived_;
};

/// What each rank of `graph` does on the fabric; compute sleeps briefly.
CpuWork fabric_work(Fabric& fabric, std::int32_t r) {
  return {
      .compute =
          [](const Launch&, const ir::Compute&) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          },
      .collective =
          [&fabric](const Launch& launch, const ir::Collective& c) {
            fabric.collective(c.group.value(), launch.ordinal);
          },
      .send = [&fabric, r](const Launch& launch,
                           const ir::Send& s) { fabric.transfer(r, s.peer.value(), launch.tag); },
      .recv = [&fabric, r](const Launch& launch,
                           const ir::Recv& v) { fabric.transfer(v.peer.value(), r, launch.tag); },
  };
}

/// Runs every rank of `graph` on a thread for `iterations` iterations.
MeasuredStep run_in_process(const ir::Graph& graph, std::int32_t iterations = 2) {
  Fabric fabric(graph);
  std::vector<std::vector<RankIteration>> measured(static_cast<std::size_t>(graph.num_ranks()));
  std::vector<std::string> errors(measured.size());
  std::vector<std::thread> ranks;
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    ranks.emplace_back([&, r] {
      try {
        RankExecutor executor(graph, rank_program(graph, ir::RankId{r}));
        CpuBackend backend(executor.program(), fabric_work(fabric, r), milliseconds(30000));
        for (std::int32_t i = 0; i < iterations; ++i) {
          measured[static_cast<std::size_t>(r)].push_back(executor.run(backend, i));
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return measured_step(graph, measured, /*shared_clock=*/true);
}

scenario::Scenario tiny(const std::string& schedule, std::int64_t pp, std::int64_t layers,
                        std::int64_t microbatches) {
  scenario::Scenario s;
  s.model = models::testing::tiny_gelu(layers);
  s.hardware = models::hardware_preset("cpu-local");
  s.parallel = {.tp = 1, .pp = pp, .dp = 1, .microbatch_size = 1, .seq_len = 4};
  s.parallel.num_microbatches = microbatches;
  s.schedule = {.name = schedule};
  return s;
}

void expect_obeys_rules(const ir::Graph& graph, const MeasuredStep& step) {
  EXPECT_THAT(testing::ordering_violations(graph, step.timeline, 0), ::testing::IsEmpty());
}

TEST(RankProgram, WaitsOnlyAcrossStreamsAndNumbersCollectivesBySeq) {
  scenario::Scenario s = tiny("1f1b", 2, 4, 4);
  s.parallel.dp = 2;
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
  const ir::Graph& g = step.graph;
  for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
    const RankProgram p = rank_program(g, ir::RankId{r});
    ASSERT_EQ(p.steps.size(), g.issue_order(ir::RankId{r}).size());
    std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> seq_ordinal;
    for (const ProgramStep& st : p.steps) {
      const ir::Task& t = g.task(st.task);
      for (const ir::TaskId w : st.waits) EXPECT_NE(g.task(w).stream, t.stream);
      if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
        seq_ordinal[c->group.value()].emplace_back(c->seq, st.ordinal);
      }
    }
    for (auto& [group, list] : seq_ordinal) {
      std::sort(list.begin(), list.end());
      for (std::size_t i = 0; i < list.size(); ++i)
        EXPECT_EQ(list[i].second, std::ssize(list) == 0 ? 0 : static_cast<std::int64_t>(i));
      EXPECT_EQ(p.group_collectives[static_cast<std::size_t>(group)], std::ssize(list));
    }
  }
}

struct Family {
  std::string schedule;
  std::int64_t pp;
  std::int64_t vp;
  std::string p2p;  ///< "" for the schedule's default
};

class EveryScheduleFamily : public ::testing::TestWithParam<Family> {};

TEST_P(EveryScheduleFamily, RunsToCompletionObeyingTheRules) {
  const Family& f = GetParam();
  scenario::Scenario s = tiny(f.schedule, f.pp, 8, 2 * f.pp);
  s.parallel.vp = f.vp;
  if (!f.p2p.empty())
    s.schedule.p2p = f.p2p == "async" ? lowering::P2PMode::kAsync : lowering::P2PMode::kBatched;
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
  const MeasuredStep measured = run_in_process(step.graph);
  expect_obeys_rules(step.graph, measured);
  EXPECT_EQ(measured.iteration_ns.size(), 2U);
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryScheduleFamily,
                         ::testing::Values(Family{"none", 1, 1, ""},
                                           Family{"1f1b", 2, 1, "batched"},
                                           Family{"1f1b", 4, 1, "async"}, Family{"gpipe", 2, 1, ""},
                                           Family{"interleaved-1f1b", 2, 2, "batched"},
                                           Family{"interleaved-1f1b", 2, 2, "async"},
                                           Family{"zb-h1", 2, 1, ""}, Family{"zb-h2", 2, 1, ""},
                                           Family{"zb-v", 2, 2, ""}, Family{"zb-auto", 2, 1, ""},
                                           Family{"dualpipe", 2, 1, ""},
                                           Family{"dualpipe-v", 2, 2, ""}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.schedule + "_pp" +
                                              std::to_string(param_info.param.pp) +
                                              param_info.param.p2p;
                           std::erase(name, '-');
                           return name;
                         });

struct Policy {
  std::string name;
  sync::SyncOptions options;
};

class EverySyncPolicy : public ::testing::TestWithParam<Policy> {};

// Data parallelism 2 and pipeline 2: the policy's collectives on their own streams, waiting for
// the backward passes and holding up the optimizer step.
TEST_P(EverySyncPolicy, RunsToCompletionObeyingTheRules) {
  scenario::Scenario s = tiny("1f1b", 2, 4, 4);
  s.parallel.dp = 2;
  s.sync = GetParam().options;
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
  ASSERT_EQ(step.graph.num_ranks(), 4);
  const MeasuredStep measured = run_in_process(step.graph);
  expect_obeys_rules(step.graph, measured);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, EverySyncPolicy,
    ::testing::Values(Policy{"ddp", {.policy = sync::SyncPolicy::kDdp}},
                      Policy{"megatron_distopt", {.policy = sync::SyncPolicy::kMegatronDistopt}},
                      Policy{"megatron_distopt_overlap",
                             {.policy = sync::SyncPolicy::kMegatronDistopt,
                              .overlap_grad_reduce = true,
                              .overlap_param_gather = true}},
                      Policy{"fairscale_sdp", {.policy = sync::SyncPolicy::kFairscaleSdp}},
                      Policy{"zero3", {.policy = sync::SyncPolicy::kZero3}},
                      Policy{"fsdp2", {.policy = sync::SyncPolicy::kFsdp2}}),
    [](const auto& param_info) { return param_info.param.name; });

// One hardware queue dispatches every stream in issue order (rule 4, checked by the checker on
// the queue predecessors this graph has), eight let a stream start ahead of another's earlier
// work. Both must obey the rules and finish.
TEST(RankExecutor, OneHardwareQueueStartsTasksInIssueOrder) {
  for (const std::int64_t queues : {1, 8}) {
    scenario::Scenario s = tiny("1f1b", 2, 4, 4);
    s.parallel.dp = 2;
    s.sync = {.policy = sync::SyncPolicy::kMegatronDdp, .overlap_grad_reduce = true};
    s.hardware.hardware_queues = queues;
    const scenario::Step step = scenario::build_step(s, scenario::Replication::kFull);
    ASSERT_EQ(step.graph.rank(ir::RankId{0}).hardware_queues, queues);
    const MeasuredStep measured = run_in_process(step.graph);
    expect_obeys_rules(step.graph, measured);
    if (queues == 1) {
      // Independently of the graph's queue predecessors: on each rank, starts follow issue order.
      for (std::int32_t r = 0; r < step.graph.num_ranks(); ++r) {
        std::int64_t last = -1;
        for (const ir::TaskId t : step.graph.issue_order(ir::RankId{r})) {
          if (!step.graph.task(t).stream.valid()) continue;
          EXPECT_GE(measured.timeline.tasks[t.index()].start_ns, last) << step.graph.describe(t);
          last = measured.timeline.tasks[t.index()].start_ns;
        }
      }
    }
  }
}

// The buffers are really allocated and freed by their last user: the measured peak of a rank
// whose memory effects are all on one stream (1F1B without data parallelism) is the peak of the
// memory effects in issue order, worked out here from the graph alone.
TEST(RankExecutor, MeasuredPeakMemoryIsTheGraphsMemoryEffectPeak) {
  const scenario::Step step =
      scenario::build_step(tiny("1f1b", 2, 4, 6), scenario::Replication::kFull);
  const MeasuredStep measured = run_in_process(step.graph);
  for (std::int32_t r = 0; r < step.graph.num_ranks(); ++r) {
    std::map<std::int32_t, std::int32_t> users;  // buffer -> users left
    std::int64_t live = 0;
    std::int64_t peak = 0;
    for (const ir::TaskId t : step.graph.issue_order(ir::RankId{r})) {
      for (const ir::BufferId b : step.graph.task(t).allocates) ++users[b.value()];
      for (const ir::BufferId b : step.graph.task(t).uses) ++users[b.value()];
    }
    for (const ir::TaskId t : step.graph.issue_order(ir::RankId{r})) {
      const ir::Task& task = step.graph.task(t);
      for (const ir::BufferId b : task.allocates) live += step.graph.buffer(b).bytes;
      peak = std::max(peak, live);
      for (const auto* list : {&task.allocates, &task.uses}) {
        for (const ir::BufferId b : *list) {
          if (--users[b.value()] == 0) live -= step.graph.buffer(b).bytes;
        }
      }
    }
    EXPECT_GT(peak, 0);
    EXPECT_EQ(measured.peak_memory_bytes[static_cast<std::size_t>(r)], peak) << "rank " << r;
  }
}

// The checker can fail: a run whose spans were swapped breaks rule 2.
TEST(OrderingCheck, ReportsATaskThatStartedBeforeItsStreamPredecessorEnded) {
  const scenario::Step step =
      scenario::build_step(tiny("1f1b", 2, 4, 4), scenario::Replication::kFull);
  MeasuredStep measured = run_in_process(step.graph);
  const ir::TaskId first = step.graph.issue_order(ir::RankId{0})[0];
  const ir::TaskId second = step.graph.stream_successor(first);
  ASSERT_TRUE(second.valid());
  std::swap(measured.timeline.tasks[first.index()], measured.timeline.tasks[second.index()]);
  EXPECT_THAT(testing::ordering_violations(step.graph, measured.timeline, 0),
              ::testing::Contains(::testing::HasSubstr("before its stream predecessor ended")));
}

TEST(MeasuredStep, ReportsTheMedianIterationAndRoundTripsThroughText) {
  const scenario::Step step =
      scenario::build_step(tiny("1f1b", 2, 4, 4), scenario::Replication::kFull);
  Fabric fabric(step.graph);
  std::vector<std::vector<RankIteration>> measured(2);
  for (std::int32_t r = 0; r < 2; ++r) {
    const RankProgram program = rank_program(step.graph, ir::RankId{r});
    // Three hand-made iterations of 3, 1 and 2 ms: the median is the third.
    for (const std::int64_t ms : {3, 1, 2}) {
      RankIteration it;
      it.origin_ns = 1'000'000'000;
      for (const ProgramStep& st : program.steps) {
        it.issued.emplace_back(st.task, it.origin_ns);
        if (step.graph.task(st.task).stream.valid()) {
          it.record.launches.push_back({st.task, it.origin_ns, it.origin_ns + ms * 1'000'000});
        }
      }
      it.record.peak_memory_bytes = ms;
      measured[static_cast<std::size_t>(r)].push_back(it);
    }
    measured[static_cast<std::size_t>(r)] =
        decode_iterations(encode_iterations(measured[static_cast<std::size_t>(r)]));
  }
  const MeasuredStep m = measured_step(step.graph, measured, /*shared_clock=*/false);
  EXPECT_THAT(m.iteration_ns, ::testing::ElementsAre(3'000'000, 1'000'000, 2'000'000));
  EXPECT_EQ(m.median_iteration, 2);
  EXPECT_EQ(m.timeline.step_end_ns, 2'000'000);
  EXPECT_THAT(m.peak_memory_bytes, ::testing::ElementsAre(2, 2));
  EXPECT_THROW(decode_iterations("metron-iterations 1 2\n5"), BackendError);
}

// What every backend's rank does after building its backend (rank_run.h), over metron's own
// TcpStore as the CUDA backend's ranks meet: the iterations, each after a barrier, and every
// rank's measurements gathered at rank 0 alone.
TEST(RankRun, GathersEveryRanksIterationsAtRankZeroThroughTheTcpStore) {
  const scenario::Step step =
      scenario::build_step(tiny("1f1b", 2, 4, 4), scenario::Replication::kFull);
  const ir::Graph& graph = step.graph;
  Fabric fabric(graph);
  const std::int32_t port = testing::free_port();
  std::vector<std::optional<MeasuredStep>> results(2);
  std::vector<std::string> errors(2);
  std::vector<std::vector<std::string>> statuses(2);
  std::vector<std::thread> ranks;
  for (std::int32_t r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        TcpStore store({.host = "127.0.0.1", .port = port, .rank = r, .world_size = 2});
        RankExecutor executor(graph, rank_program(graph, ir::RankId{r}));
        CpuBackend backend(executor.program(), fabric_work(fabric, r), milliseconds(30000));
        const StatusSink status = [&statuses, r](std::string_view s) {
          statuses[static_cast<std::size_t>(r)].emplace_back(s);
        };
        results[static_cast<std::size_t>(r)] = run_rank_iterations(
            graph, r, 2, store, executor, backend, {.iterations = 3, .warmup = 1}, status);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_THAT(errors, ::testing::Each(""));
  ASSERT_TRUE(results[0].has_value());
  EXPECT_FALSE(results[1].has_value());
  // The 3 measured iterations (not the warm-up), every task of both ranks timed, in order.
  EXPECT_EQ(results[0]->iteration_ns.size(), 3U);
  expect_obeys_rules(graph, *results[0]);
  EXPECT_THAT(statuses[1], ::testing::Contains("gathering the measurements at rank 0"));
}

}  // namespace
}  // namespace metron::exec
