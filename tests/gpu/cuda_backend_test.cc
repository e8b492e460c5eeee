// The CUDA backend (streams, events, stream-ordered memory, cuBLASLt and NCCL) over real step
// graphs of one rank on one GPU, checked by the same independent ordering checker as the CPU
// backend (tests/support/ordering_check.h). Needs a GPU: without one each test skips visibly.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "gpu_scenarios.h"
#include "metron/base/error.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/ir/graph_builder.h"
#include "metron/models/hardware_presets.h"
#include "metron/scenario/step_builder.h"
#include "support/ordering_check.h"

namespace metron::exec::cuda {
namespace {

#define METRON_REQUIRE_GPU()                                                        \
  do {                                                                              \
    const CudaInfo info = query_cuda();                                             \
    if (info.device_count == 0) {                                                   \
      GTEST_SKIP() << "no CUDA device visible (" << info.error << "); needs a GPU"; \
    }                                                                               \
  } while (false)

using testing::one_gpu_scenario;

void expect_a_valid_run(const ir::Graph& graph, const MeasuredStep& step) {
  EXPECT_THAT(testing::ordering_violations(graph, step.timeline, 0), ::testing::IsEmpty());
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const timelines::TaskSpan span = step.timeline.tasks[static_cast<std::size_t>(t)];
    EXPECT_LE(span.start_ns, span.end_ns) << graph.describe(ir::TaskId{t});
    EXPECT_GE(span.start_ns, 0) << graph.describe(ir::TaskId{t});
  }
  EXPECT_GT(step.timeline.step_end_ns, 0);
}

struct Family {
  std::string schedule;
  std::int64_t vp;
};

class OneRankSchedule : public ::testing::TestWithParam<Family> {};

TEST_P(OneRankSchedule, RunsOnTheGpuObeyingTheRules) {
  // The graph is built and checked first: without a GPU that much still runs.
  const scenario::Step step = scenario::build_step(
      one_gpu_scenario(GetParam().schedule, GetParam().vp), scenario::Replication::kFull);
  ASSERT_EQ(step.graph.num_ranks(), 1);
  METRON_REQUIRE_GPU();
  const MeasuredStep measured = run_cuda_single_rank(step.graph, {.iterations = 3});
  expect_a_valid_run(step.graph, measured);
  EXPECT_EQ(measured.iteration_ns.size(), 3U);
}

INSTANTIATE_TEST_SUITE_P(Schedules, OneRankSchedule,
                         ::testing::Values(Family{"none", 1}, Family{"1f1b", 1}, Family{"gpipe", 1},
                                           Family{"zb-h1", 1}, Family{"zb-h2", 1}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.schedule;
                           std::erase(name, '-');
                           return name;
                         });

// FP8 training (parallel.fp8, Note [fp8 training]): the step's operations payload lists the
// layers' linear GEMMs at dtype fp8 after their casts, and the backend runs them as cuBLASLt e4m3
// GEMMs in the same stream and event order as any other step.
TEST(CudaBackend, RunsAnFp8StepsE4m3GemmsObeyingTheRules) {
  scenario::Scenario s = one_gpu_scenario("1f1b", 1);
  s.parallel.fp8 = models::Fp8Recipe::kDelayed;
  const scenario::Step step =
      scenario::build_step(s, scenario::Replication::kFull, scenario::Payload::kOperations);
  std::int32_t fp8_gemms = 0;
  for (std::int32_t t = 0; t < step.graph.num_tasks(); ++t) {
    if (const auto* compute = std::get_if<ir::Compute>(&step.graph.task(ir::TaskId{t}).op)) {
      for (const ir::Operation& op : compute->operations) {
        fp8_gemms += op.kind == ir::OperationKind::kGemm && op.dtype == ir::DType::kFp8 ? 1 : 0;
      }
    }
  }
  ASSERT_GT(fp8_gemms, 0);
  METRON_REQUIRE_GPU();
  const MeasuredStep measured = run_cuda_single_rank(step.graph, {.iterations = 3});
  expect_a_valid_run(step.graph, measured);
}

struct Policy {
  std::string name;
  sync::SyncOptions options;
};

class OneReplicaPolicy : public ::testing::TestWithParam<Policy> {};

// The simulator's symmetric graph of a data-parallel run keeps one replica, its groups of one
// member standing for the real ones: on one GPU every collective of the policy runs on a
// one-rank NCCL communicator, on the streams and with the events the policy asks for.
TEST_P(OneReplicaPolicy, RunsItsCollectivesThroughNccl) {
  scenario::Scenario s = one_gpu_scenario("1f1b", 1);
  s.parallel.dp = 8;
  s.sync = GetParam().options;
  const scenario::Step step = scenario::build_step(s, scenario::Replication::kSymmetric);
  ASSERT_EQ(step.graph.num_ranks(), 1);
  std::int32_t collectives = 0;
  for (std::int32_t t = 0; t < step.graph.num_tasks(); ++t) {
    collectives += step.graph.task(ir::TaskId{t}).kind() == ir::TaskKind::kCollective ? 1 : 0;
  }
  ASSERT_GT(collectives, 0);
  METRON_REQUIRE_GPU();
  const MeasuredStep measured = run_cuda_single_rank(step.graph, {.iterations = 3});
  expect_a_valid_run(step.graph, measured);
}

INSTANTIATE_TEST_SUITE_P(Policies, OneReplicaPolicy,
                         ::testing::Values(Policy{"ddp", {.policy = sync::SyncPolicy::kDdp}},
                                           Policy{"megatron_distopt_overlap",
                                                  {.policy = sync::SyncPolicy::kMegatronDistopt,
                                                   .overlap_grad_reduce = true,
                                                   .overlap_param_gather = true}},
                                           Policy{"fairscale_sdp",
                                                  {.policy = sync::SyncPolicy::kFairscaleSdp}},
                                           Policy{"zero3", {.policy = sync::SyncPolicy::kZero3}},
                                           Policy{"fsdp2", {.policy = sync::SyncPolicy::kFsdp2}}),
                         [](const auto& param_info) { return param_info.param.name; });

// A hand-built rank: two streams, a cross-stream dependency, a host wait, buffers whose sizes
// are known, and one collective of every kind on a one-rank group.
TEST(CudaBackend, HonoursEventsHostWaitsAndMemoryOfAHandBuiltGraph) {
  ir::GraphBuilder b;
  const ir::RankId r = b.add_rank();
  const ir::StreamId compute = b.add_stream(r, "compute");
  const ir::StreamId comm = b.add_stream(r, "comm");
  const ir::GroupId group = b.add_group("dp", {r});
  constexpr std::int64_t kMiB = 1 << 20;
  const ir::BufferId a = b.add_buffer(r, 64 * kMiB, "a");
  const ir::BufferId c = b.add_buffer(r, 32 * kMiB, "c");
  const ir::Operation gemm{.name = "gemm",
                           .kind = ir::OperationKind::kGemm,
                           .m = 4096,
                           .n = 4096,
                           .k = 4096,
                           .dtype = ir::DType::kBf16};
  ir::Task f{.rank = r,
             .stream = compute,
             .op = ir::Compute{.phase = ir::Phase::kForward, .operations = {gemm}}};
  f.allocates = {a};
  const ir::TaskId first = b.add(std::move(f));
  ir::TaskId last = first;
  std::int64_t seq = 0;
  for (const ir::CollectiveOp op : {ir::CollectiveOp::kAllReduce, ir::CollectiveOp::kReduceScatter,
                                    ir::CollectiveOp::kAllGather, ir::CollectiveOp::kReduce,
                                    ir::CollectiveOp::kBroadcast, ir::CollectiveOp::kAllToAll}) {
    ir::Task t{.rank = r,
               .stream = comm,
               .op = ir::Collective{.op = op,
                                    .group = group,
                                    .bytes = 16 * kMiB,
                                    .dtype = ir::DType::kBf16,
                                    .root = r,
                                    .seq = seq++}};
    t.deps = {last};
    if (op == ir::CollectiveOp::kAllReduce) t.uses = {a};
    if (op == ir::CollectiveOp::kAllGather) t.allocates = {c};
    last = b.add(std::move(t));
  }
  ir::Task wait{.rank = r, .op = ir::HostWait{.target = last}};
  b.add(std::move(wait));
  ir::Task after{.rank = r,
                 .stream = compute,
                 .op = ir::Compute{.phase = ir::Phase::kBackward, .operations = {gemm}}};
  after.uses = {c};
  b.add(std::move(after));
  const ir::Graph graph = std::move(b).build();
  METRON_REQUIRE_GPU();
  const MeasuredStep measured = run_cuda_single_rank(graph, {.iterations = 3});
  expect_a_valid_run(graph, measured);
  // a (64 MiB) is freed after its last user, the all-reduce, before the all-gather allocates c
  // (32 MiB) on the same stream: the graph's peak is 64 MiB, which the pool may round up to its
  // 2 MiB granularity.
  ASSERT_EQ(measured.peak_memory_bytes.size(), 1U);
  EXPECT_GE(measured.peak_memory_bytes[0], 64 * kMiB);
  EXPECT_LE(measured.peak_memory_bytes[0], 64 * kMiB + 2 * kMiB);
  // The host wait holds the host until the last collective ended.
  const auto span = [&](std::int32_t id) {
    return measured.timeline.tasks[static_cast<std::size_t>(id)];
  };
  EXPECT_GE(span(graph.num_tasks() - 2).end_ns, span(last.value()).end_ns);
}

// A task that outlasts the timeout: the host wait gives up and names what the stream is doing,
// as the watchdog's status does.
TEST(CudaBackend, AHostWaitPastTheTimeoutNamesTheRunningTask) {
  ir::GraphBuilder b;
  const ir::RankId r = b.add_rank();
  // About 3 s of bf16 GEMMs on an H100, far past the 200 ms timeout.
  const ir::Operation gemm{.name = "gemm",
                           .kind = ir::OperationKind::kGemm,
                           .m = 8192,
                           .n = 8192,
                           .k = 8192,
                           .count = 2000,
                           .dtype = ir::DType::kBf16};
  const ir::TaskId slow = b.add(
      {.rank = r, .stream = b.add_stream(r, "compute"), .op = ir::Compute{.operations = {gemm}}});
  b.add({.rank = r, .op = ir::HostWait{.target = slow}});
  const ir::Graph graph = std::move(b).build();
  METRON_REQUIRE_GPU();
  try {
    (void)run_cuda_single_rank(
        graph, {.iterations = 1, .warmup = 0, .timeout = std::chrono::milliseconds(200)});
    FAIL() << "expected the host wait to time out";
  } catch (const BackendError& e) {
    EXPECT_THAT(
        e.what(),
        ::testing::AllOf(::testing::HasSubstr("timed out after 200 ms waiting for a host wait"),
                         ::testing::HasSubstr("stream compute: running " + graph.describe(slow))));
  }
}

TEST(CudaBackend, RefusesAGraphOfSeveralRanks) {
  ir::GraphBuilder b;
  for (int i = 0; i < 2; ++i) {
    const ir::RankId r = b.add_rank();
    b.add({.rank = r, .stream = b.add_stream(r, "compute"), .op = ir::Compute{}});
  }
  const ir::Graph graph = std::move(b).build();
  EXPECT_THROW((void)run_cuda_single_rank(graph, {}), InvalidConfig);
}

}  // namespace
}  // namespace metron::exec::cuda
