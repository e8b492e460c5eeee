#pragma once
// `metron presets`: the named models and machines metron knows, with their key numbers.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `presets` subcommand to `app`.
void add_presets_command(CLI::App& app);

}  // namespace metron::cli
