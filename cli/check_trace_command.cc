#include "check_trace_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "metron/base/error.h"
#include "metron/traces/trace_checker.h"

namespace metron::cli {
namespace {

struct CheckTraceOptions {
  std::string file;
  bool hta = false;
};

/// The number of entries in traceEvents, for the summary line of a clean trace (which is
/// therefore valid JSON with such a list).
std::size_t count_events(const std::string& file) {
  const std::string text = traces::read_chrome_trace_text(file);
  return nlohmann::json::parse(text).at("traceEvents").size();
}

void check_trace(const CheckTraceOptions& o) {
  std::error_code ec;  // a path that cannot be looked at is read, and reported, as a file
  const bool directory = std::filesystem::is_directory(o.file, ec);
  const std::vector<std::string> violations =
      directory ? traces::check_chrome_trace_directory(o.file, {.hta = o.hta})
                : traces::check_chrome_trace_file(o.file, {.hta = o.hta});
  if (!violations.empty()) {
    throw InvalidConfig(format_problem_list(
        o.file + ": " + std::to_string(violations.size()) +
            (violations.size() == 1 ? " violation" : " violations") + " of the trace rules",
        violations));
  }
  if (directory) {
    std::cout << o.file << ": ok\n";
  } else {
    std::cout << o.file << ": ok (" << count_events(o.file) << " events)\n";
  }
}

}  // namespace

void add_check_trace_command(CLI::App& app) {
  auto o = std::make_shared<CheckTraceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check-trace",
      "Check a Chrome trace (.json or .json.gz) against the rules of the tools that read it\n"
      "(docs/TRACES.md §4.4) and list every violation. Perfetto's importer rules: strict JSON in "
      "the\n"
      "object form, every metadata key before traceEvents; raw UTF-8, no \\u escapes or control\n"
      "characters in names; every event with a ph Perfetto imports (no legacy S/T/p/F) and a\n"
      "numeric ts >= 0; pid and tid integers in [0, 2^32), tid never 0; X events with dur >= 0\n"
      "that nest properly on each row (pid, tid); B/E balanced, an E naming its B or nothing;\n"
      "v2 flows (bind_id) on X/B events, each id with one flow_out and one flow_in, the source\n"
      "not after the destination; v1 flows (s/f) sharing id, cat and name, inside a slice of\n"
      "their row written before them, f with \"bp\": \"e\"; C events with a numeric arg; only\n"
      "the M names Perfetto imports, each set to one value. Exit 0 when clean, 2 otherwise.\n"
      "Given a directory, checks every .json and .gz file in it and that no two of them carry\n"
      "the same rank as HTA reads it.");
  cmd->add_option("file", o->file, "the trace file, or a directory of per-rank files")->required();
  cmd->add_flag("--hta", o->hta,
                "also apply Holistic Trace Analysis's rules for per-rank files: distributedInfo\n"
                "with \"rank\": <n> (a space after the colon) before traceEvents; GPU events\n"
                "(kernel, gpu_mem*, or with args.stream) with integer args.stream >= 1, device\n"
                "and correlation; no stream on CPU events; with ProfilerStep# markers, every\n"
                "kernel's correlation launched by a cuda_runtime event; collective kernels named\n"
                "nccl...; every X event with a cat; no B/E events");
  cmd->callback([o] { check_trace(*o); });
}

}  // namespace metron::cli
