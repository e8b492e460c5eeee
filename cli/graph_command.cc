#include "graph_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph_files.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/rows_graph.h"

namespace metron::cli {
namespace {

// Rows of larger graphs are too wide to be worth printing in a summary.
constexpr std::int32_t kMaxRanksToPrintRows = 16;

struct CheckOptions {
  std::string path;
  std::optional<std::string> from;
  bool quiet = false;
};

struct ConvertOptions {
  std::string input;
  std::string output;
  std::optional<std::string> from;
  std::optional<std::string> to;
};

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(units)) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

std::string task_counts(const ir::Graph& graph) {
  std::map<ir::TaskKind, int> counts;
  for (const auto& t : graph.tasks()) ++counts[t.kind()];
  std::string out = fmt::format("{}:", graph.num_tasks());
  const char* sep = " ";
  for (auto kind : {ir::TaskKind::kCompute, ir::TaskKind::kSend, ir::TaskKind::kRecv,
                    ir::TaskKind::kCollective, ir::TaskKind::kHostWait}) {
    out += fmt::format("{}{} {}", sep, counts[kind], ir::to_string(kind));
    sep = ", ";
  }
  return out;
}

std::string traffic(const ir::Graph& graph) {
  int pairs = 0;
  int collectives = 0;
  double p2p_bytes = 0;
  double collective_bytes = 0;
  for (std::int32_t i = 0; i < graph.num_comm_instances(); ++i) {
    const auto& first = graph.task(graph.comm_members(i).front());
    if (const auto* c = std::get_if<ir::Collective>(&first.op)) {
      ++collectives;
      collective_bytes += static_cast<double>(c->bytes);
    } else if (const auto* s = std::get_if<ir::Send>(&first.op)) {
      ++pairs;
      p2p_bytes += static_cast<double>(s->bytes);
    }
  }
  return fmt::format("{} send/recv pairs moving {}; {} collectives on {} of per-rank buffers",
                     pairs, human_bytes(p2p_bytes), collectives, human_bytes(collective_bytes));
}

std::string streams_line(const ir::Graph& graph) {
  std::vector<std::string> names;
  for (const auto& stream : graph.data().streams) {
    if (std::find(names.begin(), names.end(), stream.name) == names.end())
      names.push_back(stream.name);
  }
  std::string out = std::to_string(graph.data().streams.size());
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? " (" : ", ") + names[i];
  return names.empty() ? out : out + ")";
}

std::string groups_line(const ir::Graph& graph) {
  const auto& groups = graph.data().groups;
  std::string out = std::to_string(groups.size());
  for (std::size_t g = 0; g < groups.size() && g < 8; ++g) {
    std::string ranks;
    for (auto r : groups[g].ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r.value());
    out += fmt::format("{}{} {{{}}}", g == 0 ? " (" : ", ", groups[g].name, ranks);
  }
  if (!groups.empty()) out += groups.size() > 8 ? ", ...)" : ")";
  return out;
}

void print_summary(const std::string& path, const ir::Graph& graph,
                   const ir::DeadlockReport& dry_run, const Diagnostics& diagnostics) {
  double buffer_bytes = 0;
  for (const auto& b : graph.data().buffers) buffer_bytes += static_cast<double>(b.bytes);
  std::cout << fmt::format("{}: valid task graph\n", path == "-" ? "<stdin>" : path)
            << fmt::format("  ranks     {}\n", graph.num_ranks())
            << fmt::format("  streams   {}\n", streams_line(graph))
            << fmt::format("  groups    {}\n", groups_line(graph))
            << fmt::format("  tasks     {}\n", task_counts(graph))
            << fmt::format("  traffic   {}\n", traffic(graph))
            << fmt::format("  buffers   {} holding {}\n", graph.data().buffers.size(),
                           human_bytes(buffer_bytes))
            << fmt::format("  dry run   no deadlock: every task completes in {} unit steps\n",
                           dry_run.steps);
  for (const auto& message : diagnostics.messages()) std::cout << "  note      " << message << "\n";
  if (graph.num_ranks() > kMaxRanksToPrintRows) {
    std::cout << fmt::format("(rows of {} ranks not shown: metron graph convert {} - --to text)\n",
                             graph.num_ranks(), path);
    return;
  }
  try {
    std::cout << "\n" << ir::format_rows(ir::graph_to_rows(graph));
  } catch (const InvalidConfig& e) {
    std::cout << "(no text form: " << e.what() << ")\n";
  }
}

void run_check(const CheckOptions& options) {
  Diagnostics diagnostics;
  const ir::Graph graph = load_graph(options.path, options.from, diagnostics);
  const ir::DeadlockReport dry_run = ir::find_deadlock(graph);
  if (dry_run.deadlocked) throw Deadlock(dry_run.blocked);
  if (!options.quiet) print_summary(options.path, graph, dry_run, diagnostics);
}

void run_convert(const ConvertOptions& options) {
  Diagnostics diagnostics;
  const ir::Graph graph = load_graph(options.input, options.from, diagnostics);
  const GraphFormat to = graph_format(options.output, options.to);
  write_file_atomically(options.output, render_graph(graph, to));
}

void add_format_option(CLI::App& command, const std::string& name,
                       std::optional<std::string>& value, const std::string& help) {
  command.add_option(name, value, help)->check(CLI::IsMember(kGraphFormatNames));
}

void add_check(CLI::App& graph) {
  auto options = std::make_shared<CheckOptions>();
  CLI::App* check = graph.add_subcommand(
      "check",
      "Validate a task graph and run the static deadlock check.\n"
      "Reports every problem at once (cycles, unmatched sends or receives, collectives whose\n"
      "members disagree, dangling ids, tasks on another rank's stream, ...) and exits with 2\n"
      "when there is any. A valid graph gets a summary and, up to 16 ranks, its per-rank rows.");
  check
      ->add_option("file", options->path, "graph file (.json, .csv, or the text form); - for stdin")
      ->required();
  add_format_option(*check, "--from", options->from, "input format (default: from the file name)");
  check->add_flag("-q,--quiet", options->quiet, "print nothing when the graph is valid");
  check->footer(
      "\nExamples:\n  metron graph check examples/1f1b-2stage-dp2.json\n"
      "  metron graph check my-schedule.txt\n");
  check->callback([options] { run_check(*options); });
}

void add_convert(CLI::App& graph) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* convert = graph.add_subcommand(
      "convert",
      "Convert a task graph between the JSON form (lossless), the per-rank text form and\n"
      "PyTorch's CSV form. The graph is validated on the way; the output is written\n"
      "atomically (never half-written).");
  convert->add_option("input", options->input, "graph to read; - for stdin")->required();
  convert->add_option("output", options->output, "file to write; - for stdout")->required();
  add_format_option(*convert, "--from", options->from,
                    "input format (default: from the file name)");
  add_format_option(*convert, "--to", options->to,
                    "output format (default: from the file name; text for -)");
  convert->footer(
      "\nExamples:\n  metron graph convert examples/1f1b-2stage-dp2.json step.txt\n"
      "  metron graph convert schedule.csv schedule.json\n"
      "  metron graph convert graph.json - --to text\n");
  convert->callback([options] { run_convert(*options); });
}

}  // namespace

void add_graph_command(CLI::App& app) {
  CLI::App* graph = app.add_subcommand(
      "graph", "Check and convert task graphs: the IR both the simulator and the executor run");
  graph->require_subcommand(1);
  add_check(*graph);
  add_convert(*graph);
}

}  // namespace metron::cli
