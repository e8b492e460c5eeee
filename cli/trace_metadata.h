#pragma once
// The metadata a simulated scenario's trace carries (otherData): what was simulated and how it was
// split. Shared by `simulate` and `plan --trace-top`, so both traces describe themselves alike.

#include <vector>

#include "metron/scenario/scenario.h"
#include "metron/traces/trace_events.h"

namespace metron::cli {

/// tool, source, model, hardware, schedule, tp, pp, dp, vp, cp, ep and microbatches.
std::vector<traces::Arg> trace_metadata(const scenario::Scenario& scenario);

}  // namespace metron::cli
