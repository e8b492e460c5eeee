#include "simulate_command.h"

#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "integer_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_export.h"
#include "metron/pipeline/registry.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/world_layout.h"
#include "metron/sim/trace_export.h"
#include "metron/timelines/kineto_trace.h"
#include "metron/traces/chrome_trace_writer.h"
#include "output_files.h"
#include "scenario_flags.h"
#include "trace_metadata.h"

namespace metron::cli {
namespace {

/// The scenario flags and what `simulate` writes.
struct SimulateOptions {
  ScenarioFlags scenario;
  bool full = false;
  std::string trace;
  std::string trace_dir;
  std::string chakra;
  std::string json;
  std::string save_scenario;
};

/// The traces `o` asks for, of a step and what was simulated of it (all of it, or up to a
/// deadlock): the merged trace (--trace), one Kineto-shaped file per rank (--trace-dir) and the
/// Chakra execution traces (--chakra, files added to `files`).
std::vector<TraceOutput> step_traces(const SimulateOptions& o, const scenario::Scenario& scenario,
                                     const scenario::Step& step, const sim::SimResult& result,
                                     std::vector<OutputFile>& files) {
  std::vector<TraceOutput> out;
  if (o.trace.empty() && o.trace_dir.empty() && o.chakra.empty()) return out;
  const sim::TraceOptions options = scenario::trace_options(scenario, step);
  if (!o.trace.empty()) {
    out.push_back(
        {o.trace, sim::simulation_trace(step.graph, result, trace_metadata(scenario), options)});
  }
  if (!o.trace_dir.empty()) {
    std::vector<traces::TraceDocument> ranks =
        sim::simulation_rank_traces(step.graph, result, trace_metadata(scenario), options);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::string name = timelines::rank_trace_file_name(options.layout->world_rank[r]);
      out.push_back({(std::filesystem::path(o.trace_dir) / name).string(), std::move(ranks[r])});
    }
  }
  if (!o.chakra.empty()) {
    for (OutputFile& file : chakra::chakra_trace_files(step.graph, step.durations, o.chakra)) {
      files.push_back(std::move(file));
    }
  }
  return out;
}

/// Writes `files` and `traces` all or nothing, creating the folders --trace-dir and --chakra name
/// first; returns the trace paths written.
std::vector<std::string> write_step_outputs(const SimulateOptions& o, std::vector<OutputFile> files,
                                            const std::vector<TraceOutput>& traces) {
  if (!o.trace_dir.empty()) create_output_directory("--trace-dir", o.trace_dir);
  if (!o.chakra.empty()) create_output_directory("--chakra", o.chakra);
  return write_outputs(std::move(files), traces);
}

void run(const SimulateOptions& o) {
  // --trace-dir and --chakra are folders whose file names never meet (rank-N.json, metron.*):
  // they may be one folder.
  check_outputs({{"--json", o.json},
                 {"--trace", o.trace},
                 {"--save-scenario", o.save_scenario},
                 {"--trace-dir", o.trace_dir, OutputKind::kFolder},
                 {"--chakra", o.chakra, OutputKind::kFolder}});
  const scenario::Scenario scenario = scenario_of(o.scenario);
  // Validated before anything is written, so that a bad scenario leaves no file behind.
  scenario::validate(scenario);
  std::vector<OutputFile> files;
  if (!o.save_scenario.empty()) files.push_back({o.save_scenario, scenario::to_json(scenario)});
  const scenario::Replication replication =
      o.full ? scenario::Replication::kFull : scenario::Replication::kSymmetric;
  scenario::Evaluation evaluation;
  try {
    evaluation = scenario::evaluate(scenario, replication);
  } catch (const sim::SimulationDeadlock& deadlock) {
    // Nothing is lost: the traces up to the deadlock (and the scenario that deadlocked) are
    // written before the error is reported.
    if (!o.trace.empty() || !o.trace_dir.empty() || !o.chakra.empty()) {
      const scenario::Step step = scenario::build_step(scenario, replication);
      const std::vector<TraceOutput> traces =
          step_traces(o, scenario, step, deadlock.partial(), files);
      write_step_outputs(o, std::move(files), traces);
      std::cerr << "metron: wrote the traces up to the deadlock\n";
    } else {
      write_step_outputs(o, std::move(files), {});
    }
    throw;
  }
  if (!o.json.empty()) files.push_back({o.json, scenario::result_json(evaluation)});
  const std::vector<TraceOutput> traces =
      step_traces(o, scenario, evaluation.step, evaluation.result, files);
  std::cout << scenario::summary_text(evaluation);
  const std::vector<std::string> written = write_step_outputs(o, std::move(files), traces);
  if (!o.trace.empty()) {
    std::cout << "  trace                 " << written.front()
              << " (open in https://ui.perfetto.dev)\n";
  }
  if (!o.trace_dir.empty()) {
    std::cout << "  per-rank traces       " << o.trace_dir << "/ ("
              << evaluation.step.graph.num_ranks()
              << " files rank-N.json, for Holistic Trace Analysis)\n";
  }
  if (!o.chakra.empty()) {
    std::cout << "  chakra traces         " << o.chakra << "/ ("
              << evaluation.step.graph.num_ranks()
              << " files metron.N.et and metron.comm_group.json, for ASTRA-sim)\n";
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate one training step: build the task graph of a scenario (schedule, p2p, optimizer\n"
      "step, tensor/context/expert-parallel collectives inside the layers, and the data-parallel\n"
      "sync policy's gradient and parameter collectives) and run it through the discrete-event "
      "simulator\n"
      "with durations from the cost models or from the scenario's explicit per-stage costs.\n"
      "Prints iteration time, tokens/s, MFU, pipeline bubble, exposed communication and peak\n"
      "memory per pipeline rank against the GPU's capacity. Without a scenario file and flags it\n"
      "simulates the built-in default: GPT-3 175B on 1,024 H100 GPUs (tp 8, pp 16, dp 8,\n"
      "interleaved 1F1B with 2 chunks, global batch 1,536, sequence 2,048). Flags override the\n"
      "scenario field by field; without --dp, dp fills the GPUs left by tp, pp and cp.");
  add_scenario_flags(*cmd, o->scenario);
  cmd->add_flag("--full", o->full,
                "simulate every data-parallel replica and tensor-parallel peer, a rank per GPU\n"
                "(context- and expert-parallel peers excepted), instead of one pipeline (same\n"
                "result, slower; every GPU gets its own trace)");
  cmd->add_option("--trace", o->trace,
                  "write the Chrome/Perfetto trace here (gzip for .gz or when over 50 MB)");
  cmd->add_option("--trace-dir", o->trace_dir,
                  "write one Kineto-shaped trace per rank here, rank-<N>.json (N the global\n"
                  "rank), for Holistic Trace Analysis; the folder is created if missing")
      ->type_name("DIR");
  cmd->add_option("--chakra", o->chakra,
                  "write Chakra execution traces for ASTRA-sim here: metron.<rank>.et per rank\n"
                  "and metron.comm_group.json (--comm-group-configuration); created if missing")
      ->type_name("DIR");
  cmd->add_option("--json", o->json, "write the result JSON here");
  cmd->add_option("--save-scenario", o->save_scenario,
                  "write the scenario these flags describe, as JSON");
  check_integer_options(*cmd);
  cmd->callback([o] { run(*o); });
}

}  // namespace metron::cli
