#pragma once
// How `metron` hands `run` and `profile` to `metron-exec` (Note [two programs] in cli_main.h).

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string_view>

namespace metron::cli {

/// The command a command line names, when it is one that metron-exec runs: the first argument
/// that is not an option (metron's own options, --help and --version, take no value).
std::optional<std::string_view> executor_command_of(int argc, const char* const* argv);

/// Where metron-exec is for the program at `self` (this program's path): beside it in the build
/// tree, or at METRON_EXECUTOR_FROM_BINDIR relative to it once installed. nullopt when neither
/// is an executable file.
std::optional<std::filesystem::path> executor_path(const std::filesystem::path& self);

/// When `argv` names run or profile, replaces this process with metron-exec and the same
/// arguments; returns only when it does not name them. Throws BackendError naming the command and
/// the places looked in when metron-exec is missing or cannot start.
void hand_off_executor_commands(int argc, char** argv);

/// Adds `run` and `profile` with their descriptions and nothing else, for `metron --help`: by
/// the time a command line reaches them, hand_off_executor_commands has handed it over.
void add_executor_command_summaries(CLI::App& app);

}  // namespace metron::cli
