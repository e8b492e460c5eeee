// Fuzzes the JSON form of graphs (ir::graph_from_json, Note [graph JSON]): an accepted graph's
// canonical JSON reads back to an equal graph and prints identically; when the graph has a text
// form, that text parses back, and rows converted from it again give the same rows
// (metron/ir/rows_graph.h).

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metron/base/diagnostics.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/json_format.h"
#include "metron/ir/rows_graph.h"

namespace {

using metron::fuzz::accept;
using metron::fuzz::require;
namespace ir = metron::ir;

void check_rows(const ir::Graph& graph) {
  // Graphs with tasks that have no text form are rejected with InvalidConfig: fine.
  const auto rows = accept([&] { return ir::graph_to_rows(graph); });
  if (!rows) return;
  const std::string text = ir::format_rows(*rows);
  require(ir::parse_rows(text, "<canonical>") == *rows, "parse_rows(format_rows(rows)) != rows");
  // The rows may not convert back (the text form drops tags and stream names), but when they do,
  // rows without idle slots are a fixed point.
  const auto again = accept([&] { return ir::rows_to_graph(*rows); });
  if (again) {
    require(ir::graph_to_rows(*again) == *rows, "graph_to_rows(rows_to_graph(rows)) != rows");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  metron::Diagnostics diagnostics;
  const auto graph = accept([&] {
    return ir::graph_from_json(metron::fuzz::as_text(data, size), "fuzz.json", &diagnostics);
  });
  if (!graph) return 0;
  const std::string json = ir::to_json(*graph);
  const ir::Graph back = ir::graph_from_json(json, "<canonical>");
  require(back == *graph, "graph_from_json(to_json(g)) != g");
  require(ir::to_json(back) == json, "to_json is not a fixed point");
  check_rows(*graph);
  return 0;
}
