#pragma once
// `metron check-trace FILE [--hta]`: the trace checker of docs/TRACES.md §4.4 on one Chrome trace.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `check-trace` subcommand to `app`.
void add_check_trace_command(CLI::App& app);

}  // namespace metron::cli
