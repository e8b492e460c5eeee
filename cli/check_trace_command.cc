#include "check_trace_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "metron/base/error.h"
#include "metron/chakra/chakra_trace.h"
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

/// Whether `directory` holds Chakra execution traces (files ending in ".et").
bool has_chakra_files(const std::string& directory) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    if (entry.path().extension() == ".et") return true;
  }
  return false;
}

/// Whether `directory` holds Chrome traces (".json" or ".gz" files, as HTA lists them).
bool has_chrome_files(const std::string& directory) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    const std::string extension = entry.path().extension().string();
    if (extension == ".gz" ||
        (extension == ".json" && !entry.path().filename().string().ends_with(".comm_group.json"))) {
      return true;
    }
  }
  return false;
}

void check_trace(const CheckTraceOptions& o) {
  std::error_code ec;  // a path that cannot be looked at is read, and reported, as a file
  const bool directory = std::filesystem::is_directory(o.file, ec);
  std::vector<std::string> violations;
  if (!directory && o.file.ends_with(".et")) {
    // Sends and receives pair across the rank files, and groups come from the comm-group JSON
    // beside them: a Chakra trace is checked as its folder.
    throw InvalidConfig(
        o.file +
        ": a Chakra execution trace is checked with the other ranks' "
        "files and its comm-group JSON; expected their folder: metron check-trace " +
        std::filesystem::path(o.file).parent_path().string());
  }
  if (!directory) {
    violations = traces::check_chrome_trace_file(o.file, {.hta = o.hta});
  } else {
    const bool chakra = has_chakra_files(o.file);
    // A folder of Chakra files alone is checked as Chakra; Chrome traces beside them too.
    if (!chakra || has_chrome_files(o.file)) {
      violations = traces::check_chrome_trace_directory(o.file, {.hta = o.hta});
    }
    if (chakra) {
      for (std::string& v : chakra::check_chakra_directory(o.file))
        violations.push_back(std::move(v));
    }
  }
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
      "the same rank as HTA reads it; and its Chakra execution traces (.et, as `simulate\n"
      "--chakra` writes them) against what ASTRA-sim reads (docs/TRACES.md §4.4): each file\n"
      "decodes to its end, GlobalMetadata first, unique node ids, dependencies that exist and\n"
      "form no cycle, the attribute types ASTRA-sim reads, sends and receives that pair across\n"
      "the files, process groups present in the comm-group JSON.");
  cmd->add_option("file", o->file,
                  "the trace file, or a directory of per-rank files (Chrome or Chakra)")
      ->required();
  cmd->add_flag("--hta", o->hta,
                "also apply the rules Holistic Trace Analysis's analyses need, for per-rank\n"
                "files: distributedInfo with \"rank\": <n> (a space after the colon) before\n"
                "traceEvents, each rank in one file; GPU work (every event with args.stream) as\n"
                "X events of cat kernel, gpu_memcpy, gpu_memset or cuda_sync, with integer\n"
                "stream >= 0 and correlation; no stream on CPU events; collective kernels named\n"
                "nccl...; one cuda_runtime launch per correlation, not after its kernel; with\n"
                "two or more ProfilerStep# markers, a launch for every kernel");
  cmd->callback([o] { check_trace(*o); });
}

}  // namespace metron::cli
