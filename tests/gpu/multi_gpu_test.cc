// The CUDA backend over several GPUs of one machine: the CPU backend's multi-rank cases (pipeline
// transfers, data-parallel collectives) with one process per rank through the local launcher,
// NCCL between the GPUs, checked by the same ordering check. Label `gpu-multi`: each case skips,
// visibly, when the machine has fewer GPUs than the case has ranks (NCCL refuses two ranks of a
// communicator on one GPU). The GPUs are counted without CUDA: the launcher forks its workers,
// and a process that initialised CUDA cannot hand it to its children.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_scenarios.h"
#include "metron/exec/cuda/cuda_rank.h"
#include "metron/exec/local_launcher.h"
#include "metron/scenario/step_builder.h"
#include "support/free_port.h"
#include "support/ordering_check.h"

namespace metron::exec::cuda {
namespace {

using std::chrono::milliseconds;

/// GPUs this process may use: CUDA_VISIBLE_DEVICES's entries when set, else the driver's
/// /dev/nvidiaN device files.
std::int32_t visible_gpus() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::int32_t count = 0;
    std::stringstream list(visible);
    for (std::string entry; std::getline(list, entry, ',');) count += entry.empty() ? 0 : 1;
    return count;
  }
  std::int32_t count = 0;
  const std::regex device("nvidia[0-9]+");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    count += std::regex_match(entry.path().filename().string(), device) ? 1 : 0;
  }
  return count;
}

/// Runs `s` with one process per rank on GPUs 0..n-1; rank 0 checks the rules in its worker
/// (a failed check fails the launch). Ranks' clocks are one machine's, but each rank places its
/// GPU's times on it within microseconds (Note [cuda backend]): cross-rank rules get 50 µs.
void expect_multi_gpu_run_obeys_the_rules(const scenario::Scenario& s) {
  const scenario::Step step =
      scenario::build_step(s, scenario::Replication::kFull, scenario::Payload::kOperations);
  const std::int32_t ranks = step.graph.num_ranks();
  if (visible_gpus() < ranks) {
    GTEST_SKIP() << "needs " << ranks << " GPUs; this machine has " << visible_gpus();
  }
  const std::int32_t port = testing::free_port();
  const LaunchResult r = launch_local(
      {.workers = ranks, .timeout = milliseconds(120000), .grace = milliseconds(2000)},
      [&](std::int32_t rank, WorkerChannel& channel) {
        const std::optional<MeasuredStep> measured = run_cuda_rank(
            step.graph,
            {.port = port, .rank = rank, .world_size = ranks, .timeout = milliseconds(120000)},
            rank, {.iterations = 2, .warmup = 1, .timeout = milliseconds(120000)},
            [&channel](std::string_view status) { channel.set_status(status); });
        if (!measured) return;
        const std::vector<std::string> violations =
            testing::ordering_violations(step.graph, measured->timeline, 50'000);
        if (!violations.empty()) throw std::runtime_error("rule broken: " + violations.front());
      });
  EXPECT_TRUE(r.ok()) << r.failure->message;
}

TEST(MultiGpu, PipelineTransfersOverNccl) {
  scenario::Scenario s = testing::one_gpu_scenario("1f1b");
  s.parallel.pp = 2;
  expect_multi_gpu_run_obeys_the_rules(s);
}

TEST(MultiGpu, DataParallelCollectivesOverNccl) {
  scenario::Scenario s = testing::one_gpu_scenario("1f1b");
  s.parallel.dp = 2;
  s.sync = {.policy = sync::SyncPolicy::kMegatronDistopt,
            .overlap_grad_reduce = true,
            .overlap_param_gather = true};
  expect_multi_gpu_run_obeys_the_rules(s);
}

TEST(MultiGpu, PipelineAndDataParallelOnFourGpus) {
  scenario::Scenario s = testing::one_gpu_scenario("1f1b");
  s.parallel.pp = 2;
  s.parallel.dp = 2;
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp, .overlap_grad_reduce = true};
  expect_multi_gpu_run_obeys_the_rules(s);
}

}  // namespace
}  // namespace metron::exec::cuda
