#pragma once
// User-supplied orders: a schedule written by hand, in the IR's text form or PyTorch's CSV
// (compute-only, as PyTorch's _load_csv(format="compute_only") takes them).

#include "metron/ir/action_rows.h"
#include "metron/pipeline/registry.h"
#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline {

/// A user's order with the spec it implies.
struct UserOrder {
  Order order;
  ScheduleSpec spec;    ///< name "user", pp = rows, vp = stages / pp, m = highest microbatch + 1
  Placement placement;  ///< kV when every rank r holds stages r and 2p−1−r, else kLoop
};

/// Drops idle slots, checks that only compute actions appear (comms are added by lowering),
/// infers the spec, and validates the order (validate_order). Throws InvalidConfig.
/// @code
///   UserOrder u = user_order(ir::parse_csv(read_file("zb1p.csv"), "zb1p.csv"));
/// @endcode
UserOrder user_order(const ir::ActionRows& rows);

}  // namespace metron::pipeline
