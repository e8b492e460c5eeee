#pragma once
// How `metron` hands `run` and `profile` to `metron-exec` (Note [two programs] in cli_main.h).

#include <CLI/CLI.hpp>

namespace metron::cli {

/// When `argv` names run or profile, replaces this process with metron-exec and the same
/// arguments; returns only when it does not name them. Throws BackendError naming the command and
/// the places looked in when metron-exec is missing or cannot start.
void hand_off_executor_commands(int argc, char** argv);

/// Adds `run` and `profile` with their descriptions and nothing else, for `metron --help`: by
/// the time a command line reaches them, hand_off_executor_commands has handed it over.
void add_executor_command_summaries(CLI::App& app);

}  // namespace metron::cli
