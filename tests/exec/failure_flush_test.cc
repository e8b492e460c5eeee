// What a failing rank recorded reaches its file however the rank ends (exec/src/failure_flush.h):
// by its own error, by the launcher's SIGTERM, or by both at once, each in a process of its own
// (the flush ends a process it is SIGTERMed in).

#include "failure_flush.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "metron/base/file_io.h"
#include "support/child_process.h"

namespace metron::exec {
namespace {

using namespace std::chrono_literals;

/// A scratch file for one test, removed after it.
struct ScratchFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("metron-flush-" + std::to_string(::getpid()) + "-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                         .string();
  ScratchFile() { std::filesystem::remove(path); }
  ~ScratchFile() { std::filesystem::remove(path); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ScratchFile(ScratchFile&&) = delete;
  ScratchFile& operator=(ScratchFile&&) = delete;
};

using testing::status_of_child;

/// A flush that takes `takes` and then writes how many iterations it was handed.
detail::FailureFlush::Flush slow_writer(const std::string& path, std::chrono::milliseconds takes) {
  return [path, takes](const std::vector<RankIteration>& iterations) {
    std::this_thread::sleep_for(takes);
    write_file_atomically(path, std::to_string(iterations.size()) + " iterations");
  };
}

std::vector<RankIteration> three_iterations() { return std::vector<RankIteration>(3); }

TEST(FailureFlush, ARanksOwnFailureFlushesOnItsThread) {
  const ScratchFile file;
  const int status = status_of_child([&] {
    detail::FailureFlush flush(three_iterations, slow_writer(file.path, 0ms));
    flush.flush_now();
    flush.flush_now();  // once only: a second call neither writes again nor fails
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_file(file.path), "3 iterations");
}

TEST(FailureFlush, SigtermFlushesAndExitsAsTheSignalWould) {
  const ScratchFile file;
  const int status = status_of_child([&] {
    const detail::FailureFlush flush(three_iterations, slow_writer(file.path, 0ms));
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(10s);  // the flush thread ends the process first
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(read_file(file.path), "3 iterations");
}

// The rank's own error came first and its flush is under way when the launcher, ending the run
// for another rank's death, sends SIGTERM: the process ends only after the file is written.
TEST(FailureFlush, SigtermDuringARanksOwnFlushWaitsForItBeforeExiting) {
  const ScratchFile file;
  const int status = status_of_child([&] {
    detail::FailureFlush flush(three_iterations, slow_writer(file.path, 300ms));
    std::thread failing([&] { flush.flush_now(); });
    std::this_thread::sleep_for(50ms);  // the flush sleeps in its writer now
    ::kill(::getpid(), SIGTERM);
    failing.join();
    std::this_thread::sleep_for(10s);  // the flush thread ends the process first
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(read_file(file.path), "3 iterations");
}

}  // namespace
}  // namespace metron::exec
