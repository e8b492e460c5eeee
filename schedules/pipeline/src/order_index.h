#pragma once
// Private: where each compute action of an order sits, keyed by (type, stage, microbatch), shared
// by validation and timing so both read an order the same way.

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline::detail {

/// Position of an action: rank and index in that rank's row (idle slots count, as in the text).
struct Slot {
  std::int32_t rank = -1;
  std::int32_t index = -1;
};

/// A single compute action: one of the two halves of an OVERLAP_F_B, or a plain action.
struct Part {
  ir::ActionType type;
  std::int32_t stage;
  std::int32_t microbatch;
};

/// The plain compute actions an action stands for (both halves of an overlap).
std::vector<Part> parts_of(const ir::Action& action);

using PartKey = std::tuple<ir::ActionType, std::int32_t, std::int32_t>;

/// Every compute part of an order by (type, stage, microbatch); duplicates are kept in order.
class OrderIndex {
 public:
  explicit OrderIndex(const Order& order);
  [[nodiscard]] const std::vector<Slot>& find(ir::ActionType type, std::int32_t stage,
                                              std::int32_t microbatch) const;
  [[nodiscard]] const std::map<PartKey, std::vector<Slot>>& all() const { return slots_; }

 private:
  std::map<PartKey, std::vector<Slot>> slots_;
};

}  // namespace metron::pipeline::detail
