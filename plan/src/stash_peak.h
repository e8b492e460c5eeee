#pragma once
// Private: the most activation-stash bytes a schedule holds per rank (Note [configuration
// estimate], estimate.h), in closed form for Megatron's schedules and by walking an order for
// the others.

#include <cstdint>
#include <optional>
#include <vector>

#include "metron/pipeline/registry.h"
#include "metron/pipeline/schedule_spec.h"

namespace metron::plan::detail {

/// One chunk's stashes for one microbatch (the lowering's activation_bytes, weight_grad_bytes and
/// p2p_bytes). The functions below take them per pipeline rank: every chunk of a rank holds the
/// same layers, and under an uneven split (Note [uneven stages]) ranks differ; under an accounted
/// split an edge rank's chunks differ by a layer, and the estimator passes its largest.
struct StashBytes {
  double activation = 0;
  double weight_grad = 0;
  double output = 0;
};

/// 1F1B and interleaved 1F1B in closed form; nullopt for the other schedules.
std::optional<std::vector<double>> closed_form_stash_peak(const pipeline::ScheduleSpec& spec,
                                                          const std::vector<StashBytes>& bytes);

/// Walks `order` rank by rank with the memory effects of schedules' memory_effects.cc.
std::vector<double> walked_stash_peak(const pipeline::Order& order, pipeline::Placement placement,
                                      std::int32_t pp, const std::vector<StashBytes>& bytes);

}  // namespace metron::plan::detail
