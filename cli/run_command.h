#pragma once
// `metron run`: executes a step's graph for real on the CPU backend, one process per rank, and
// reports what was measured with the same keys as `metron simulate`.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"

namespace metron::cli {

/// What `run` and `profile` start from without a scenario file (flags override it field by
/// field): a step that takes seconds on a CPU, GPT-3 125M's layers at sequence 128 on the
/// cpu-local preset, 1F1B over 2 ranks with 4 microbatches.
scenario::Scenario default_run_scenario();

/// The step the executor runs for `scenario`: every rank in the graph (tp·pp·dp processes) and
/// the operations of every compute task. Throws InvalidConfig for what cannot run here (context
/// or expert parallelism, more ranks than one machine takes) and what build_step throws.
scenario::Step executable_step(const scenario::Scenario& scenario);

/// A TCP port free on this machine now, for the store of a local run (rank 0 binds it a moment
/// later). Throws BackendError when the machine has none to give.
std::int32_t free_port();

/// Throws InvalidConfig, before anything runs, for a --backend this metron was built without
/// (cpu without METRON_ENABLE_CPU_BACKEND, cuda without CUDA and NCCL); `run` and `profile` both
/// ask it.
void check_backend_built(const std::string& backend);

/// Adds the `run` subcommand to `app`.
void add_run_command(CLI::App& app);

}  // namespace metron::cli
