#pragma once
// `metron schedule`: print a pipeline schedule's per-rank order, grid, CSV or lowered graph.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `schedule` subcommand to `app`.
void add_schedule_command(CLI::App& app);

}  // namespace metron::cli
