#pragma once
// The flags that describe a scenario, shared by the commands that build a step from one
// (`simulate` predicts it, `run` executes it): a scenario file (or the built-in default) that
// the flags override field by field.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "layer_split_flags.h"
#include "metron/scenario/scenario.h"
#include "sync_flags.h"

namespace metron::cli {

/// Flags override the scenario file (or the built-in default) field by field; unset = keep.
struct ScenarioFlags {
  std::string scenario_file;
  std::optional<std::string> model;
  std::optional<std::string> hardware;
  std::optional<std::int64_t> gpus;
  std::optional<std::int64_t> tp, pp, dp, vp, cp, ep;
  LayerSplitFlags layer_split;
  bool sp = false;
  bool no_sp = false;
  std::optional<std::int64_t> microbatch_size, global_batch, microbatches, seq;
  std::optional<std::string> recompute;
  std::optional<std::string> attention;
  std::optional<std::string> fp8;
  bool tp_comm_overlap = false;
  bool no_tp_comm_overlap = false;
  bool scatter_gather_p2p = false;
  bool no_scatter_gather_p2p = false;
  std::optional<std::string> schedule;
  std::optional<std::int32_t> group_size, memory_limit;
  std::optional<std::string> p2p;
  SyncFlags sync;
  std::optional<std::string> profile;
};

/// Adds the scenario positional argument and the flags to `cmd`.
void add_scenario_flags(CLI::App& cmd, ScenarioFlags& o);

/// The scenario the flags describe (not yet validated: scenario::validate): the scenario file,
/// or `base` without one, overridden by the flags. Throws InvalidConfig for contradicting flags
/// and what loading a file or preset throws.
scenario::Scenario scenario_of(const ScenarioFlags& o,
                               const scenario::Scenario& base = scenario::default_scenario());

}  // namespace metron::cli
