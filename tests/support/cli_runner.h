#pragma once
// Runs the metron command as a user runs it, for the CLI tests: arguments in through the shell,
// exit code, stdout and stderr out, each test in a scratch folder of its own. The binary is
// METRON_BINARY, which tests/cli/CMakeLists.txt defines.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "metron/base/file_io.h"

namespace metron::testing {

/// What one run of the command gave.
struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

/// A test fixture whose metron() runs the command in a fresh folder, dir_.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    // The process id too: two test runs on one machine (two build folders, or CI beside a
    // developer) must not write each other's stdout and stderr.
    dir_ = std::filesystem::temp_directory_path() /
           ("metron-cli-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs `metron <args>` through the shell, optionally feeding `input` on stdin.
  Outcome metron(const std::string& args, const std::string& input = "") const {
    return metron_with_env("", args, input);
  }
  /// The same with environment assignments ("A=1 B=2") for the command alone.
  Outcome metron_with_env(const std::string& env, const std::string& args,
                          const std::string& input = "") const {
    const std::string out = (dir_ / "stdout").string();
    const std::string err = (dir_ / "stderr").string();
    std::string command = env + (env.empty() ? "" : " ") + std::string(METRON_BINARY) + " " + args +
                          " >" + out + " 2>" + err;
    if (!input.empty()) {
      write_file_atomically((dir_ / "stdin").string(), input);
      command += " <" + (dir_ / "stdin").string();
    }
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace metron::testing
