#pragma once
// `metron compare PREDICTED MEASURED`: a prediction against a measurement of the same step, as
// two merged traces (figures per rank, error per task kind, the tasks that differ most, and both
// timelines in one trace) or two result JSONs (the figures only).

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `compare` subcommand to `app`.
void add_compare_command(CLI::App& app);

}  // namespace metron::cli
