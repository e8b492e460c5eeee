#include "metron/models/cost_kinds.h"

#include "spec_checks.h"

namespace metron::models {
namespace {

constexpr detail::EnumNames<ComputePhase, 5> kPhaseNames{{
    {ComputePhase::kForward, "forward"},
    {ComputePhase::kBackwardInput, "backward-input"},
    {ComputePhase::kBackwardWeight, "backward-weight"},
    {ComputePhase::kBackward, "backward"},
    {ComputePhase::kRecompute, "recompute"},
}};

constexpr detail::EnumNames<CommOp, 6> kCommOpNames{{
    {CommOp::kAllReduce, "all-reduce"},
    {CommOp::kReduceScatter, "reduce-scatter"},
    {CommOp::kAllGather, "all-gather"},
    {CommOp::kReduce, "reduce"},
    {CommOp::kBroadcast, "broadcast"},
    {CommOp::kAllToAll, "all-to-all"},
}};

}  // namespace

std::string_view to_string(ComputePhase phase) noexcept {
  return detail::name_of(kPhaseNames, phase);
}

std::optional<ComputePhase> parse_compute_phase(std::string_view name) noexcept {
  return detail::parse_name(kPhaseNames, name);
}

std::string_view to_string(CommOp op) noexcept { return detail::name_of(kCommOpNames, op); }

std::optional<CommOp> parse_comm_op(std::string_view name) noexcept {
  return detail::parse_name(kCommOpNames, name);
}

}  // namespace metron::models
