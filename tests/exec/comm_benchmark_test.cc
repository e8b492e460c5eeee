// The communication benchmark (exec/comm_benchmark.h) with real processes and Gloo: every entry
// comes back to rank 0 and only there, a rank outside a group only passes its barriers, the
// slow-down's load stops on every member, and bad benchmarks are refused before any connection.
// Times are only checked to be positive and finite: the machine is shared and noisy.

#include "metron/exec/comm_benchmark.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "metron/base/error.h"
#include "metron/exec/local_launcher.h"
#include "metron/exec/torch_compute.h"
#include "support/free_port.h"

namespace metron::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

bool positive_finite(double seconds) { return std::isfinite(seconds) && seconds > 0; }

TEST(CommBenchmark, ThreeRanksMeasureEveryEntryAtRankZero) {
  // Group 0 is ranks {1, 2} only: rank 0 passes its barriers and still gathers its times.
  const CommBenchmark b{
      .groups = {{1, 2}, {0, 1, 2}},
      .collectives =
          {{.group = 0, .call = {.op = ir::CollectiveOp::kAllReduce, .bytes = 4096}},
           {.group = 1, .call = {.op = ir::CollectiveOp::kAllGather, .bytes = 3072}},
           {.group = 1,
            .call = {.op = ir::CollectiveOp::kBroadcast, .bytes = 1024, .root = ir::RankId{2}}}},
      .transfers = {{.sender = 2, .receiver = 0, .bytes = 65536}},
      .slowdown = SlowdownProbe{.compute = {.operations = {{.kind = ir::OperationKind::kGemm,
                                                            .m = 64,
                                                            .n = 64,
                                                            .k = 64,
                                                            .dtype = ir::DType::kFp32}}},
                                .load = CollectiveProbe{.group = 0, .call = {.bytes = 1 << 16}},
                                .min_seconds = 0},
      .warmup = 1,
      .repetitions = 3};
  const std::int32_t port = testing::free_port();
  stop_blas_threads();
  const LaunchResult r = launch_local(
      {.workers = 3, .timeout = std::chrono::seconds(60)},
      [&](std::int32_t rank, WorkerChannel& channel) {
        const std::optional<CommMeasurement> m =
            measure_communication(b, {.port = port, .rank = rank, .world_size = 3},
                                  [&channel](std::string_view s) { channel.set_status(s); });
        if (m.has_value() != (rank == 0)) throw InvalidConfig("only rank 0 returns the result");
        if (!m) return;
        if (m->collective_seconds.size() != 3 || m->transfer_seconds.size() != 1 || !m->slowdown) {
          throw InvalidConfig("rank 0 lacks entries");
        }
        for (const double s : m->collective_seconds) {
          if (!positive_finite(s)) throw InvalidConfig("collective " + std::to_string(s));
        }
        if (!positive_finite(m->transfer_seconds[0])) throw InvalidConfig("transfer");
        const SlowdownMeasurement& s = *m->slowdown;
        if (!positive_finite(s.alone_seconds) || !positive_finite(s.with_comm_seconds) ||
            s.slowdown < 0 ||
            s.slowdown != std::max(0.0, s.with_comm_seconds / s.alone_seconds - 1) ||
            s.load_rounds < 0) {
          throw InvalidConfig("slow-down");
        }
        if (!positive_finite(s.comm_alone_seconds) ||
            !positive_finite(s.comm_with_compute_seconds) ||
            s.comm_slowdown !=
                std::max(0.0, s.comm_with_compute_seconds / s.comm_alone_seconds - 1)) {
          throw InvalidConfig("communication slow-down");
        }
      });
  ASSERT_TRUE(r.ok()) << r.failure->message;
}

TEST(CommBenchmark, ATransferLoadStopsOnBothRanks) {
  const CommBenchmark b{
      .groups = {},
      .slowdown = SlowdownProbe{.compute = {.operations = {{.kind = ir::OperationKind::kGemm,
                                                            .m = 32,
                                                            .n = 32,
                                                            .k = 32,
                                                            .dtype = ir::DType::kFp32}}},
                                .load = TransferProbe{.sender = 1, .receiver = 0, .bytes = 4096},
                                .min_seconds = 0.05},
      .warmup = 0,
      .repetitions = 2};
  const std::int32_t port = testing::free_port();
  stop_blas_threads();
  const LaunchResult r = launch_local(
      {.workers = 2, .timeout = std::chrono::seconds(60)}, [&](std::int32_t rank, WorkerChannel&) {
        const std::optional<CommMeasurement> m =
            measure_communication(b, {.port = port, .rank = rank, .world_size = 2}, {});
        if (m && (!m->slowdown || !positive_finite(m->slowdown->alone_seconds))) {
          throw InvalidConfig("no slow-down");
        }
      });
  ASSERT_TRUE(r.ok()) << r.failure->message;
}

TEST(CommBenchmark, RefusesABadBenchmarkBeforeConnecting) {
  // Port 1 is never listened on: these must fail before any connection is tried.
  const Rendezvous nowhere{.port = 1, .rank = 0, .world_size = 2};
  const auto status = [](std::string_view) {};
  EXPECT_THAT(
      [&] {
        (void)measure_communication({.transfers = {{0, 0, 8}}}, nowhere, status);
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("communication benchmark: transfer 0: sender and receiver are both "
                    "rank 0")));
  EXPECT_THAT(
      [&] {
        (void)measure_communication({.transfers = {{0, 2, 8}}}, nowhere, status);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("transfer 0: rank 2 is outside 0..1")));
  EXPECT_THAT(
      [&] {
        (void)measure_communication({.groups = {{0, 1}}, .collectives = {{.group = 1}}}, nowhere,
                                    status);
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("collective 0: group 1 does not exist")));
  EXPECT_THAT([&] { (void)measure_communication({.repetitions = 0}, nowhere, status); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("expected repetitions >= 1 and warmup >= 0, got 0 and 1")));
}

TEST(CommBenchmark, RanksWithUnequalOperationListsTimeThemInLockstep) {
  // Rank 0 times three operations over two tasks, rank 1 one, rank 2 none: the operations run
  // in lockstep, one world barrier before each slot, so ranks with shorter lists pass the
  // barriers of the longer one's rest. A slot count that differed between ranks would leave a
  // rank waiting at a barrier nobody else reaches, and the launcher's timeout would fail this.
  const auto gemm = [](std::int64_t n) {
    return ir::Operation{
        .kind = ir::OperationKind::kGemm, .m = n, .n = n, .k = n, .dtype = ir::DType::kFp32};
  };
  ir::Operation add{
      .kind = ir::OperationKind::kElementwise, .bytes = 12 * 4096, .dtype = ir::DType::kFp32};
  add.count = 4;
  const CommBenchmark b{.compute = {{{.operations = {gemm(32), add}}, {.operations = {gemm(48)}}},
                                    {{.operations = {gemm(64)}}}},
                        .groups = {{0, 1, 2}},
                        .warmup = 1,
                        .repetitions = 3};
  const std::int32_t port = testing::free_port();
  stop_blas_threads();
  const LaunchResult r = launch_local(
      {.workers = 3, .timeout = std::chrono::seconds(60)},
      [&](std::int32_t rank, WorkerChannel& channel) {
        const std::optional<CommMeasurement> m =
            measure_communication(b, {.port = port, .rank = rank, .world_size = 3},
                                  [&channel](std::string_view s) { channel.set_status(s); });
        if (!m) return;
        // By rank, by task: the operations each task lists; rank 2 lists none.
        const std::vector<std::vector<std::size_t>> expected{{2, 1}, {1}, {}};
        if (m->compute_seconds.size() < 2) throw InvalidConfig("compute ranks missing");
        for (std::size_t rank_index = 0; rank_index < m->compute_seconds.size(); ++rank_index) {
          const auto& tasks = m->compute_seconds[rank_index];
          const auto& want = expected.at(rank_index);
          if (tasks.size() != want.size()) throw InvalidConfig("tasks of a rank");
          for (std::size_t t = 0; t < tasks.size(); ++t) {
            if (tasks[t].size() != want[t]) throw InvalidConfig("operations of a task");
            for (const std::vector<double>& samples : tasks[t]) {
              if (samples.size() != 3) throw InvalidConfig("samples of an operation");
              for (const double s : samples) {
                if (!positive_finite(s)) throw InvalidConfig("sample " + std::to_string(s));
              }
            }
          }
        }
      });
  ASSERT_TRUE(r.ok()) << r.failure->message;
}

TEST(CommBenchmark, AnEntrysTimeIsTheMedianOfTheSlowestMember) {
  // Repetition r's time is the slowest member's: {3, 5, 9}; the median is 5.
  EXPECT_EQ(median_of_slowest({{1, 5, 9}, {3, 2, 1}}), 5);
  EXPECT_EQ(median_of_slowest({{4}}), 4);
  EXPECT_EQ(median_of_slowest({}), 0);
  EXPECT_EQ(median_seconds({3, 1, 2}), 2);
  EXPECT_EQ(median_seconds({4, 1, 3, 2}), 3);  // the upper of two middles
}

}  // namespace
}  // namespace metron::exec
