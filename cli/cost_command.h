#pragma once
// `metron cost`: what the cost and memory models say about one layer of a model on a machine —
// FLOPs, bytes and predicted time per phase (and per op), activation memory per microbatch, and
// the weight/gradient/optimizer memory of each pipeline rank under a data-parallel policy.

#include <CLI/CLI.hpp>

namespace metron::cli {

/// Adds the `cost` subcommand to `app`.
void add_cost_command(CLI::App& app);

}  // namespace metron::cli
