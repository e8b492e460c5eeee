#pragma once
// The `grid` view of an order: a step-by-rank table a person can read.

#include <string>

#include "metron/pipeline/schedule_spec.h"

namespace metron::cli {

/// Times the order with PyTorch's visualiser widths (F = I = W = 1, B = 2, OVERLAP_F_B = 3, no
/// p2p time) and draws one line per time step, one column per rank: an action's token on the
/// step it starts, `|` while it continues, `.` when the rank is idle.
std::string render_grid(const pipeline::Order& order);

}  // namespace metron::cli
