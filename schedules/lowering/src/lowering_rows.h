#pragma once
// Helpers the row-level lowering passes share (split_backward, add_p2p_async, add_p2p_batched,
// add_optimizer_step): which rank computes each stage, and small action constructors.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/action.h"
#include "metron/pipeline/schedule_spec.h"

namespace metron::lowering::detail {

using Row = std::vector<std::optional<ir::Action>>;

inline ir::Action make_action(ir::ActionType type, std::int32_t stage, std::int32_t mb) {
  return ir::Action{.type = type, .stage = stage, .microbatch = mb};
}

inline bool is_backward(ir::ActionType type) {
  return type == ir::ActionType::kBackwardInput || type == ir::ActionType::kBackward;
}

/// Calls f on each compute action `a` stands for: itself, or both halves of an OVERLAP_F_B.
template <class F>
void for_each_compute(const ir::Action& a, F f) {
  using ir::ActionType;
  if (a.type == ActionType::kOverlapForwardBackward) {
    for (const ir::Action& half : a.sub) f(half);
  } else if (a.type == ActionType::kForward || a.type == ActionType::kBackwardInput ||
             a.type == ActionType::kBackwardWeight || a.type == ActionType::kBackward ||
             a.type == ActionType::kRecompute) {
    f(a);
  }
}

/// Which rank computes each stage, from where the stages' compute actions appear; stages are
/// 0..size()-1. Throws InvalidConfig (prefixed with `pass`) when a stage is computed on two
/// ranks or on none.
inline std::vector<std::int32_t> stage_ranks(const pipeline::Order& order,
                                             const std::string& pass) {
  std::map<std::int32_t, std::int32_t> owner;
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    for (const auto& slot : order.rows[r]) {
      if (!slot) continue;
      for_each_compute(*slot, [&](const ir::Action& c) {
        if (c.stage < 0) return;
        auto [it, added] = owner.emplace(c.stage, static_cast<std::int32_t>(r));
        if (!added && it->second != static_cast<std::int32_t>(r)) {
          throw InvalidConfig(pass + ": stage " + std::to_string(c.stage) +
                              " is computed on ranks " + std::to_string(it->second) + " and " +
                              std::to_string(r) + "; expected each stage on exactly one rank");
        }
      });
    }
  }
  std::vector<std::int32_t> ranks(
      owner.empty() ? 0 : static_cast<std::size_t>(owner.rbegin()->first) + 1, -1);
  for (const auto& [stage, rank] : owner) ranks[static_cast<std::size_t>(stage)] = rank;
  for (std::size_t s = 0; s < ranks.size(); ++s) {
    if (ranks[s] < 0) {
      throw InvalidConfig(pass + ": stage " + std::to_string(s) +
                          " is computed on no rank; expected every stage 0.." +
                          std::to_string(ranks.size() - 1) + " on one rank");
    }
  }
  return ranks;
}

/// add_p2p_batched for several stages per rank in loop placement (p2p_batched_interleaved.cc,
/// Note [batched interleaved exchanges]); the order's num_stages stages split evenly over its rows.
pipeline::Order add_p2p_batched_interleaved(const pipeline::Order& order, std::int32_t num_stages);

}  // namespace metron::lowering::detail
