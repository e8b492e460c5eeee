// CUDA_DEVICE_MAX_CONNECTIONS=1 funnels every stream into one hardware queue, so tasks start in
// the host's issue order across streams (rule 4), which is how Megatron-LM orders its
// communication. The variable acts only if it is set before the process's first CUDA call: this
// test has a program of its own and sets it before anything else. Needs a GPU; skips without.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu_scenarios.h"
#include "metron/exec/cuda/cuda_backend.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/scenario/step_builder.h"
#include "support/ordering_check.h"

namespace metron::exec::cuda {
namespace {

TEST(CudaBackend, OneHardwareQueueStartsTasksInIssueOrder) {
  set_hardware_queues(1);  // before any CUDA call of this process
  const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  ASSERT_NE(queues, nullptr);
  if (std::string(queues) != "1")
    GTEST_SKIP() << "the user set CUDA_DEVICE_MAX_CONNECTIONS=" << queues;
  scenario::Scenario s = testing::one_gpu_scenario("1f1b");
  s.parallel.dp = 8;
  s.sync = {.policy = sync::SyncPolicy::kMegatronDistopt,
            .overlap_grad_reduce = true,
            .overlap_param_gather = true};
  s.hardware.hardware_queues = 1;
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kSymmetric);
  ASSERT_EQ(step.graph.rank(ir::RankId{0}).hardware_queues, 1);
  if (const CudaInfo info = query_cuda(); info.device_count == 0) {
    GTEST_SKIP() << "no CUDA device visible (" << info.error << "); needs a GPU";
  }
  const MeasuredStep measured = run_cuda_single_rank(step.graph, {.iterations = 3});
  EXPECT_THAT(testing::ordering_violations(step.graph, measured.timeline, 0), ::testing::IsEmpty());
  // Independently of the graph's queue predecessors: starts follow issue order.
  std::int64_t last = -1;
  for (const ir::TaskId t : step.graph.issue_order(ir::RankId{0})) {
    if (!step.graph.task(t).stream.valid()) continue;
    EXPECT_GE(measured.timeline.tasks[t.index()].start_ns, last) << step.graph.describe(t);
    last = measured.timeline.tasks[t.index()].start_ns;
  }
}

}  // namespace
}  // namespace metron::exec::cuda
