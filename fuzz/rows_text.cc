// Fuzzes the text form of schedules and graphs (ir::parse_rows, Note [rows text form]) and what
// accepted rows turn into: canonical text parses back to the same rows and prints identically;
// rows that convert to a graph come back from it unchanged when they have no idle slots
// (metron/ir/rows_graph.h), and the graph survives its JSON form (metron/ir/json_format.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/json_format.h"
#include "metron/ir/rows_graph.h"

namespace {

using metron::fuzz::accept;
using metron::fuzz::require;
namespace ir = metron::ir;

bool has_idle(const ir::ActionRows& rows) {
  return std::any_of(rows.rows.begin(), rows.rows.end(), [](const auto& row) {
    return std::any_of(row.begin(), row.end(), [](const auto& a) { return !a.has_value(); });
  });
}

void check_graph(const ir::ActionRows& rows) {
  const auto graph = accept([&] { return ir::rows_to_graph(rows); });
  if (!graph) return;
  if (!has_idle(rows)) {
    require(ir::graph_to_rows(*graph) == rows, "graph_to_rows(rows_to_graph(rows)) != rows");
  }
  // The text form takes names byte for byte, but JSON needs UTF-8: to_json rejects other names
  // with InvalidGraph on purpose (schedules/ir/src/json_format.cc), so no JSON round trip then.
  const auto json = accept([&] { return ir::to_json(*graph); });
  if (!json) return;
  require(ir::graph_from_json(*json) == *graph, "graph_from_json(to_json(g)) != g");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto rows = accept([&] { return ir::parse_rows(metron::fuzz::as_text(data, size)); });
  if (!rows) return 0;
  // From here on every call must succeed: its input came from a successful parse.
  const std::string text = ir::format_rows(*rows);
  const ir::ActionRows back = ir::parse_rows(text, "<canonical>");
  require(back == *rows, "parse_rows(format_rows(rows)) != rows");
  require(ir::format_rows(back) == text, "format_rows is not a fixed point");
  check_graph(*rows);
  return 0;
}
