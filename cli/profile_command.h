#pragma once
// `metron profile`: measures, on the executor's backend, the operations a scenario's step is made
// of and writes them as a cost profile that `--profile` reads (issue 17).

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `profile` subcommand to `app`.
void add_profile_command(CLI::App& app);

}  // namespace metron::cli
