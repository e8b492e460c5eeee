#include "metron/pipeline/placement.h"

#include <fmt/format.h>

#include "metron/base/error.h"

namespace metron::pipeline {

std::vector<std::int32_t> stage_ranks(Placement placement, std::int32_t pp, std::int32_t stages) {
  if (pp < 1 || stages < 1 || stages % pp != 0) {
    throw InvalidConfig(fmt::format(
        "stage placement: {} stages over {} ranks; expected a positive multiple of the ranks",
        stages, pp));
  }
  std::vector<std::int32_t> ranks;
  for (std::int32_t s = 0; s < stages; ++s) {
    const std::int32_t block = s / pp;
    const std::int32_t offset = s % pp;
    // Odd blocks of a V (and DualPipe's second direction) run back from the last rank.
    const bool falling = placement != Placement::kLoop && block % 2 == 1;
    ranks.push_back(falling ? pp - 1 - offset : offset);
  }
  return ranks;
}

}  // namespace metron::pipeline
