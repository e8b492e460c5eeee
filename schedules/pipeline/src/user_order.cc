#include "metron/pipeline/user_order.h"

#include <fmt/format.h>

#include <algorithm>

#include "metron/base/error.h"
#include "metron/pipeline/order_checks.h"
#include "order_index.h"

namespace metron::pipeline {
namespace {

bool is_compute(ir::ActionType t) {
  return t == ir::ActionType::kForward || t == ir::ActionType::kBackward ||
         t == ir::ActionType::kBackwardInput || t == ir::ActionType::kBackwardWeight ||
         t == ir::ActionType::kOverlapForwardBackward;
}

Order compute_only(const ir::ActionRows& rows) {
  if (!rows.groups.empty()) {
    throw InvalidConfig("user order: declares communication groups; expected compute actions only");
  }
  Order out;
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    auto& row = out.rows.emplace_back();
    for (std::size_t k = 0; k < rows.rows[r].size(); ++k) {
      const auto& slot = rows.rows[r][k];
      if (!slot) continue;  // idle slots are a picture, not an instruction
      if (!is_compute(slot->type)) {
        throw InvalidConfig(fmt::format(
            "user order: rank {} action {} \"{}\" is not a compute action; expected F, I, W, B or "
            "OVERLAP_F_B (sends and receives are added by --with-comms)",
            r, k, ir::to_string(*slot)));
      }
      row.push_back(slot);
    }
  }
  return out;
}

bool is_v_placement(const detail::OrderIndex& index, std::int32_t pp) {
  for (const auto& [key, slots] : index.all()) {
    const std::int32_t stage = std::get<1>(key);
    const std::int32_t expected = stage < pp ? stage : 2 * pp - 1 - stage;
    for (const auto& s : slots) {
      if (s.rank != expected) return false;
    }
  }
  return true;
}

}  // namespace

UserOrder user_order(const ir::ActionRows& rows) {
  UserOrder u{.order = compute_only(rows), .spec = {.name = "user"}, .placement = Placement::kLoop};
  const auto pp = static_cast<std::int32_t>(u.order.rows.size());
  if (pp == 0) throw InvalidConfig("user order: no ranks; expected one row per rank");
  const detail::OrderIndex index(u.order);
  std::int32_t stages = 0;
  bool any_backward = false;
  // Every stage and microbatch below the largest must have its actions, so an index beyond the
  // number of actions leaves a gap: refused here, before validate_order sizes tables by it.
  std::int64_t actions = 0;
  for (const auto& row : u.order.rows) actions += static_cast<std::int64_t>(row.size());
  for (const auto& [key, slots] : index.all()) {
    const auto [type, stage, mb] = key;
    if (stage < 0 || mb < 0 || stage >= actions || mb >= actions) {
      throw InvalidConfig(fmt::format(
          "user order: an action of stage {}, microbatch {} numbers its {} beyond the order's {} "
          "actions; expected stages and microbatches numbered from 0 without gaps",
          stage, mb, stage >= actions || stage < 0 ? "stage" : "microbatch", actions));
    }
    stages = std::max(stages, stage + 1);
    u.spec.microbatches = std::max(u.spec.microbatches, mb + 1);
    any_backward = any_backward || type != ir::ActionType::kForward;
  }
  if (stages % pp != 0) {
    throw InvalidConfig(fmt::format(
        "user order: {} stages over {} ranks; expected the same number of stages on every rank",
        stages, pp));
  }
  u.spec.pp = pp;
  u.spec.vp = std::max(1, stages / pp);
  u.spec.forward_only = !any_backward;
  if (u.spec.vp == 2 && is_v_placement(index, pp)) u.placement = Placement::kV;
  validate_order(u.order, u.spec, u.placement);
  return u;
}

}  // namespace metron::pipeline
