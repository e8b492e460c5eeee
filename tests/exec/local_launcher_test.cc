// The local launcher with real worker processes: success, a worker that throws, dies by a
// signal, exits non-zero or hangs, and a launcher that is itself signalled. Every test checks
// that no worker outlives the launch and that no zombie is left.

#include "metron/exec/local_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "metron/base/error.h"

namespace metron::exec {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Sleeps long enough that only the launcher can end it within a test's time.
void sleep_a_minute(WorkerChannel& channel) {
  channel.set_status("sleeping in rank " + std::to_string(channel.rank()));
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

// No worker of `result` is alive, and the test process has no child left to reap.
void expect_nothing_left(const LaunchResult& result) {
  for (const WorkerReport& w : result.workers) {
    ASSERT_GT(w.pid, 0);
    errno = 0;
    EXPECT_EQ(::kill(w.pid, 0), -1) << "rank " << w.rank << " (pid " << w.pid << ") is alive";
    EXPECT_EQ(errno, ESRCH);
  }
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child is left to reap";
  EXPECT_EQ(errno, ECHILD);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(LocalLauncher, EveryWorkerRunsItsRankAndTheRunSucceeds) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("metron_local_launcher_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const LaunchResult result = launch_local({.workers = 4}, [&](std::int32_t rank, WorkerChannel&) {
    std::ofstream(dir / ("rank" + std::to_string(rank))) << rank;
  });
  EXPECT_TRUE(result.ok()) << result.failure->message;
  ASSERT_EQ(result.workers.size(), 4U);
  std::int32_t rank = 0;
  for (const WorkerReport& w : result.workers) {
    EXPECT_EQ(w.rank, rank);
    EXPECT_EQ(w.exit_code, 0);
    EXPECT_EQ(w.signal, 0);
    EXPECT_FALSE(w.ended_by_launcher);
    std::ifstream in(dir / ("rank" + std::to_string(rank)));
    std::string text;
    in >> text;
    EXPECT_EQ(text, std::to_string(rank));
    ++rank;
  }
  std::filesystem::remove_all(dir);
  expect_nothing_left(result);
}

TEST(LocalLauncher, AThrowingRankEndsTheOthersWithItsMessage) {
  const auto start = Clock::now();
  const LaunchResult result = launch_local({.workers = 4, .grace = milliseconds(1000)},
                                           [](std::int32_t rank, WorkerChannel& channel) {
                                             if (rank == 2) {
                                               channel.set_status("task 7 (rank 2, F0)");
                                               throw std::runtime_error("boom");
                                             }
                                             sleep_a_minute(channel);
                                           });
  EXPECT_LT(seconds_since(start), 2.0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_EQ(result.failure->rank, 2);
  EXPECT_FALSE(result.failure->input_error);
  EXPECT_EQ(result.failure->message, "rank 2: boom");
  ASSERT_EQ(result.workers.size(), 4U);
  EXPECT_EQ(result.workers[2].exit_code, 1);
  EXPECT_EQ(result.workers[2].error, "boom");
  EXPECT_EQ(result.workers[2].status, "task 7 (rank 2, F0)");
  for (const std::size_t other : {0U, 1U, 3U}) {
    EXPECT_TRUE(result.workers[other].ended_by_launcher) << other;
    EXPECT_EQ(result.workers[other].signal, SIGTERM) << other;
  }
  expect_nothing_left(result);
}

TEST(LocalLauncher, AnInputErrorOfARankIsMarkedAsSuch) {
  const LaunchResult result =
      launch_local({.workers = 2}, [](std::int32_t rank, WorkerChannel& channel) {
        if (rank == 0) throw InvalidConfig("graph has 3 ranks; expected 2");
        sleep_a_minute(channel);
      });
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.failure->input_error);
  EXPECT_EQ(result.failure->message, "rank 0: graph has 3 ranks; expected 2");
  expect_nothing_left(result);
}

TEST(LocalLauncher, AReportedErrorFailsTheRunEvenWhenTheWorkerReturns) {
  const LaunchResult result =
      launch_local({.workers = 2}, [](std::int32_t rank, WorkerChannel& channel) {
        if (rank == 1) {
          channel.report_error("checksum mismatch in task 4");
          return;
        }
        sleep_a_minute(channel);
      });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_EQ(result.failure->message, "rank 1: checksum mismatch in task 4");
  expect_nothing_left(result);
}

TEST(LocalLauncher, ARankKilledByASignalIsReportedWithItsLastStatus) {
  const auto start = Clock::now();
  const LaunchResult result =
      launch_local({.workers = 3}, [](std::int32_t rank, WorkerChannel& channel) {
        if (rank == 1) {
          channel.set_status("task 12 (rank 1, F3): computing");
          ::raise(SIGKILL);
        }
        sleep_a_minute(channel);
      });
  EXPECT_LT(seconds_since(start), 3.0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kSignal);
  EXPECT_EQ(result.failure->rank, 1);
  EXPECT_EQ(result.failure->signal, SIGKILL);
  EXPECT_EQ(result.failure->message,
            "rank 1 was killed by signal 9 (Killed) while task 12 (rank 1, F3): computing");
  EXPECT_EQ(result.workers[1].signal, SIGKILL);
  EXPECT_FALSE(result.workers[1].ended_by_launcher);
  expect_nothing_left(result);
}

TEST(LocalLauncher, ANonZeroExitWithoutAMessageNamesTheRankAndStatus) {
  const LaunchResult result =
      launch_local({.workers = 2}, [](std::int32_t rank, WorkerChannel& channel) {
        if (rank == 0) ::_exit(3);
        sleep_a_minute(channel);
      });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kExit);
  EXPECT_EQ(result.failure->message, "rank 0 exited with status 3 before publishing a status");
  EXPECT_EQ(result.workers[0].exit_code, 3);
  expect_nothing_left(result);
}

TEST(LocalLauncher, AHangEndsWithEveryRanksLastStatus) {
  const auto start = Clock::now();
  const LaunchResult result =
      launch_local({.workers = 3, .timeout = milliseconds(500), .grace = milliseconds(500)},
                   [](std::int32_t rank, WorkerChannel& channel) {
                     if (rank == 2) {
                       channel.set_status("task 9 (rank 2, B1): waiting for recv from rank 1");
                       std::this_thread::sleep_for(std::chrono::seconds(60));
                     }
                     sleep_a_minute(channel);
                   });
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.5);
  EXPECT_LT(elapsed, 2.0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kTimeout);
  EXPECT_EQ(result.failure->rank, -1);
  EXPECT_EQ(result.failure->message,
            "no progress for 0.5 s; last status of each rank:\n"
            "  - rank 0: sleeping in rank 0\n"
            "  - rank 1: sleeping in rank 1\n"
            "  - rank 2: task 9 (rank 2, B1): waiting for recv from rank 1");
  for (const WorkerReport& w : result.workers) EXPECT_EQ(w.signal, SIGTERM) << w.rank;
  expect_nothing_left(result);
}

TEST(LocalLauncher, AWorkerThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  const auto start = Clock::now();
  const LaunchResult result =
      launch_local({.workers = 1, .timeout = milliseconds(200), .grace = milliseconds(300)},
                   [](std::int32_t, WorkerChannel& channel) {
                     ::signal(SIGTERM, SIG_IGN);
                     sleep_a_minute(channel);  // the watchdog starts counting from this status
                   });
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.5);
  EXPECT_LT(elapsed, 1.5);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kTimeout);
  EXPECT_EQ(result.workers[0].signal, SIGKILL);
  EXPECT_TRUE(result.workers[0].ended_by_launcher);
  expect_nothing_left(result);
}

TEST(LocalLauncher, SigtermToTheLauncherEndsEveryRank) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &before), 0);
  const LaunchResult result =
      launch_local({.workers = 3}, [](std::int32_t rank, WorkerChannel& channel) {
        channel.set_status("rank " + std::to_string(rank) + " started");
        if (rank == 0) {
          std::this_thread::sleep_for(milliseconds(50));  // usually lets the others publish
          ::kill(::getppid(), SIGTERM);
        }
        std::this_thread::sleep_for(std::chrono::seconds(60));
      });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kInterrupted);
  EXPECT_EQ(result.failure->signal, SIGTERM);
  // The other ranks' lines depend on whether they published before the signal came.
  EXPECT_THAT(result.failure->message,
              testing::StartsWith("interrupted by signal 15 (Terminated); last status of each "
                                  "rank:\n  - rank 0: rank 0 started\n  - rank 1: "));
  for (const WorkerReport& w : result.workers) EXPECT_TRUE(w.ended_by_launcher) << w.rank;
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler) << "the launcher's handler was not removed";
  expect_nothing_left(result);
}

TEST(LocalLauncher, RejectsAnEmptyRunAsBadInput) {
  EXPECT_THAT(
      [] { (void)launch_local({.workers = 0}, [](std::int32_t, WorkerChannel&) {}); },
      testing::ThrowsMessage<InvalidConfig>("local launch: 0 workers; expected at least 1"));
}

TEST(LocalLauncher, RefusesToForkFromAThreadedProcess) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) std::this_thread::sleep_for(milliseconds(1));
  });
  // At least this one and the test's: a sanitizer's runtime may run a thread of its own (TSan).
  EXPECT_THAT([] { (void)launch_local({.workers = 1}, [](std::int32_t, WorkerChannel&) {}); },
              testing::ThrowsMessage<InternalError>(testing::ContainsRegex(
                  "launch_local called with ([2-9]|[1-9][0-9]+) threads running; it must fork "
                  "before the process starts threads")));
  stop.store(true);
  busy.join();
}

}  // namespace
}  // namespace metron::exec
