#pragma once
// `metron plan`: search the parallel configurations of a model on a GPU budget and rank the ones
// that fit by simulated throughput (plan/planner.h), with CSV, JSON and traces of the best.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `plan` subcommand to `app`.
void add_plan_command(CLI::App& app);

}  // namespace metron::cli
