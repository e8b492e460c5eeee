#pragma once
// The flags that split a model's layers unevenly over the pipeline ranks (Note [uneven stages]):
// Megatron's first and last ranks' counts, every rank's, or the embedding and loss accounted as
// layers. Shared by the commands that take a
// scenario (simulate, run, profile) and by `cost`, whose per-rank memory depends on the split.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "metron/models/parallel_spec.h"

namespace metron::cli {

/// Unset: keep what the spec has.
struct LayerSplitFlags {
  std::optional<std::int64_t> first_stage_layers, last_stage_layers;
  std::optional<std::string> pipeline_layers;  ///< "8,8,8,6", parsed by apply_layer_split
  bool account_for_embedding = false;          ///< Megatron's --account-for-embedding-in-...
  bool account_for_loss = false;               ///< Megatron's --account-for-loss-in-...
};

/// --first-stage-layers, --last-stage-layers, --pipeline-layers and Megatron's
/// --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split.
void add_layer_split_flags(CLI::App& cmd, LayerSplitFlags& o);

/// Overrides `spec`'s split with the flags' (a form given replaces the spec's other forms).
/// Throws InvalidConfig for two forms at once or a bad list, naming the flags.
void apply_layer_split(const LayerSplitFlags& o, models::ParallelSpec& spec);

}  // namespace metron::cli
