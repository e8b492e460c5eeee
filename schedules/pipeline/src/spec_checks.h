#pragma once
// Private: the checks and message prefix every generator shares, so that all schedules name
// themselves and their constraints the same way.

#include <cstdint>
#include <string>
#include <string_view>

#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline::detail {

/// `schedule "1f1b" (pp=4, vp=1, microbatches=8)`: the start of every generator's error.
std::string describe_spec(std::string_view name, const ScheduleSpec& spec);

/// Throws InvalidConfig unless pp, vp and microbatches are all at least 1.
void require_positive(std::string_view name, const ScheduleSpec& spec);

/// Throws InvalidConfig unless spec.vp == vp; `hint` (e.g. "; use looped-bfs for several chunks")
/// is appended to the message.
void require_chunks(std::string_view name, const ScheduleSpec& spec, std::int32_t vp,
                    std::string_view hint = "");

/// Interleaved 1F1B's group size N (default pp) after Megatron's rules: vp ≥ 2, pp ≤ N ≤
/// microbatches, microbatches mod N either 0 or ≥ pp. Throws InvalidConfig naming the nearest
/// valid sizes. Shared by the generator and check_spec (registry.h).
std::int32_t interleaved_group_size(const ScheduleSpec& spec);

}  // namespace metron::pipeline::detail
