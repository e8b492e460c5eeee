#pragma once
// Reads the `costs` of a scenario file (the format `metron simulate` will take, issue 5):
//   {"costs": {"F": [...], "I": [...], "W": [...], "p2p": x}}   per-stage milliseconds

#include <string>

#include "metron/pipeline/schedule_spec.h"

namespace metron::cli {

/// The per-stage times of a scenario. Throws ParseError naming the file and the JSON path.
pipeline::StageTimes read_scenario_costs(const std::string& path);

}  // namespace metron::cli
