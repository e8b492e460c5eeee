#pragma once
// `metron run`: executes a step's graph for real on the CPU backend, one process per rank, and
// reports what was measured with the same keys as `metron simulate`.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `run` subcommand to `app`.
void add_run_command(CLI::App& app);

}  // namespace metron::cli
