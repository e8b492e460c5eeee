#pragma once
// The conventions rows_to_graph and graph_to_rows share (Note [rows to graph] in rows_graph.h):
// which stage a p2p action's peer owns, which stage sends, and the tag both sides compute. Kept in
// one place so the two directions cannot drift apart.

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "metron/ir/action.h"
#include "metron/ir/rows_graph.h"
#include "metron/ir/task.h"

namespace metron::ir::detail {

struct P2PConvention {
  ActionType type;
  bool is_send;
  P2PKind what;
  std::int32_t peer_offset;    ///< the peer owns stage + peer_offset
  std::int32_t sender_offset;  ///< the sending stage is stage + sender_offset
};

inline constexpr std::array<P2PConvention, 4> kP2PConventions{{
    {ActionType::kSendForward, true, P2PKind::kActivation, +1, 0},
    {ActionType::kRecvForward, false, P2PKind::kActivation, -1, -1},
    {ActionType::kSendBackward, true, P2PKind::kGradient, -1, 0},
    {ActionType::kRecvBackward, false, P2PKind::kGradient, +1, +1},
}};

inline const P2PConvention* find_p2p(ActionType type) {
  for (const auto& c : kP2PConventions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

inline const P2PConvention* find_p2p(bool is_send, P2PKind what) {
  for (const auto& c : kP2PConventions) {
    if (c.is_send == is_send && c.what == what) return &c;
  }
  return nullptr;
}

/// stage -> the ranks that compute it, ascending.
using StageOwners = std::map<std::int32_t, std::vector<std::int32_t>>;

inline void add_owner(StageOwners& owners, std::int32_t stage, std::int32_t rank) {
  if (stage < 0) return;
  auto& ranks = owners[stage];
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  if (it == ranks.end() || *it != rank) ranks.insert(it, rank);
}

/// The one owner of `stage`, or nullopt when it has none or several.
/// stage + offset, or -1 (no stage) when that leaves int32: stage numbers come from the user's
/// text, where a stage near 2^31 - 1 is legal and simply has no neighbour above it.
inline std::int32_t neighbour_stage(std::int32_t stage, std::int32_t offset) {
  const std::int64_t neighbour = std::int64_t{stage} + offset;
  return neighbour < 0 || neighbour > std::numeric_limits<std::int32_t>::max()
             ? -1
             : static_cast<std::int32_t>(neighbour);
}

inline std::optional<std::int32_t> sole_owner(const StageOwners& owners, std::int32_t stage) {
  auto it = owners.find(stage);
  if (it == owners.end() || it->second.size() != 1) return std::nullopt;
  return it->second.front();
}

}  // namespace metron::ir::detail
