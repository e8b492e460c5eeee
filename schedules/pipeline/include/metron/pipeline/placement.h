#pragma once
// Stage -> rank placement (docs/SCHEDULES.md §2.3): where each global stage of a schedule lives.

#include <cstdint>
#include <vector>

#include "metron/pipeline/registry.h"

namespace metron::pipeline {

/// rank of each of `stages` global stages over `pp` ranks:
///  - loop: stage s on rank s mod p (interleaved 1F1B, looped BFS);
///  - V: the rank rises through the first block of p stages, stays at the boundary and falls
///    through the next block, and so on — (p=2, 4 stages) 0 1 1 0; (p=4, 12 stages)
///    0 1 2 3 3 2 1 0 0 1 2 3 (ZB-V, DualPipeV);
///  - bidirectional (DualPipe): as V with 2p stages — direction a's stage k on rank k, direction
///    b's stage p + k on rank p − 1 − k.
/// Throws InvalidConfig when pp < 1 or stages is not a positive multiple of pp.
std::vector<std::int32_t> stage_ranks(Placement placement, std::int32_t pp, std::int32_t stages);

}  // namespace metron::pipeline
