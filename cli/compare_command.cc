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

double number(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string error_text(double predicted, double measured) {
  return measured == 0 ? "" : fmt::format("{:+.1f}%", 100 * (predicted - measured) / measured);
}

/// Two result JSONs (`simulate --json`, `run --json`): the step's and each rank's figures.
std::string compare_results(const Json& p, const Json& m) {
  std::string out =
      fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "", "predicted", "measured", "error");
  const auto row = [&out](const std::string& what, double a, double b, const char* unit) {
    out += fmt::format("{:<28} {:>11.3f} {:>2} {:>11.3f} {:>2} {:>9}\n", what, a, unit, b, unit,
                       error_text(a, b));
  };
  row("iteration time", number(p, "iteration_time_ms"), number(m, "iteration_time_ms"), "ms");
  row("bubble fraction", 100 * number(p, "bubble_fraction"), 100 * number(m, "bubble_fraction"),
      "%");
  row("exposed communication", 100 * number(p, "exposed_comm_fraction"),
      100 * number(m, "exposed_comm_fraction"), "%");
  const Json& pr = p["per_rank"];
  const Json& mr = m["per_rank"];
  if (!pr.is_array() || !mr.is_array() || pr.size() != mr.size()) {
    throw InvalidConfig(fmt::format(
        "the results have {} and {} ranks; expected two results of one step (compare `simulate "
        "--full --json` with `run --json`)",
        pr.is_array() ? pr.size() : 0, mr.is_array() ? mr.size() : 0));
  }
  for (std::size_t r = 0; r < pr.size(); ++r) {
    out += fmt::format("rank {}\n", r);
    for (const char* key :
         {"compute_ms", "idle_ms", "comm_ms", "comm_exposed_ms", "comm_overlapped_ms"}) {
      row(std::string("  ") + key, number(pr[r], key), number(mr[r], key), "ms");
    }
    if (pr[r].contains("bubble_ms") && mr[r].contains("bubble_ms")) {
      for (const auto& [cause, value] : pr[r]["bubble_ms"].items()) {
        row("  bubble " + cause, value.is_number() ? value.get<double>() : 0.0,
            number(mr[r]["bubble_ms"], cause.c_str()), "ms");
      }
    }
    row("  peak memory", number(pr[r], "peak_memory_bytes") / 1e6,
        number(mr[r], "peak_memory_bytes") / 1e6, "MB");
  }
  return out;
}

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
    if (!p.is_object() || !p.contains("iteration_time_ms") || !m.is_object() ||
        !m.contains("iteration_time_ms")) {
      throw InvalidConfig(
          "expected two result JSONs (`simulate --json`, `run --json`) or two "
          "merged traces (`--trace`)");
    }
    if (!o.trace.empty()) {
      throw InvalidConfig("--trace: results hold no timelines; expected two traces");
    }
    std::cout << compare_results(p, m);
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
