// Fill-drain and single-rank schedules (docs/SCHEDULES.md §1.2, §2.2, §2.4), as per-rank compute
// orders with loop placement (stage c·p + r on rank r).

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

using Row = std::vector<std::optional<ir::Action>>;

ir::Action compute(ir::ActionType type, std::int32_t stage, std::int32_t microbatch) {
  return ir::Action{.type = type, .stage = stage, .microbatch = microbatch};
}

}  // namespace

Order no_pipelining(const ScheduleSpec& spec) {
  constexpr std::string_view kName = "none";
  detail::require_positive(kName, spec);
  if (spec.pp != 1) {
    throw InvalidConfig(fmt::format(
        "{}: needs pp=1 (every microbatch runs on one rank); got pp={}; use 1f1b or gpipe to "
        "pipeline over several ranks",
        detail::describe_spec(kName, spec), spec.pp));
  }
  detail::require_chunks(kName, spec, 1, "; use looped-bfs for several chunks");
  // forward_backward_no_pipelining: each microbatch's backward follows its forward directly.
  Row row;
  for (std::int32_t mb = 0; mb < spec.microbatches; ++mb) {
    row.emplace_back(compute(ir::ActionType::kForward, 0, mb));
    if (!spec.forward_only) row.emplace_back(compute(ir::ActionType::kBackward, 0, mb));
  }
  return Order{.groups = {}, .rows = {row}};
}

Order gpipe(const ScheduleSpec& spec) {
  constexpr std::string_view kName = "gpipe";
  detail::require_positive(kName, spec);
  detail::require_chunks(kName, spec, 1, "; use looped-bfs for several chunks");
  // ScheduleGPipe runs the backwards in the forwards' order 0..m-1, not reversed.
  Order order;
  for (std::int32_t r = 0; r < spec.pp; ++r) {
    Row& row = order.rows.emplace_back();
    for (std::int32_t mb = 0; mb < spec.microbatches; ++mb) {
      row.emplace_back(compute(ir::ActionType::kForward, r, mb));
    }
    if (spec.forward_only) continue;
    for (std::int32_t mb = 0; mb < spec.microbatches; ++mb) {
      row.emplace_back(compute(ir::ActionType::kBackward, r, mb));
    }
  }
  return order;
}

Order looped_bfs(const ScheduleSpec& spec) {
  detail::require_positive("looped-bfs", spec);
  // ScheduleLoopedBFS: local stages ascending, every microbatch forward; then local stages
  // descending with microbatches in reverse (m-1 down to 0), as upstream writes it.
  Order order;
  for (std::int32_t r = 0; r < spec.pp; ++r) {
    Row& row = order.rows.emplace_back();
    for (std::int32_t chunk = 0; chunk < spec.vp; ++chunk) {
      for (std::int32_t mb = 0; mb < spec.microbatches; ++mb) {
        row.emplace_back(compute(ir::ActionType::kForward, chunk * spec.pp + r, mb));
      }
    }
    if (spec.forward_only) continue;
    for (std::int32_t chunk = spec.vp - 1; chunk >= 0; --chunk) {
      for (std::int32_t mb = spec.microbatches - 1; mb >= 0; --mb) {
        row.emplace_back(compute(ir::ActionType::kBackward, chunk * spec.pp + r, mb));
      }
    }
  }
  return order;
}

}  // namespace metron::pipeline
