#pragma once
// `metron validate`: the published training runs metron ships (or a cases file), each simulated
// and compared with what its source measured, per case and per source.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `validate` subcommand to `app`.
void add_validate_command(CLI::App& app);

}  // namespace metron::cli
