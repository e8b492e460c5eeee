#include "order_index.h"

namespace metron::pipeline::detail {

std::vector<Part> parts_of(const ir::Action& action) {
  if (action.type == ir::ActionType::kOverlapForwardBackward) {
    std::vector<Part> out;
    for (const ir::Action& half : action.sub) {
      out.push_back({half.type, half.stage, half.microbatch});
    }
    return out;
  }
  return {{action.type, action.stage, action.microbatch}};
}

OrderIndex::OrderIndex(const Order& order) {
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    const auto& row = order.rows[r];
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (!row[k]) continue;
      for (const Part& p : parts_of(*row[k])) {
        slots_[{p.type, p.stage, p.microbatch}].push_back(
            {static_cast<std::int32_t>(r), static_cast<std::int32_t>(k)});
      }
    }
  }
}

const std::vector<Slot>& OrderIndex::find(ir::ActionType type, std::int32_t stage,
                                          std::int32_t microbatch) const {
  static const std::vector<Slot> kNone;
  const auto it = slots_.find({type, stage, microbatch});
  return it == slots_.end() ? kNone : it->second;
}

}  // namespace metron::pipeline::detail
