#include "compare_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "integer_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/base/json_parse.h"
#include "metron/traces/result_comparison.h"
#include "metron/traces/trace_checker.h"
#include "metron/traces/trace_comparison.h"
#include "output_files.h"

namespace metron::cli {
namespace {

using Json = nlohmann::ordered_json;

struct CompareOptions {
  std::string predicted;
  std::string measured;
  std::int32_t top = 10;
  std::string trace;
};

void run(const CompareOptions& o) {
  check_outputs({{"--trace", o.trace}});
  const std::string predicted = traces::read_chrome_trace_text(o.predicted);
  const std::string measured = traces::read_chrome_trace_text(o.measured);
  const Json p = parse_json_document<Json>(predicted, o.predicted);
  const Json m = parse_json_document<Json>(measured, o.measured);
  const bool p_trace = p.is_object() && p.contains("traceEvents");
  const bool m_trace = m.is_object() && m.contains("traceEvents");
  if (p_trace != m_trace) {
    throw InvalidConfig(o.predicted + " and " + o.measured +
                        ": one is a trace and one a result; expected two traces or two results");
  }
  if (!p_trace) {
    if (!o.trace.empty()) {
      throw InvalidConfig("--trace: results hold no timelines; expected two traces");
    }
    std::cout << traces::compare_result_figures(traces::read_result_figures(predicted, o.predicted),
                                                traces::read_result_figures(measured, o.measured));
    return;
  }
  std::cout << traces::compare_trace_steps(traces::read_trace_step(predicted, o.predicted),
                                           traces::read_trace_step(measured, o.measured), o.top);
  if (!o.trace.empty()) {
    write_file_atomically(o.trace, traces::side_by_side_trace(predicted, measured));
    std::cout << "  both timelines        " << o.trace << " (open in https://ui.perfetto.dev)\n";
  }
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare a prediction with a measurement of the same step. Given two merged traces\n"
      "('metron simulate --full --trace' and 'metron run --trace'): the iteration time and, per\n"
      "rank, compute, idle, bubble by cause, exposed and overlapped communication and peak\n"
      "memory, each predicted, measured and the error (positive: predicted too slow); per task\n"
      "kind (F, B, I, W, OPT, send, recv, each collective) the spread of the duration errors;\n"
      "the tasks that differ most; and with --trace both timelines in one trace, each rank's\n"
      "prediction above its measurement. Given two result JSONs (--json of both): the figures.");
  cmd->add_option("predicted", o->predicted, "the prediction: trace or result JSON")->required();
  cmd->add_option("measured", o->measured, "the measurement: trace or result JSON")->required();
  cmd->add_option("--top", o->top, "how many of the most different tasks to list")
      ->check(integer_in(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--trace", o->trace, "write both timelines into one Chrome trace here");
  check_integer_options(*cmd);
  cmd->callback([o] { run(*o); });
}

}  // namespace metron::cli
