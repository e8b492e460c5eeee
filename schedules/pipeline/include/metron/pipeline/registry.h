#pragma once
// The schedules metron knows by name, and the one entry point that generates an order from a spec.

#include <cstdint>
#include <span>
#include <string_view>

#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline {

/// How stages sit on ranks.
enum class Placement : std::uint8_t {
  kLoop,           ///< stage c·p + r on rank r
  kV,              ///< stages r and 2p−1−r on rank r
  kBidirectional,  ///< DualPipe: rank r holds stage r of one direction and p−1−r of the other
};

/// A named schedule.
struct ScheduleInfo {
  std::string_view name;         ///< as given to --schedule
  std::string_view description;  ///< one line for --help and errors
  Placement placement;
  std::int32_t fixed_vp;         ///< chunks per rank the schedule requires, or 0 when any
  bool forward_only_meaningful;  ///< false: --forward-only is rejected
  Order (*generate)(const ScheduleSpec&);
};

/// Every schedule, in the order --help lists them.
std::span<const ScheduleInfo> all_schedules();

/// The schedule called `name`; throws InvalidConfig listing the known names otherwise.
const ScheduleInfo& find_schedule(std::string_view name);

/// Checks the spec's generic constraints (pp, vp, microbatches ≥ 1; the schedule's fixed vp;
/// forward-only), then generates. Throws InvalidConfig.
/// @code
///   Order o = generate_order({.name = "interleaved-1f1b", .pp = 4, .vp = 2, .microbatches = 8});
/// @endcode
Order generate_order(const ScheduleSpec& spec);

/// Throws what generate_order(spec) would, without building the order for the schedules whose
/// rules are known in closed form (1f1b, interleaved-1f1b: the planner checks thousands of
/// sizes); the others are generated and the order discarded.
void check_spec(const ScheduleSpec& spec);

}  // namespace metron::pipeline
