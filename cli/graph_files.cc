#include "graph_files.h"

#include <string_view>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/json_format.h"
#include "metron/ir/rows_graph.h"

namespace metron::cli {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string source_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

bool looks_like_json(std::string_view content) {
  const auto first = content.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && content[first] == '{';
}

}  // namespace

GraphFormat graph_format(const std::string& path, const std::optional<std::string>& flag) {
  if (flag) {
    for (std::size_t i = 0; i < kGraphFormatNames.size(); ++i) {
      if (*flag == kGraphFormatNames[i]) return static_cast<GraphFormat>(i);
    }
    throw InvalidConfig("unknown graph format \"" + *flag + "\"; expected json, text or csv");
  }
  if (ends_with(path, ".json")) return GraphFormat::kJson;
  if (ends_with(path, ".csv")) return GraphFormat::kCsv;
  return GraphFormat::kText;
}

ir::Graph load_graph(const std::string& path, const std::optional<std::string>& from,
                     Diagnostics& diagnostics) {
  const std::string content = read_file(path);
  // An empty input is a mistake (a truncated download, the wrong file), not "a valid task graph
  // with 0 ranks"; graphs built in code may still be empty.
  if (content.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ParseError(
        source_name(path), 0, 0,
        std::string(content.empty() ? "the input is empty" : "the input holds only whitespace") +
            "; expected a task graph in the JSON, text or CSV form");
  }
  GraphFormat format = graph_format(path, from);
  if (!from && path == "-" && looks_like_json(content)) format = GraphFormat::kJson;
  switch (format) {
    case GraphFormat::kJson:
      return ir::graph_from_json(content, source_name(path), &diagnostics);
    case GraphFormat::kText: {
      const ir::ActionRows rows = ir::parse_rows(content, source_name(path));
      if (rows.rows.empty()) {
        throw ParseError(source_name(path), 0, 0,
                         "the input has no \"rank <r>:\" line, only comments or groups; expected "
                         "a task graph with at least one rank");
      }
      return ir::rows_to_graph(rows);
    }
    case GraphFormat::kCsv:
      return ir::rows_to_graph(ir::parse_csv(content, source_name(path)));
  }
  throw InvalidConfig("unknown graph format");
}

std::string render_graph(const ir::Graph& graph, GraphFormat format) {
  switch (format) {
    case GraphFormat::kJson:
      return ir::to_json(graph);
    case GraphFormat::kText:
      return ir::format_rows(ir::graph_to_rows(graph));
    case GraphFormat::kCsv:
      return ir::format_csv(ir::graph_to_rows(graph));
  }
  throw InvalidConfig("unknown graph format");
}

}  // namespace metron::cli
