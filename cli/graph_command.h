#pragma once
// `metron graph check` and `metron graph convert`.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `graph` subcommand and its own subcommands to `app`.
void add_graph_command(CLI::App& app);

}  // namespace metron::cli
