#pragma once
// Reading and writing graphs in the three forms the command line accepts: the JSON form, the
// per-rank text form and PyTorch's CSV form.

#include <optional>
#include <string>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/ir/graph.h"

namespace metron::cli {

enum class GraphFormat { kJson, kText, kCsv };

/// The names accepted by --from / --to, in GraphFormat order.
inline const std::vector<std::string> kGraphFormatNames{"json", "text", "csv"};

/// The format named by `flag` (json, text, csv) or, when absent, by the file name: `.json` is
/// JSON, `.csv` is CSV, anything else is text. Throws InvalidConfig for an unknown name.
GraphFormat graph_format(const std::string& path, const std::optional<std::string>& flag);

/// Reads and validates a graph ("-" reads standard input; with no --from, input starting with
/// '{' is JSON). Throws ParseError, InvalidGraph or InvalidConfig.
ir::Graph load_graph(const std::string& path, const std::optional<std::string>& from,
                     Diagnostics& diagnostics);

/// The graph in the given form.
std::string render_graph(const ir::Graph& graph, GraphFormat format);

}  // namespace metron::cli
