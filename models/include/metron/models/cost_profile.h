#pragma once
// Measured costs that override the analytical models entry by entry: the format `metron profile`
// writes on real hardware. Note [profile JSON]:
//
//   {"hardware": "dgx-h100",
//    "compute_slowdown_during_comm": 0.12, "comm_slowdown_during_compute": 0.3,
//    "compute": [{"key": "gemm:2048x4608x12288", "dtype": "bf16", "time_ms": 0.21}],
//    "collectives": [{"op": "all-reduce", "ranks": 8, "nodes": 1, "bytes": 33554432,
//                     "time_ms": 0.19}],
//    "p2p": [{"bytes": 25165824, "same_node": false, "time_ms": 0.55}]}
//
// `compute` keys are OpCost::profile_key(); collectives use ir's op names and nccl-tests' byte
// convention (comm_cost.h). Every list, "hardware" and the two slow-downs are optional; an entry's
// fields are all required. Times are milliseconds in the file (as in scenarios) and seconds in
// memory. An entry matches only exactly (same key and dtype; same op, ranks, nodes and bytes; same
// bytes and same_node): a profile never interpolates, so what it does not list stays analytical.
// "compute_slowdown_during_comm" (a number in [0, 10], measured as the median time of a compute
// operation while collectives run on other threads and ranks over its median time alone, minus 1)
// replaces the hardware's compute_slowdown_during_comm in the simulation (step_builder.h); absent,
// the hardware's value stays. "comm_slowdown_during_compute" (same range: a collective's median
// time while every member rank computes, over its median time alone, minus 1) does the same for the
// hardware's comm_slowdown_during_compute. Each is written only when set.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "metron/base/diagnostics.h"
#include "metron/models/cost_kinds.h"
#include "metron/models/group_placement.h"
#include "metron/models/model_spec.h"

namespace metron::models {

class CostProfile {
 public:
  /// The hardware the profile was measured on (free text; empty when not given).
  std::string hardware;
  /// The measured compute slow-down while communication runs, in [0, kMaxComputeSlowdown];
  /// nullopt leaves the hardware's (Note [profile JSON]).
  std::optional<double> compute_slowdown_during_comm;
  /// The measured communication slow-down while compute runs, in the same range; nullopt leaves
  /// the hardware's.
  std::optional<double> comm_slowdown_during_compute;

  /// The largest slow-down a profile may give: compute 11 times as slow is a typo or a broken
  /// measurement, not an interference.
  static constexpr double kMaxComputeSlowdown = 10;

  void set_compute(std::string key, Precision dtype, double seconds);
  void set_collective(CommOp op, GroupPlacement group, std::int64_t bytes, double seconds);
  void set_p2p(std::int64_t bytes, bool same_node, double seconds);

  [[nodiscard]] std::optional<double> compute(std::string_view key, Precision dtype) const;
  [[nodiscard]] std::optional<double> collective(CommOp op, GroupPlacement group,
                                                 std::int64_t bytes) const;
  [[nodiscard]] std::optional<double> p2p(std::int64_t bytes, bool same_node) const;

  [[nodiscard]] std::size_t size() const;  ///< entries of all three kinds

  friend bool operator==(const CostProfile&, const CostProfile&) = default;
  /// Writes every entry, so it reads the maps directly (declared again below).
  friend std::string to_json(const CostProfile& profile);

 private:
  std::map<std::pair<std::string, Precision>, double, std::less<>> compute_;
  std::map<std::tuple<CommOp, std::int64_t, std::int64_t, std::int64_t>, double>
      collectives_;  // (op, ranks, nodes, bytes)
  std::map<std::pair<std::int64_t, bool>, double> p2p_;
};

/// Canonical JSON (Note [profile JSON]): entries sorted by key, one entry per line.
/// cost_profile_from_json(to_json(p)) == p for every profile read from JSON. A time set in
/// seconds that no millisecond double divides back to exactly (about 2% of doubles) comes back
/// within one rounding. Throws InvalidConfig for a negative or non-finite time, or a slow-down
/// outside [0, 10].
std::string to_json(const CostProfile& profile);

/// Reads a profile. Malformed JSON throws ParseError at source:line:col; a wrong type, an unknown
/// op or dtype, a negative time or a duplicate entry throws ParseError naming the JSON path
/// (`compute[3].time_ms: expected a number >= 0, got -1`), as does a slow-down outside [0, 10]
/// (`compute_slowdown_during_comm: expected a number between 0 and 10, got 12`). Unknown keys are
/// counted in `diagnostics` as "unknown_key" when given.
CostProfile cost_profile_from_json(std::string_view text, const std::string& source = "<json>",
                                   Diagnostics* diagnostics = nullptr);

}  // namespace metron::models
