#pragma once
// Explicit per-stage times given by the user instead of a model: the `costs` object of a
// scenario. Note [costs JSON]:
//
//   {"F": [1.0, 1.1, 1.0, 1.2], "I": 1.0, "W": [0.8, 0.8, 0.9, 0.8], "B": null, "p2p": 0.6}
//
// Milliseconds; a list has one entry per stage, a single number applies to every stage. F is
// required; B defaults to I + W; I and W may be left out when B is given (schedules that split
// the backward then cannot use them); p2p defaults to 0.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/diagnostics.h"

namespace metron::models {

/// Per-stage compute times and one p2p time, in seconds.
struct StageCosts {
  std::vector<double> forward;          ///< F per stage
  std::vector<double> backward_input;   ///< I per stage; empty when not given
  std::vector<double> backward_weight;  ///< W per stage; empty when not given
  std::vector<double> backward;         ///< B per stage (given, or I + W)
  double p2p = 0;                       ///< one transfer between adjacent stages

  [[nodiscard]] std::size_t stages() const { return forward.size(); }
  /// I and W are both known.
  [[nodiscard]] bool splits_backward() const { return !backward_input.empty(); }

  friend bool operator==(const StageCosts&, const StageCosts&) = default;
};

/// Reads a costs object for `stages` stages (when known; otherwise the longest list decides and
/// every list must have that length). Malformed JSON throws ParseError at source:line:col; a
/// wrong type, a negative time, a list of the wrong length, F missing, or neither B nor I and W
/// throws ParseError naming the JSON path (`costs.W[2]: expected a number >= 0, got -1`), with
/// `path` prefixed ("costs" by default). B given together with I and W must equal I + W per
/// stage. Unknown keys (a typo such as "f") are counted in `diagnostics` as "unknown_key" when
/// given.
StageCosts stage_costs_from_json(std::string_view text, const std::string& source = "<json>",
                                 std::optional<std::int64_t> stages = std::nullopt,
                                 const std::string& path = "costs",
                                 Diagnostics* diagnostics = nullptr);

/// Canonical JSON, lists for every stage, milliseconds; stage_costs_from_json(to_json(c)) == c
/// up to the rounding of the unit conversion.
std::string to_json(const StageCosts& costs);

}  // namespace metron::models
