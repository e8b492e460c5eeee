#include "scenario_costs.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"

namespace metron::cli {
namespace {

using Json = nlohmann::json;

std::vector<double> stage_list(const Json& costs, const char* key, const std::string& path) {
  if (!costs.contains(key)) return {};
  const Json& list = costs.at(key);
  if (!list.is_array()) {
    throw ParseError(path, 0, 0, std::string("costs.") + key + ": expected an array of numbers");
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number()) {
      throw ParseError(path, 0, 0,
                       std::string("costs.") + key + "[" + std::to_string(i) +
                           "]: expected a number, got " + list[i].dump());
    }
    out.push_back(list[i].get<double>());
  }
  return out;
}

}  // namespace

schedules::StageTimes read_scenario_costs(const std::string& path) {
  const std::string text = read_file(path);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw ParseError(path, 0, 0, std::string("malformed JSON: ") + e.what());
  }
  if (!root.is_object() || !root.contains("costs") || !root.at("costs").is_object()) {
    throw ParseError(path, 0, 0,
                     "expected an object with \"costs\": {\"F\": [...], \"I\": [...], "
                     "\"W\": [...], \"p2p\": x}");
  }
  const Json& costs = root.at("costs");
  schedules::StageTimes times{.forward = stage_list(costs, "F", path),
                              .backward_input = stage_list(costs, "I", path),
                              .backward_weight = stage_list(costs, "W", path)};
  if (costs.contains("p2p")) {
    if (!costs.at("p2p").is_number()) throw ParseError(path, 0, 0, "costs.p2p: expected a number");
    times.p2p = costs.at("p2p").get<double>();
  }
  return times;
}

}  // namespace metron::cli
