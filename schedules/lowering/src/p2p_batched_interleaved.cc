// add_p2p_batched for several stages per rank in loop placement (stage c·p + r on rank r):
// Megatron's interleaved 1F1B without overlap_p2p_comm (docs/SCHEDULES.md §1.4).
//
// Note [batched interleaved exchanges]: a rank runs virtual steps k = 0..T-1 (T = m·v) as Note
// [megatron 1f1b shape] (megatron_schedules.cc) says, with warm-up w, and blocks in one exchange
// call per step that sends the step's outputs and receives the next step's inputs:
//   - before F(0): recv_forward;
//   - warm-up, after F(k): send_forward_recv_forward; the last one also receives B(0)'s gradient
//     (send_forward_backward_recv_forward_backward), or, when w = T, a recv_backward follows;
//   - steady, after F(w+k) and B(k): one call sends both outputs and receives both next inputs;
//   - cool-down, after B(k): send_backward_recv_backward.
// Nothing is received for a step past T-1. What arrives (§1.4, "Receive bookkeeping"): a rank
// that is not the direction's leading rank (rank 0 for forwards, p-1 for backwards) gets the
// input of its own step k+1. The leading rank gets what the ending rank sent p-1 steps before,
// at step j = k-(p-1): nothing when k < p-1 or when j ran the direction's last chunk, else the
// input of j's microbatch on the next chunk (+1 forward, -1 backward), which waits in that
// chunk's queue. That needs groups of at least p microbatches, as in Megatron; a receive that
// would come after its consumer is rejected.
// No deadlock: with warm-ups w_r = min(w_{r+1} + 2, T) (checked), rank r's i-th call meets rank
// r+1's (i-1)-th in both directions, and ranks p-1 and 0 meet across the wrap in the same round,
// so the calls form rounds (a rank that runs all warm-up, w = T, splits one round into its
// send_forward and its recv_backward, which delays the pairing but never reverses it). Each call
// issues its forward tokens, then its backward ones; within a direction it receives first, except
// on the direction's leading rank, which sends first. So with one hardware queue each direction's
// ring of transfers starts at the leading rank instead of waiting on itself, and with separate
// send and receive streams every forward pair meets at the head of both FIFOs, the backward pairs
// right after. The tests check every generated interleaved order up to p = 4 with find_deadlock.
// Megatron requires pp > 2 here (issue #750: its batched send_next and send_prev to the one peer
// of PP=2 cannot be told apart); our transfers carry (stage, microbatch, kind) tags, so p = 2
// works as well.

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "lowering_rows.h"

namespace metron::lowering::detail {
namespace {

using ir::Action;
using ir::ActionType;

constexpr const char* kOtherOrders =
    "; batched p2p lowers several stages per rank only for Megatron's interleaved 1F1B; use async "
    "p2p (P2PMode::kAsync, --p2p async) for other orders";

// Virtual step k's forward; its backward runs chunk v-1-chunk on the same microbatch.
struct VirtualStep {
  std::int32_t mb = 0;
  std::int32_t chunk = 0;
};

// What every rank shares: the table of rank 0's forwards.
struct Pipeline {
  std::int32_t p = 0;
  std::int32_t v = 0;
  std::vector<VirtualStep> table;
  bool backward = false;  // false for forward-only orders
  [[nodiscard]] std::int32_t steps() const { return static_cast<std::int32_t>(table.size()); }
  [[nodiscard]] const VirtualStep& at(std::int32_t k) const {
    return table[static_cast<std::size_t>(k)];
  }
  [[nodiscard]] std::int32_t back_chunk(std::int32_t k) const { return v - 1 - at(k).chunk; }
};

// One Megatron exchange call.
struct Call {
  std::optional<Action> send_f, recv_f, send_b, recv_b;
};

bool is_step(const Action& a) { return a.type == ActionType::kForward || is_backward(a.type); }

std::vector<Action> steps_of(const Row& row) {
  std::vector<Action> steps;
  for (const auto& slot : row) {
    if (slot && is_step(*slot)) steps.push_back(*slot);
  }
  return steps;
}

Pipeline pipeline_of(const pipeline::Order& order, std::int32_t num_stages) {
  Pipeline pl{.p = static_cast<std::int32_t>(order.rows.size()), .v = 0, .table = {}};
  pl.v = num_stages / pl.p;
  for (const Action& a : steps_of(order.rows.front())) {
    if (a.type == ActionType::kForward) pl.table.push_back({a.microbatch, a.stage / pl.p});
    pl.backward = pl.backward || is_backward(a.type);
  }
  return pl;
}

// Note [megatron 1f1b shape] for rank r with warm-up w (B stands for B or I).
std::vector<Action> expected_steps(const Pipeline& pl, std::int32_t r, std::int32_t w) {
  auto forward = [&](std::int32_t k) {
    return make_action(ActionType::kForward, pl.at(k).chunk * pl.p + r, pl.at(k).mb);
  };
  auto backward = [&](std::int32_t k) {
    return make_action(ActionType::kBackward, pl.back_chunk(k) * pl.p + r, pl.at(k).mb);
  };
  std::vector<Action> steps;
  const std::int32_t t = pl.steps();
  for (std::int32_t k = 0; k < w; ++k) steps.push_back(forward(k));
  if (!pl.backward) return steps;
  for (std::int32_t k = 0; k < t - w; ++k) {
    steps.push_back(forward(w + k));
    steps.push_back(backward(k));
  }
  for (std::int32_t k = t - w; k < t; ++k) steps.push_back(backward(k));
  return steps;
}

bool same_step(const Action& got, const Action& expected) {
  bool type = got.type == expected.type || (is_backward(got.type) && is_backward(expected.type));
  return type && got.stage == expected.stage && got.microbatch == expected.microbatch;
}

// Rank r's warm-up w, after checking that its steps follow rank 0's table. The steps give w
// (F^w, then F B), except that w = T-1 and w = T give the same steps F^T B^T; `expected` (from
// rank r+1) tells them apart: both run the same computes but not the same exchanges.
std::int32_t checked_warmup(const Pipeline& pl, const Row& row, std::size_t r,
                            std::optional<std::int32_t> expected) {
  const std::vector<Action> steps = steps_of(row);
  const auto leading_forwards =
      static_cast<std::int32_t>(std::find_if(steps.begin(), steps.end(),
                                             [](const Action& a) { return is_backward(a.type); }) -
                                steps.begin());
  std::int32_t w = std::max(leading_forwards - 1, 0);
  if (leading_forwards >= pl.steps()) w = expected == pl.steps() - 1 ? *expected : pl.steps();
  const std::vector<Action> want = expected_steps(pl, static_cast<std::int32_t>(r), w);
  for (std::size_t i = 0; i < std::max(steps.size(), want.size()); ++i) {
    if (i < steps.size() && i < want.size() && same_step(steps[i], want[i])) continue;
    auto text = [&](const std::vector<Action>& v) {
      return i < v.size() ? "\"" + ir::to_string(v[i]) + "\"" : std::string("the end of the row");
    };
    throw InvalidConfig("add_p2p_batched: rank " + std::to_string(r) + " step " +
                        std::to_string(i) + " is " + text(steps) + "; expected " + text(want) +
                        " (Megatron's interleaved 1F1B with rank 0's table of forwards and a " +
                        "warm-up of " + std::to_string(w) + ")" + kOtherOrders);
  }
  return w;
}

// Every rank's warm-up; Megatron's are w_r = min(w_{r+1} + 2, T).
std::vector<std::int32_t> checked_warmups(const pipeline::Order& order, const Pipeline& pl) {
  std::vector<std::int32_t> warmups(order.rows.size());
  for (std::size_t r = warmups.size(); r-- > 0;) {
    std::optional<std::int32_t> expected;
    if (r + 1 < warmups.size()) expected = std::min(warmups[r + 1] + 2, pl.steps());
    warmups[r] = checked_warmup(pl, order.rows[r], r, expected);
    if (!expected || warmups[r] == *expected) continue;
    throw InvalidConfig("add_p2p_batched: rank " + std::to_string(r) + " warms up with " +
                        std::to_string(warmups[r]) + " forwards; expected min(" +
                        std::to_string(warmups[r + 1]) + " + 2, " + std::to_string(pl.steps()) +
                        ") = " + std::to_string(*expected) + ", two more than rank " +
                        std::to_string(r + 1) + " (Megatron's interleaved 1F1B)" + kOtherOrders);
  }
  return warmups;
}

// Emits one rank's row per Note [batched interleaved exchanges].
class InterleavedRow {
 public:
  InterleavedRow(const Pipeline& pl, std::int32_t rank, std::int32_t warmup)
      : pl_(pl), rank_(rank), warmup_(warmup) {}

  Row run(const Row& row) {
    for (const Call& call : calls_after(-1)) add_call(call);
    std::int32_t step = 0;
    for (const auto& slot : row) {
      if (!slot) continue;
      if (is_step(*slot)) check_input(*slot, step);
      out_.emplace_back(*slot);
      if (!is_step(*slot)) continue;
      for (const Call& call : calls_after(step++)) add_call(call);
    }
    return std::move(out_);
  }

 private:
  [[nodiscard]] std::int32_t stage(std::int32_t chunk) const { return chunk * pl_.p + rank_; }
  [[nodiscard]] std::int32_t last_stage() const { return pl_.p * pl_.v - 1; }

  [[nodiscard]] std::optional<Action> send_forward(std::int32_t k) const {
    const std::int32_t s = stage(pl_.at(k).chunk);
    if (s == last_stage()) return std::nullopt;
    return make_action(ActionType::kSendForward, s, pl_.at(k).mb);
  }

  [[nodiscard]] std::optional<Action> send_backward(std::int32_t k) const {
    const std::int32_t s = stage(pl_.back_chunk(k));
    if (s == 0) return std::nullopt;
    return make_action(ActionType::kSendBackward, s, pl_.at(k).mb);
  }

  // Received in the call of step k (k = -1: before step 0), per the receive bookkeeping.
  [[nodiscard]] std::optional<Action> recv_forward(std::int32_t k) const {
    if (k + 1 >= pl_.steps()) return std::nullopt;
    if (rank_ > 0) {
      return make_action(ActionType::kRecvForward, stage(pl_.at(k + 1).chunk), pl_.at(k + 1).mb);
    }
    const std::int32_t j = k - (pl_.p - 1);
    if (j < 0 || pl_.at(j).chunk == pl_.v - 1) return std::nullopt;
    return make_action(ActionType::kRecvForward, (pl_.at(j).chunk + 1) * pl_.p, pl_.at(j).mb);
  }

  [[nodiscard]] std::optional<Action> recv_backward(std::int32_t k) const {
    if (k + 1 >= pl_.steps()) return std::nullopt;
    if (rank_ < pl_.p - 1) {
      return make_action(ActionType::kRecvBackward, stage(pl_.back_chunk(k + 1)), pl_.at(k + 1).mb);
    }
    const std::int32_t j = k - (pl_.p - 1);
    if (j < 0 || pl_.back_chunk(j) == 0) return std::nullopt;
    return make_action(ActionType::kRecvBackward, (pl_.back_chunk(j) - 1) * pl_.p + rank_,
                       pl_.at(j).mb);
  }

  // The calls after the rank's step-th F/B/I (-1: before the first).
  [[nodiscard]] std::vector<Call> calls_after(std::int32_t step) const {
    const std::int32_t t = pl_.steps();
    if (step < 0) return {{.recv_f = recv_forward(-1)}};
    if (step < warmup_) {
      Call call{.send_f = send_forward(step), .recv_f = recv_forward(step)};
      if (step != warmup_ - 1 || !pl_.backward) return {call};
      if (warmup_ == t) return {call, {.recv_b = recv_backward(-1)}};
      call.recv_b = recv_backward(-1);
      return {call};
    }
    if (step >= 2 * t - warmup_) {
      return {{.send_b = send_backward(step - t), .recv_b = recv_backward(step - t)}};
    }
    if ((step - warmup_) % 2 == 0) return {};  // a steady F: its call comes after the B
    const std::int32_t k = (step - warmup_) / 2;
    return {{.send_f = send_forward(warmup_ + k),
             .recv_f = recv_forward(warmup_ + k),
             .send_b = send_backward(k),
             .recv_b = recv_backward(k)}};
  }

  void add_call(const Call& call) {
    std::vector<Action> tokens;
    auto add = [&](const std::optional<Action>& first, const std::optional<Action>& second) {
      if (first) tokens.push_back(*first);
      if (second) tokens.push_back(*second);
    };
    // Forward then backward; the direction's leading rank sends first.
    if (rank_ == 0) add(call.send_f, call.recv_f);
    if (rank_ != 0) add(call.recv_f, call.send_f);
    if (rank_ == pl_.p - 1) add(call.send_b, call.recv_b);
    if (rank_ != pl_.p - 1) add(call.recv_b, call.send_b);
    for (const Action& a : tokens) out_.emplace_back(a);
    for (bool receives : {true, false}) {
      for (const Action& a : tokens) {
        bool is_recv = a.type == ActionType::kRecvForward || a.type == ActionType::kRecvBackward;
        if (is_recv != receives) continue;
        out_.emplace_back(Action{.type = ActionType::kHostWait, .sub = {a}});
        if (is_recv) received_.emplace(a.type, a.stage, a.microbatch);
      }
    }
  }

  // Loop placement with p >= 2: every neighbouring stage is on another rank.
  void check_input(const Action& c, std::int32_t step) const {
    bool forward = c.type == ActionType::kForward;
    if (forward ? c.stage == 0 : c.stage == last_stage()) return;
    Action input = make_action(forward ? ActionType::kRecvForward : ActionType::kRecvBackward,
                               c.stage, c.microbatch);
    if (received_.count({input.type, input.stage, input.microbatch}) > 0) return;
    throw InvalidConfig(
        "add_p2p_batched: rank " + std::to_string(rank_) + " step " + std::to_string(step) + " \"" +
        ir::to_string(c) + "\" runs before Megatron's exchanges receive its input \"" +
        ir::to_string(input) + "\"; expected an interleaved table whose groups " +
        "hold at least pp (" + std::to_string(pl_.p) + ") microbatches" + kOtherOrders);
  }

  const Pipeline& pl_;
  std::int32_t rank_;
  std::int32_t warmup_;
  std::set<std::tuple<ActionType, std::int32_t, std::int32_t>> received_;
  Row out_;
};

}  // namespace

pipeline::Order add_p2p_batched_interleaved(const pipeline::Order& order, std::int32_t num_stages) {
  pipeline::Order out{.groups = order.groups, .rows = {}};
  if (order.rows.size() == 1) {
    // One rank: every stage boundary is local, so there is nothing to exchange.
    out.rows.emplace_back();
    for (const auto& slot : order.rows.front()) {
      if (slot) out.rows.back().emplace_back(slot);
    }
    return out;
  }
  const Pipeline pl = pipeline_of(order, num_stages);
  const std::vector<std::int32_t> warmups = checked_warmups(order, pl);
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    out.rows.push_back(
        InterleavedRow(pl, static_cast<std::int32_t>(r), warmups[r]).run(order.rows[r]));
  }
  return out;
}

}  // namespace metron::lowering::detail
