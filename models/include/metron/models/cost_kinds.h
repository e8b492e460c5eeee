#pragma once
// The kinds of work the cost models price. metron::models stands below the IR (docs/STYLE.md,
// "Which way dependencies point": models links metron::base only), so it names the work itself; the
// names are the IR's (ir::Phase, ir::CollectiveOp), and the simulator maps one onto the other.

#include <optional>
#include <string_view>

namespace metron::models {

/// The phase a compute cost is for (Note [compute accounting] in compute_cost.h).
enum class ComputePhase {
  kForward,         ///< F
  kBackwardInput,   ///< I: activation gradients
  kBackwardWeight,  ///< W: weight gradients
  kBackward,        ///< B = I + W
  kRecompute,       ///< what the Recompute setting re-runs before a backward
};

/// "forward", "backward-input", "backward-weight", "backward", "recompute" (as ir::Phase).
std::string_view to_string(ComputePhase phase) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<ComputePhase> parse_compute_phase(std::string_view name) noexcept;

/// A collective operation, as NCCL and Gloo provide them.
enum class CommOp { kAllReduce, kReduceScatter, kAllGather, kReduce, kBroadcast, kAllToAll };

/// "all-reduce", "reduce-scatter", "all-gather", "reduce", "broadcast", "all-to-all" (as
/// ir::CollectiveOp).
std::string_view to_string(CommOp op) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<CommOp> parse_comm_op(std::string_view name) noexcept;

}  // namespace metron::models
