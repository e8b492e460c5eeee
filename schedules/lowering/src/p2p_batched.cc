// add_p2p_batched: Megatron's blocking p2p exchanges of non-interleaved 1F1B (docs/SCHEDULES.md
// §1.3); interleaved 1F1B (loop placement) is lowered in p2p_batched_interleaved.cc.
//
// Note [batched p2p steps]: each rank's row is cut into compute actions and exchange *steps*. A
// step issues its SEND and RECV tokens together and then blocks the host on each of them
// (WAIT(<recv>) ..., then WAIT(<send>) ...) before the next compute, as Megatron's req.wait() does.
// For one stage s per rank (S stages):
//   - F(s,mb) needs RECV_F(s,mb) unless s = 0, and sends SEND_F(s,mb) unless s = S-1;
//   - I/B(s,mb) needs RECV_B(s,mb) unless s = S-1, and sends SEND_B(s,mb) unless s = 0; W neither.
//   - After a compute that sends, the step also receives the input of the next compute that
//     exchanges anything (W is skipped) when the two go in opposite directions: an F followed by a
//     B/I is send_forward_recv_backward, a B/I followed by an F is send_backward_recv_forward (the
//     steady phase). Otherwise the send is a step of its own (send_forward in warmup, send_backward
//     in cooldown) and the receive is a step of its own just before its compute (recv_forward /
//     recv_backward).
//   - Exception, as in Megatron: a stage whose warmup p-s-1 covers all its m forwards has no steady
//     phase, so its last send_forward and first recv_backward stay separate steps.
// Within a step the tokens follow Megatron's non-batched _p2p_ops order (even stages send_next,
// recv_prev, send_prev, recv_next; odd stages recv_prev, send_next, recv_next, send_prev). For
// our two-token steps both parities agree: send_forward_recv_backward sends first and
// send_backward_recv_forward receives first, so the two neighbours' first tokens meet each other.
// Megatron's default batch_isend_irecv is one NCCL group, whose order does not matter; our graph
// has no group (each transfer is its own rendezvous on a FIFO stream), and this order keeps it
// deadlock-free even for PP=2 and with one hardware queue.
//
// Several stages per rank: loop placement (Megatron interleaved 1F1B) follows Note [batched
// interleaved exchanges]; V placement and OVERLAP_F_B units (ZB-V, DualPipe) are rejected, and
// P2PMode::kAsync lowers them.

#include <algorithm>
#include <string>

#include "lowering_rows.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::Action;
using ir::ActionType;

struct Step {
  std::optional<Action> send;
  std::optional<Action> recv;
};

class RowExchanges {
 public:
  RowExchanges(const detail::Row& row, std::int32_t stage, std::int32_t num_stages)
      : stage_(stage), num_stages_(num_stages) {
    for (const auto& slot : row) {
      if (slot) compute_.push_back(*slot);
    }
    auto forwards = std::count_if(compute_.begin(), compute_.end(),
                                  [](const Action& a) { return a.type == ActionType::kForward; });
    has_steady_ = forwards > num_stages - stage - 1;
  }

  detail::Row run() {
    std::size_t received = compute_.size();  // index of the compute whose RECV is already out
    for (std::size_t k = 0; k < compute_.size(); ++k) {
      const Action& c = compute_[k];
      auto recv = recv_for(c);
      if (recv && received != k) add_step({.send = std::nullopt, .recv = recv});
      out_.emplace_back(c);
      auto send = send_for(c);
      if (!send) continue;
      std::size_t next = next_exchanging(k);
      std::optional<Action> next_recv;
      if (next < compute_.size() && pairs(c, compute_[next])) next_recv = recv_for(compute_[next]);
      if (next_recv) received = next;
      add_step({.send = send, .recv = next_recv});
    }
    return std::move(out_);
  }

 private:
  [[nodiscard]] std::optional<Action> recv_for(const Action& c) const {
    if (c.type == ActionType::kForward && stage_ > 0) {
      return detail::make_action(ActionType::kRecvForward, stage_, c.microbatch);
    }
    if (detail::is_backward(c.type) && stage_ < num_stages_ - 1) {
      return detail::make_action(ActionType::kRecvBackward, stage_, c.microbatch);
    }
    return std::nullopt;
  }

  [[nodiscard]] std::optional<Action> send_for(const Action& c) const {
    if (c.type == ActionType::kForward && stage_ < num_stages_ - 1) {
      return detail::make_action(ActionType::kSendForward, stage_, c.microbatch);
    }
    if (detail::is_backward(c.type) && stage_ > 0) {
      return detail::make_action(ActionType::kSendBackward, stage_, c.microbatch);
    }
    return std::nullopt;
  }

  // The next compute after k that sends or receives (W and the like are skipped: a steady step
  // I, W, F posts send_backward_recv_forward right after the I).
  [[nodiscard]] std::size_t next_exchanging(std::size_t k) const {
    for (std::size_t j = k + 1; j < compute_.size(); ++j) {
      if (recv_for(compute_[j]) || send_for(compute_[j])) return j;
    }
    return compute_.size();
  }

  [[nodiscard]] bool pairs(const Action& done, const Action& next) const {
    if (done.type == ActionType::kForward) return detail::is_backward(next.type) && has_steady_;
    return next.type == ActionType::kForward;
  }

  // Token order per Note [batched p2p steps]: a receive of activations goes first.
  void add_step(const Step& step) {
    bool recv_first = step.recv && step.recv->type == ActionType::kRecvForward;
    if (recv_first) out_.emplace_back(*step.recv);
    if (step.send) out_.emplace_back(*step.send);
    if (step.recv && !recv_first) out_.emplace_back(*step.recv);
    if (step.recv) out_.emplace_back(wait(*step.recv));
    if (step.send) out_.emplace_back(wait(*step.send));
  }

  static Action wait(const Action& a) { return Action{.type = ActionType::kHostWait, .sub = {a}}; }

  std::int32_t stage_;
  std::int32_t num_stages_;
  bool has_steady_ = true;
  std::vector<Action> compute_;
  detail::Row out_;
};

constexpr const char* kUseAsync =
    "; batched p2p supports one stage per rank (Megatron 1F1B) and loop placement (Megatron "
    "interleaved 1F1B); use async p2p (P2PMode::kAsync, --p2p async) for V and DualPipe orders";

// Throws for OVERLAP_F_B units; returns whether some rank computes several stages, after checking
// that they are then in loop placement (stage c·p + r on rank r, the same number on every rank).
bool is_interleaved(const pipeline::Order& order, const std::vector<std::int32_t>& stage_rank) {
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    for (const auto& slot : order.rows[r]) {
      if (!slot || slot->type != ActionType::kOverlapForwardBackward) continue;
      throw InvalidConfig("add_p2p_batched: rank " + std::to_string(r) +
                          " computes an OVERLAP_F_B unit \"" + ir::to_string(*slot) + "\"" +
                          kUseAsync);
    }
  }
  const auto p = static_cast<std::int32_t>(order.rows.size());
  const auto num_stages = static_cast<std::int32_t>(stage_rank.size());
  std::vector<std::int32_t> stages_on(order.rows.size(), 0);
  for (std::int32_t r : stage_rank) ++stages_on[static_cast<std::size_t>(r)];
  if (std::all_of(stages_on.begin(), stages_on.end(), [](std::int32_t n) { return n <= 1; })) {
    return false;
  }
  for (std::int32_t s = 0; s < num_stages; ++s) {
    const std::int32_t r = stage_rank[static_cast<std::size_t>(s)];
    if (r == s % p && num_stages % p == 0) continue;
    const std::string got =
        r == s % p ? std::to_string(num_stages) + " stages over " + std::to_string(p) + " ranks"
                   : "stage " + std::to_string(s) + " on rank " + std::to_string(r);
    throw InvalidConfig("add_p2p_batched: " + got + "; expected one stage per rank or stage c·" +
                        std::to_string(p) + " + r on rank r for every chunk c" + kUseAsync);
  }
  return true;
}

}  // namespace

pipeline::Order add_p2p_batched(const pipeline::Order& order) {
  std::vector<std::int32_t> stage_rank = detail::stage_ranks(order, "add_p2p_batched");
  auto num_stages = static_cast<std::int32_t>(stage_rank.size());
  if (is_interleaved(order, stage_rank)) {
    return detail::add_p2p_batched_interleaved(order, num_stages);
  }
  pipeline::Order out{.groups = order.groups, .rows = {}};
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    std::int32_t stage = -1;  // the rank's one stage, or -1 for a row without compute
    for (const auto& slot : order.rows[r]) {
      if (slot) detail::for_each_compute(*slot, [&](const Action& c) { stage = c.stage; });
    }
    if (stage < 0) {
      out.rows.emplace_back();
      continue;
    }
    out.rows.push_back(RowExchanges(order.rows[r], stage, num_stages).run());
  }
  return out;
}

}  // namespace metron::lowering
