// Note [two programs] (cli_main.h).

#include "executor_handoff.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "executor_commands.h"
#include "metron/base/error.h"

namespace metron::cli {

namespace {

constexpr const char* kExecutorName = "metron-exec";

bool is_executable_file(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

// The candidates executor_path looks at, in order.
std::vector<std::filesystem::path> executor_candidates(const std::filesystem::path& self) {
  const std::filesystem::path dir = self.parent_path();
  return {dir / kExecutorName,
          (dir / METRON_EXECUTOR_FROM_BINDIR / kExecutorName).lexically_normal()};
}

// The command a command line names, when it is one that metron-exec runs: the first argument that
// is not an option (metron's own options, --help and --version, take no value).
std::optional<std::string_view> executor_command_of(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word.empty() || word[0] == '-') continue;
    if (word == "run" || word == "profile") return word;
    return std::nullopt;
  }
  return std::nullopt;
}

// Where metron-exec is for the program at `self`: the first candidate that is an executable file.
std::optional<std::filesystem::path> executor_path(const std::filesystem::path& self) {
  for (const std::filesystem::path& candidate : executor_candidates(self)) {
    if (is_executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

}  // namespace

void hand_off_executor_commands(int argc, char** argv) {
  const std::optional<std::string_view> command = executor_command_of(argc, argv);
  if (!command) return;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    throw BackendError(
        "'metron " + std::string(*command) + "' runs in " + kExecutorName +
        ", found beside this program, but /proc/self/exe cannot be read: " + error.message());
  }
  const std::optional<std::filesystem::path> executor = executor_path(self);
  if (!executor) {
    const std::vector<std::filesystem::path> looked = executor_candidates(self);
    throw BackendError("'metron " + std::string(*command) + "' runs in " + kExecutorName +
                       ", which is missing: expected an executable " + looked[0].string() +
                       " (build tree) or " + looked[1].string() +
                       " (installed); build or install the metron-exec target too");
  }
  // libtorch logs through glog, which writes c10d's own lines ("Logging before
  // InitGoogleLogging()", "[c10d] The client socket has timed out ...") to stderr above metron's
  // error, which already quotes what they say. glog takes its threshold from the environment when
  // metron-exec loads libtorch, before any code of ours runs, so it is set here, before the exec:
  // fatal messages only. A user's own GLOG_minloglevel (0 shows everything) is kept.
  ::setenv("GLOG_minloglevel", "3", /*overwrite=*/0);
  ::execv(executor->c_str(), argv);
  const int cause = errno;  // execv returns only when it failed
  throw BackendError("cannot start " + executor->string() + " for 'metron " +
                     std::string(*command) + "': " + std::strerror(cause));
}

void add_executor_command_summaries(CLI::App& app) {
  for (const auto& [name, description] :
       {std::pair{"run", kRunDescription}, std::pair{"profile", kProfileDescription}}) {
    CLI::App* cmd = app.add_subcommand(name, std::string(description));
    // The whole command line went to metron-exec before parsing; whatever follows the name is
    // its business, so that parsing never reaches a summary with an option it does not know.
    cmd->allow_extras();
    cmd->callback([name = std::string(name)] {
      throw InternalError(__FILE__, __LINE__,
                          "'" + name + "' reached metron instead of " + kExecutorName);
    });
  }
}

}  // namespace metron::cli
