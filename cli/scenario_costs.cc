#include "scenario_costs.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/base/json_parse.h"
#include "metron/models/stage_costs.h"

namespace metron::cli {
namespace {

using Json = nlohmann::json;

/// Seconds to the milliseconds the schedules module's StageTimes keep.
std::vector<double> in_ms(const std::vector<double>& seconds) {
  std::vector<double> out;
  out.reserve(seconds.size());
  for (double s : seconds) out.push_back(s * 1e3);
  return out;
}

}  // namespace

pipeline::StageTimes read_scenario_costs(const std::string& path) {
  const std::string text = read_file(path);
  const Json root = parse_json_document<Json>(text, path);
  if (!root.is_object() || !root.contains("costs") || !root.at("costs").is_object()) {
    throw ParseError(path, 0, 0,
                     "expected an object with \"costs\": {\"F\": [...], \"I\": [...], "
                     "\"W\": [...], \"p2p\": x}");
  }
  // A typo must not be silently ignored: unknown keys of the costs object are errors here.
  Diagnostics diagnostics;
  const models::StageCosts costs = models::stage_costs_from_json(
      root.at("costs").dump(), path, std::nullopt, "costs", &diagnostics);
  if (diagnostics.count("unknown_key") > 0) {
    throw ParseError(path, 0, 0, diagnostics.messages().front());
  }
  return {.forward = in_ms(costs.forward),
          .backward_input = in_ms(costs.backward_input),
          .backward_weight = in_ms(costs.backward_weight),
          .p2p = costs.p2p * 1e3};
}

}  // namespace metron::cli
