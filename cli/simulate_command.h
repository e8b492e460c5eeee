#pragma once
// `metron simulate`: one training step of a scenario through the discrete-event simulator, with
// its summary, result JSON and trace.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `simulate` subcommand to `app`.
void add_simulate_command(CLI::App& app);

}  // namespace metron::cli
