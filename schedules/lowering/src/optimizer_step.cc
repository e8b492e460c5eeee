// add_optimizer_step: one STEP at the end of every non-empty row, tagged with the rank's lowest
// stage (the text form has no way to name several stages; the step updates all of the rank's).

#include <algorithm>
#include <limits>

#include "lowering_rows.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {

pipeline::Order add_optimizer_step(pipeline::Order order) {
  for (auto& row : order.rows) {
    bool any =
        std::any_of(row.begin(), row.end(), [](const auto& slot) { return slot.has_value(); });
    if (!any) continue;
    std::int32_t lowest = std::numeric_limits<std::int32_t>::max();
    for (const auto& slot : row) {
      if (!slot) continue;
      detail::for_each_compute(*slot,
                               [&](const ir::Action& c) { lowest = std::min(lowest, c.stage); });
    }
    if (lowest == std::numeric_limits<std::int32_t>::max()) lowest = -1;  // no compute: plain STEP
    row.emplace_back(ir::Action{.type = ir::ActionType::kOptimizerStep, .stage = lowest});
  }
  return order;
}

}  // namespace metron::lowering
