// add_p2p_async: PyTorch's _add_send_recv (docs/SCHEDULES.md §2.5 step 4), action for action.
//
// Note [ASAP send/recv insertion]: a global round-robin over the ranks in ascending order. In one
// sweep each rank looks at the head of its compute row and, when it is ready, emits it:
//   - F(s,mb), s > 0, is ready when RECV_F(s,mb) or F(s-1,mb) is in *this rank's* emitted set;
//   - I/B(s,mb), s < S-1, when RECV_B(s,mb), I(s+1,mb) or B(s+1,mb) is;
//   - anything else (W, stage 0 F, stage S-1 I/B, other actions) is always ready;
//   - an idle slot is ready and popped without emitting anything (it still uses up the rank's
//     turn in that sweep, as a None does upstream; the output has no idle slots).
// After an F whose consumer stage s+1 is on another rank, SEND_F(s,mb) follows it on this rank and
// RECV_F(s+1,mb) is appended to the consumer's row at once (ASAP); likewise SEND_B(s,mb) after an
// I/B whose stage s-1 is elsewhere, with RECV_B(s-1,mb) on that rank. Neighbouring stages on one
// rank (V placement) exchange nothing: the runtime hands the tensor over locally.
// A sweep without progress means the order cannot run: InvalidConfig naming every rank's head.
//
// OVERLAP_F_B (DualPipeV; newer than the upstream pass we follow) is ready when both halves are,
// counts as both halves in the emitted set, and is followed by the sends of both halves.
// Extension for DualPipe, whose two directions use disjoint microbatches per stage (stages
// 0..p-1 carry the first half, p..2p-1 the second): a neighbour stage counts only for the
// microbatches it runs (has an F for), so stage p's F of a second-half microbatch needs no input
// and stage p-1 sends it no gradient. For every other schedule each stage runs every microbatch
// and this is exactly PyTorch's rule.
//
// Every SEND and its RECV are emitted at the same moment of one global sequence, and each action
// follows what it depends on in that sequence, so per-rank FIFO send and receive streams can always
// drain in sequence order: the result cannot deadlock under Note [ordering rules].

#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "lowering_rows.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::Action;
using ir::ActionType;
using Key = std::tuple<ActionType, std::int32_t, std::int32_t>;

Key key_of(const Action& a) { return Key{a.type, a.stage, a.microbatch}; }

class SendRecvInserter {
 public:
  explicit SendRecvInserter(const pipeline::Order& order)
      : order_(order),
        stage_rank_(detail::stage_ranks(order, "add_p2p_async")),
        out_{.groups = order.groups, .rows = std::vector<detail::Row>(order.rows.size())},
        emitted_(order.rows.size()),
        next_(order.rows.size(), 0) {
    for (const auto& row : order.rows) {
      for (const auto& slot : row) {
        if (!slot) continue;
        detail::for_each_compute(*slot, [&](const Action& c) {
          if (c.type == ActionType::kForward) runs_.emplace(c.stage, c.microbatch);
        });
      }
    }
  }

  pipeline::Order run() {
    while (!finished()) {
      bool progress = false;
      for (std::size_t r = 0; r < order_.rows.size(); ++r) progress |= try_head(r);
      if (!progress) throw InvalidConfig(stuck_message());
    }
    return std::move(out_);
  }

 private:
  [[nodiscard]] std::int32_t num_stages() const {
    return static_cast<std::int32_t>(stage_rank_.size());
  }

  [[nodiscard]] bool finished() const {
    for (std::size_t r = 0; r < order_.rows.size(); ++r) {
      if (next_[r] < order_.rows[r].size()) return false;
    }
    return true;
  }

  bool try_head(std::size_t r) {
    if (next_[r] >= order_.rows[r].size()) return false;
    const auto& slot = order_.rows[r][next_[r]];
    if (slot && !ready(*slot, r)) return false;
    if (slot) emit(*slot, r);
    ++next_[r];
    return true;
  }

  // Stage s exists and runs microbatch mb: the neighbour an action exchanges with.
  [[nodiscard]] bool runs(std::int32_t s, std::int32_t mb) const {
    return s >= 0 && s < num_stages() && runs_.contains({s, mb});
  }

  [[nodiscard]] bool seen(std::size_t r, ActionType type, std::int32_t s, std::int32_t mb) const {
    return emitted_[r].contains(Key{type, s, mb});
  }

  [[nodiscard]] bool compute_ready(const Action& c, std::size_t r) const {
    std::int32_t s = c.stage;
    std::int32_t mb = c.microbatch;
    if (c.type == ActionType::kForward && runs(s - 1, mb)) {
      return seen(r, ActionType::kRecvForward, s, mb) || seen(r, ActionType::kForward, s - 1, mb);
    }
    if (detail::is_backward(c.type) && runs(s + 1, mb)) {
      return seen(r, ActionType::kRecvBackward, s, mb) ||
             seen(r, ActionType::kBackwardInput, s + 1, mb) ||
             seen(r, ActionType::kBackward, s + 1, mb);
    }
    return true;
  }

  [[nodiscard]] bool ready(const Action& a, std::size_t r) const {
    bool ok = true;
    detail::for_each_compute(a, [&](const Action& c) { ok = ok && compute_ready(c, r); });
    return ok;
  }

  void append(std::size_t r, const Action& a) {
    out_.rows[r].emplace_back(a);
    emitted_[r].insert(key_of(a));
  }

  void emit(const Action& a, std::size_t r) {
    append(r, a);
    detail::for_each_compute(a, [&](const Action& c) { emitted_[r].insert(key_of(c)); });
    detail::for_each_compute(a, [&](const Action& c) { emit_comms(c, r); });
  }

  void emit_comms(const Action& c, std::size_t r) {
    std::int32_t s = c.stage;
    if (c.type == ActionType::kForward && runs(s + 1, c.microbatch)) {
      send(r, s + 1, detail::make_action(ActionType::kSendForward, s, c.microbatch),
           detail::make_action(ActionType::kRecvForward, s + 1, c.microbatch));
    } else if (detail::is_backward(c.type) && runs(s - 1, c.microbatch)) {
      send(r, s - 1, detail::make_action(ActionType::kSendBackward, s, c.microbatch),
           detail::make_action(ActionType::kRecvBackward, s - 1, c.microbatch));
    }
  }

  void send(std::size_t r, std::int32_t consumer, const Action& send, const Action& recv) {
    auto peer = static_cast<std::size_t>(stage_rank_[static_cast<std::size_t>(consumer)]);
    if (peer == r) return;  // V placement: handed over locally
    append(r, send);
    append(peer, recv);
  }

  [[nodiscard]] std::string stuck_message() const {
    std::string msg = "add_p2p_async: no rank can make progress; the order cannot run:";
    for (std::size_t r = 0; r < order_.rows.size(); ++r) {
      if (next_[r] >= order_.rows[r].size()) continue;
      msg += "\n  rank " + std::to_string(r) + " waits at action " + std::to_string(next_[r]) +
             " \"" + ir::to_string(*order_.rows[r][next_[r]]) +
             "\" for its input (the producing F or I/B, or its RECV)";
    }
    return msg;
  }

  const pipeline::Order& order_;
  std::vector<std::int32_t> stage_rank_;
  pipeline::Order out_;
  std::vector<std::set<Key>> emitted_;                    // per rank, PyTorch's prev_actions
  std::vector<std::size_t> next_;                         // per rank, the head of its compute row
  std::set<std::pair<std::int32_t, std::int32_t>> runs_;  // (stage, mb) with an F
};

}  // namespace

pipeline::Order add_p2p_async(const pipeline::Order& order) {
  return SendRecvInserter(order).run();
}

}  // namespace metron::lowering
