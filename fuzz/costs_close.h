#pragma once
// Equality of per-stage costs up to the rounding of the millisecond <-> second conversion, which
// is all that stage_costs_from_json(to_json(c)) promises (metron/models/stage_costs.h).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "metron/models/stage_costs.h"

namespace metron::fuzz {

/// a and b agree to a few units in the last place (or both lie below the normal range, where a
/// division by 1000 loses digits by design).
inline bool close(double a, double b) {
  if (a == b) return true;
  const double scale = std::max(std::fabs(a), std::fabs(b));
  return std::fabs(a - b) <= 1e-12 * scale || scale < 1e-290;
}

inline bool close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!close(a[i], b[i])) return false;
  }
  return true;
}

inline bool close(const models::StageCosts& a, const models::StageCosts& b) {
  return close(a.forward, b.forward) && close(a.backward_input, b.backward_input) &&
         close(a.backward_weight, b.backward_weight) && close(a.backward, b.backward) &&
         close(a.p2p, b.p2p);
}

}  // namespace metron::fuzz
