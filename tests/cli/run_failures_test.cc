// The executor's failure modes as a user meets them (issue 14's bad-input table, continued): a
// rank killed, a rank hung, the run interrupted, a store nobody serves, a rank that never joins.
// Each case is one `metron run` with what is done to it while it runs, the exit code and the
// shape of the message; after each, no process of the run is alive and no output is left but
// what the surviving ranks flushed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metron/base/file_io.h"
#include "support/cli_runner.h"
#include "support/free_port.h"

namespace metron {
namespace {

using namespace std::chrono_literals;
using testing::Cli;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kData = std::string(METRON_SOURCE_DIR) + "/tests/cli/data/";
/// Two pipeline ranks of a 4-layer model, iterating for minutes unless something ends the run.
const std::string kLongRun = "--model " + kData +
                             "flags-small-model.json --hardware cpu-local --pp 2 -m 2 "
                             "--iterations 1000 --warmup 0";
/// The same for one iteration, for the ranks of an external launch.
const std::string kOneIteration = "--model " + kData +
                                  "flags-small-model.json --hardware cpu-local --pp 2 -m 2 "
                                  "--iterations 1 --warmup 0";

/// A rank's last status, as the launcher quotes it: where its host is and what each stream runs,
/// waits for or ran last, by task.
const std::string kRankStatus =
    "(at the barrier before )?iteration [0-9]+: stream [0-9]+ \\([a-z0-9-]+\\): [^\n]*"
    "\"task [0-9]+ \\(rank [01], stage [01]";

/// What the test does to the run once both of its workers compute.
enum class Action {
  kNone,          ///< nothing: the run fails by itself
  kKillAWorker,   ///< SIGKILL to one rank's process
  kStopAWorker,   ///< SIGSTOP to one rank's process: alive, silent, holding its peers
  kInterruptRun,  ///< SIGINT to metron itself, as Ctrl-C does
};

/// One failing run. In `env` and `args`, {dir} is the test's scratch folder, {port} a free port
/// and {store} the port after it (where rank 0 of an external launch serves the store).
struct RunFailureCase {
  std::string name;  ///< the test's name
  std::string env;   ///< a launcher's environment, for one rank of an external launch
  std::string args;
  Action action = Action::kNone;
  int code = 1;
  std::vector<std::string> message;   ///< substrings of stderr
  std::vector<std::string> patterns;  ///< regular expressions stderr must contain
  std::vector<std::string> absent;    ///< files (in {dir}) the failed run must not leave
  std::vector<std::string> flushed;   ///< files (in {dir}) the ranks still alive must have written
};

const std::vector<RunFailureCase>& cases() {
  static const std::vector<RunFailureCase> kCases = {
      {"ARankKilled",
       "",
       kLongRun + " --timeout 30 --json {dir}/r.json --trace {dir}/t.json --trace-dir {dir}/ranks",
       Action::kKillAWorker,
       1,
       {"metron: error: the run failed: rank "},
       // Its last status names the iteration and the task each of its streams ran or waits for.
       {"rank [01] was killed by signal 9 \\(Killed\\) while " + kRankStatus},
       {"r.json", "t.json"},
       {"ranks"}},
      {"ARankHung",
       "",
       kLongRun + " --timeout 2 --json {dir}/r.json",
       Action::kStopAWorker,
       1,
       {"metron: error: the run failed: no progress for 2 s; last status of each rank:"},
       {"\n  - rank 0: " + kRankStatus, "\n  - rank 1: " + kRankStatus},
       {"r.json"},
       {}},
      {"TheRunInterrupted",
       "",
       kLongRun + " --timeout 30 --json {dir}/r.json",
       Action::kInterruptRun,
       1,
       {"metron: error: the run failed: interrupted by signal 2 (Interrupt); last status of each "
        "rank:",
        "\n  - rank 0: ", "\n  - rank 1: "},
       {},
       {"r.json"},
       {}},
      {"AStoreNobodyServes",
       "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={port}",
       kOneIteration + " --timeout 2 --json {dir}/r.json",
       Action::kNone,
       1,
       // Only metron's error: libtorch's own log lines say the same and are kept off stderr.
       {"metron: error: rank 1: gloo rendezvous at 127.0.0.1:{store} (rank 1 of 2): connecting "
        "to the store: "},
       {"^metron: error: [^\n]*\n$"},
       {"r.json"},
       {}},
      {"ARankThatNeverJoins",
       "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={port}",
       kOneIteration + " --timeout 2 --json {dir}/r.json",
       Action::kNone,
       1,
       {"metron: error: rank 0: gloo rendezvous at 127.0.0.1:{store} (rank 0 of 2): waiting for "
        "every rank to join: 1 of 2 ranks did not join within 2 s (rank 1); expected one process "
        "per rank"},
       {"^metron: error: [^\n]*\n$"},
       {"r.json"},
       {}},
  };
  return kCases;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

/// `/proc/<pid>/stat` after the command name, which may hold spaces and parentheses.
std::optional<std::vector<std::string>> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const std::size_t end = line.rfind(')');
  if (end == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(end + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;  // [0] state, [1] ppid, ... [11] utime, [12] stime
}

/// The processes whose parent is `parent`: the run's rank workers.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (const auto f = stat_fields(pid); f && f->size() > 12 && std::stoi((*f)[1]) == parent) {
      out.push_back(pid);
    }
  }
  return out;
}

/// CPU time a process has used, in clock ticks. A worker is forked after libtorch is loaded and
/// waits on sockets while it meets its peers, so CPU time means it runs its iterations.
long cpu_ticks(pid_t pid) {
  const auto f = stat_fields(pid);
  return f && f->size() > 12 ? std::stol((*f)[11]) + std::stol((*f)[12]) : 0;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

class RunFailures : public Cli, public ::testing::WithParamInterface<RunFailureCase> {
 protected:
  /// Starts `command` through the shell, as its own process group, stdout and stderr to files;
  /// `exec` keeps the pid metron's (and metron-exec's after it).
  pid_t start(const std::string& command) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const std::string line = "exec " + command + " >" + path("stdout") + " 2>" + path("stderr");
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }

  /// The exit code of `pid`, or nullopt if it has not ended by `deadline` (it is then killed).
  static std::optional<int> wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t got = ::waitpid(pid, &status, WNOHANG);
      if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(20ms);
    }
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return std::nullopt;
  }
};

TEST_P(RunFailures, EndsTheRunWithItsExitCodeAndAMessageAndLeavesNothingBehind) {
  const RunFailureCase& c = GetParam();
  const std::string port = std::to_string(testing::free_port());
  const std::string store = std::to_string(std::stoi(port) + 1);
  const auto fill = [&](std::string text) {
    return replace_all(replace_all(replace_all(text, "{dir}", dir_.string()), "{port}", port),
                       "{store}", store);
  };
  const std::string env = fill(c.env);
  const pid_t pid =
      start((env.empty() ? "" : "env " + env + " ") + METRON_BINARY + " run " + fill(c.args));
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + 120s;

  std::vector<pid_t> workers;
  if (c.action != Action::kNone) {
    // Both rank processes exist and compute: the run is in its iterations (half a second of CPU
    // each, well past connecting and preparing the tensors, even under the sanitizers).
    while (std::chrono::steady_clock::now() < deadline) {
      workers = children_of(pid);
      if (workers.size() == 2 && cpu_ticks(workers[0]) > 50 && cpu_ticks(workers[1]) > 50) break;
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(workers.size(), 2U) << read_file(path("stderr"));
    switch (c.action) {
      case Action::kKillAWorker:
        ::kill(workers[1], SIGKILL);
        break;
      case Action::kStopAWorker:
        ::kill(workers[1], SIGSTOP);
        break;
      case Action::kInterruptRun:
        ::kill(pid, SIGINT);
        break;
      case Action::kNone:
        break;
    }
  }
  const std::optional<int> code = wait_until(pid, deadline);
  ASSERT_TRUE(code.has_value()) << "metron run did not end within 120 s";
  const std::string err = read_file(path("stderr"));
  EXPECT_EQ(*code, c.code) << err;
  for (const std::string& m : c.message) EXPECT_THAT(err, HasSubstr(fill(m)));
  for (const std::string& p : c.patterns) EXPECT_THAT(err, ContainsRegex(fill(p)));
  EXPECT_THAT(err, Not(HasSubstr("terminate called")));
  // Every rank process was ended and reaped before metron returned.
  for (const pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " survived the run";
  for (const std::string& f : c.absent) {
    EXPECT_FALSE(std::filesystem::exists(dir_ / f)) << f << " was left behind";
  }
  // What the ranks still alive had recorded is flushed: one partial trace per survivor.
  for (const std::string& f : c.flushed) {
    ASSERT_TRUE(std::filesystem::is_directory(dir_ / f)) << f << " is missing; stderr:\n" << err;
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_ / f)) {
      ++files;
    }
    EXPECT_EQ(files, 1U) << "the one surviving rank's partial trace in " << f;
  }
}

INSTANTIATE_TEST_SUITE_P(Issue14, RunFailures, ::testing::ValuesIn(cases()),
                         [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace metron
