// split_backward: every full backward B(s,mb) becomes I(s,mb) W(s,mb) in its place.
//
// OVERLAP_F_B units are left whole: DualPipe chooses which of its backwards to split (§2.4 step 6)
// and overlaps a forward with a *full* backward on purpose; splitting the half would change the
// schedule rather than lower it. Idle slots and every other action are kept as they are.

#include "lowering_rows.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {

pipeline::Order split_backward(const pipeline::Order& order) {
  pipeline::Order out{.groups = order.groups, .rows = {}};
  out.rows.reserve(order.rows.size());
  for (const auto& row : order.rows) {
    detail::Row& split = out.rows.emplace_back();
    for (const auto& slot : row) {
      if (!slot || slot->type != ir::ActionType::kBackward) {
        split.push_back(slot);
        continue;
      }
      split.emplace_back(
          detail::make_action(ir::ActionType::kBackwardInput, slot->stage, slot->microbatch));
      split.emplace_back(
          detail::make_action(ir::ActionType::kBackwardWeight, slot->stage, slot->microbatch));
    }
  }
  return out;
}

}  // namespace metron::lowering
