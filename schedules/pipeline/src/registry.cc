#include "metron/pipeline/registry.h"

#include <fmt/format.h>

#include <array>
#include <string>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

constexpr std::array<ScheduleInfo, 12> kSchedules{{
    {"none", "no pipelining: gradient accumulation over m microbatches on one rank",
     Placement::kLoop, 1, true, &no_pipelining},
    {"gpipe", "GPipe: all forwards, then all backwards", Placement::kLoop, 1, true, &gpipe},
    {"1f1b", "Megatron 1F1B (PipeDream-Flush): warm-up p-r-1, then one forward one backward",
     Placement::kLoop, 1, true, &one_f_one_b},
    {"interleaved-1f1b",
     "Megatron interleaved 1F1B, v chunks per rank, group size N (--group-size)", Placement::kLoop,
     0, true, &interleaved_one_f_one_b},
    {"interleaved-1f1b-legacy",
     "interleaved 1F1B of Megatron releases before Nov 2024 (m % p == 0, N = p)", Placement::kLoop,
     0, true, &interleaved_one_f_one_b_legacy},
    {"looped-bfs", "Looped BFS: each local stage runs every microbatch before the next",
     Placement::kLoop, 0, true, &looped_bfs},
    {"zb-h1", "Zero Bubble H1: 1F1B with B split into I and W, W delayed by the warm-up",
     Placement::kLoop, 1, true, &zb_h1},
    {"zb-h2", "Zero Bubble H2: more warm-up forwards, W reordered at the tail", Placement::kLoop, 1,
     true, &zb_h2},
    {"zb-v", "Zero Bubble V: two chunks per rank in V placement", Placement::kV, 2, true, &zb_v},
    {"zb-auto", "Zero Bubble automatic scheduler under a memory limit (--memory-limit K)",
     Placement::kLoop, 1, true, &zb_auto},
    {"dualpipe", "DeepSeek DualPipe: two directions, overlapped forward-backward pairs",
     Placement::kBidirectional, 2, false, &dualpipe},
    {"dualpipe-v", "DeepSeek DualPipeV: DualPipe cut in half, V placement", Placement::kV, 2, false,
     &dualpipe_v},
}};

std::string known_names() {
  std::string out;
  for (const auto& s : kSchedules) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

}  // namespace

std::span<const ScheduleInfo> all_schedules() { return kSchedules; }

const ScheduleInfo& find_schedule(std::string_view name) {
  for (const auto& s : kSchedules) {
    if (s.name == name) return s;
  }
  throw InvalidConfig(
      fmt::format("unknown schedule \"{}\"; expected one of {}", name, known_names()));
}

namespace {

/// generate_order's checks common to every schedule; returns the schedule.
const ScheduleInfo& check_common(const ScheduleSpec& spec) {
  const ScheduleInfo& info = find_schedule(spec.name);
  const std::string where = detail::describe_spec(spec.name, spec);
  detail::require_positive(spec.name, spec);
  if (info.fixed_vp != 0) detail::require_chunks(spec.name, spec, info.fixed_vp);
  if (spec.forward_only && !info.forward_only_meaningful) {
    throw InvalidConfig(where +
                        ": has no forward-only form (its forwards and backwards are "
                        "scheduled as overlapped pairs); use 1f1b or gpipe for inference");
  }
  return info;
}

}  // namespace

Order generate_order(const ScheduleSpec& spec) { return check_common(spec).generate(spec); }

void check_spec(const ScheduleSpec& spec) {
  const ScheduleInfo& info = check_common(spec);
  if (spec.name == "1f1b") {
    if (spec.vp != 1) (void)info.generate(spec);  // throws with 1f1b's own message
    return;
  }
  if (spec.name == "interleaved-1f1b") {
    (void)detail::interleaved_group_size(spec);
    return;
  }
  (void)info.generate(spec);
}

}  // namespace metron::pipeline
