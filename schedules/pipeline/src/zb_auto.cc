// The Zero Bubble automatic scheduler's heuristic (Qi et al., ICLR 2024, §3.1; docs/SCHEDULES.md
// §3.2): a list scheduler that places F, I and W per stage under a memory limit, run for the 2³
// flag combinations, keeping the order with the smallest cost (longest per-stage span).
//
// Note [zb-auto heuristic]. Our reading of the paper's description; the repo's manual_order was
// not available here to copy, so this is the same shape, not a transcription. One stage per rank:
//   - Warm-up, stage by stage from 0: F while memory allows, while stage s−1 stays at least one
//     F ahead (unless it has no F left; without this rank 1 also fills up to K and the steady
//     period grows), and while the F ends before the first I can start (flag
//     overshoot_first_i: starts before it, so one F may overshoot). The first F always runs.
//   - Then stages are visited by the time they become free; a stage decides its next action
//     from what is already placed. F(s,j) needs F(s−1,j) + T_comm; I(s,j) needs I(s+1,j) +
//     T_comm (the last stage: its own F); W(s,j) needs its own I.
//   - Steady: alternate 1F-1I; flag prioritize_i: I instead of F when s is ≥ 2 F ahead of s+1
//     and the I is ready now.
//   - W is inserted when the wait for the chosen F/I is ≥ T_W, when F is blocked by memory, or
//     (flag no_bubble_greedy) when the wait would raise the largest accumulated stage bubble.
//   - When no F or I is left, the remaining W flush. If every stage waits on an unplaced input,
//     the earliest-free stage runs whatever is ready (W first).
// Note [zb-auto memory]. Memory counts in halves of one microbatch's activation on one stage:
// F +2, I −1, W −1 (ΔM(F) = M_B, ΔM(I) = M_W − M_B, ΔM(W) = −M_W with M_W = M_B/2); an F is
// placed only if it keeps the stage at or below 2K.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

enum Kind : std::uint8_t { kF = 0, kI = 1, kW = 2 };
constexpr std::array<int, 3> kHalfMemory{2, -1, -1};
constexpr std::array<ir::ActionType, 3> kActionType{
    ir::ActionType::kForward, ir::ActionType::kBackwardInput, ir::ActionType::kBackwardWeight};

constexpr std::size_t ix(std::int32_t i) { return static_cast<std::size_t>(i); }

struct Costs {
  std::array<std::vector<double>, 3> per_stage;  // indexed by Kind, then stage
  double comm = 0;
};

struct Flags {
  bool overshoot_first_i = false;
  bool prioritize_i = false;
  bool no_bubble_greedy = false;
};

struct Stage {
  std::array<std::int32_t, 3> done{0, 0, 0};
  double free_at = 0;
  double first_start = -1;
  double bubble = 0;
  int half_memory = 0;
  Kind last_compute = kI;
  std::array<std::vector<double>, 3> end;  // end[kind][mb]; negative while unplaced
  std::vector<ir::Action> row;
};

class Planner {
 public:
  Planner(std::int32_t p, std::int32_t m, int half_limit, const Costs& costs, Flags flags);
  void run();
  [[nodiscard]] double cost() const;
  [[nodiscard]] Order order() const;

 private:
  [[nodiscard]] const Stage& at(std::int32_t s) const { return stages_[ix(s)]; }
  [[nodiscard]] double cost_of(Kind k, std::int32_t s) const { return costs_.per_stage[k][ix(s)]; }
  [[nodiscard]] double end_of(Kind k, std::int32_t s, std::int32_t mb) const {
    return at(s).end[k][ix(mb)];
  }
  [[nodiscard]] std::int32_t done(std::int32_t s, Kind k) const { return at(s).done[k]; }
  [[nodiscard]] bool available(std::int32_t s, Kind k) const {
    return k == kF ? done(s, kF) < m_ : done(s, k) < done(s, k == kI ? kF : kI);
  }
  [[nodiscard]] bool memory_allows_f(std::int32_t s) const {
    return at(s).half_memory + kHalfMemory[kF] <= half_limit_;
  }
  [[nodiscard]] std::optional<double> ready(std::int32_t s, Kind k) const;
  [[nodiscard]] double ready_bound(std::int32_t s, Kind k) const;
  [[nodiscard]] double first_i_ready(std::int32_t s) const;
  [[nodiscard]] Kind preference(std::int32_t s) const;
  [[nodiscard]] std::optional<Kind> choose(std::int32_t s) const;
  [[nodiscard]] bool should_insert_w(std::int32_t s, double wait) const;
  void warm_up(std::int32_t s);
  bool decide(std::int32_t s);
  bool fall_back(std::int32_t s);
  void place(std::int32_t s, Kind k, double ready_at);

  std::int32_t p_;
  std::int32_t m_;
  int half_limit_;
  const Costs& costs_;
  Flags flags_;
  std::vector<Stage> stages_;
};

Planner::Planner(std::int32_t p, std::int32_t m, int half_limit, const Costs& costs, Flags flags)
    : p_(p), m_(m), half_limit_(half_limit), costs_(costs), flags_(flags), stages_(ix(p)) {
  for (Stage& st : stages_) st.end.fill(std::vector<double>(ix(m), -1));
}

// When the next action of kind k on stage s may start, or nullopt while its input is unplaced.
std::optional<double> Planner::ready(std::int32_t s, Kind k) const {
  const std::int32_t mb = done(s, k);
  double input = 0;
  if (k == kF && s > 0) {
    input = end_of(kF, s - 1, mb);
    if (input < 0) return std::nullopt;
    input += costs_.comm;
  } else if (k == kI) {
    input = s + 1 == p_ ? end_of(kF, s, mb) : end_of(kI, s + 1, mb);
    if (input < 0) return std::nullopt;
    if (s + 1 < p_) input += costs_.comm;
  }
  return std::max(at(s).free_at, input);
}

// A lower bound on ready(s, k) while the input is unplaced: the producing stage is busy at
// least until it is free and has run the producer.
double Planner::ready_bound(std::int32_t s, Kind k) const {
  if (auto r = ready(s, k)) return *r;
  const std::int32_t producer = k == kF ? s - 1 : s + 1;
  return std::max(at(s).free_at, at(producer).free_at + cost_of(k, producer) + costs_.comm);
}

// A lower bound on when I(s,0) may start: F0 down the pipeline and I0 back up to s.
double Planner::first_i_ready(std::int32_t s) const {
  double t = 0;
  for (std::int32_t k = 0; k < p_; ++k) {
    const double start = std::max(at(k).free_at, k == 0 ? 0 : t + costs_.comm);
    t = end_of(kF, k, 0) >= 0 ? end_of(kF, k, 0) : start + cost_of(kF, k);
  }
  for (std::int32_t k = p_ - 1; k > s; --k) {
    const double start = std::max(at(k).free_at, k == p_ - 1 ? t : t + costs_.comm);
    t = end_of(kI, k, 0) >= 0 ? end_of(kI, k, 0) : start + cost_of(kI, k);
  }
  return s == p_ - 1 ? t : t + costs_.comm;
}

// F or I, when both are left, after the warm-up: 1F-1I; flag prioritize_i: I instead of F
// when the I is ready now and stage s is at least 2 F ahead of s+1 (which has work queued).
Kind Planner::preference(std::int32_t s) const {
  const Stage& st = at(s);
  if (st.last_compute == kF) return kI;
  if (!flags_.prioritize_i) return kF;
  const std::int32_t lead = s + 1 < p_ ? st.done[kF] - done(s + 1, kF) : m_;
  const auto i_ready = ready(s, kI);
  return lead >= 2 && i_ready && *i_ready <= st.free_at ? kI : kF;
}

// Warm-up of stage s, once s−1 has warmed up: F while memory allows, stage s−1 stays at least
// one F ahead (while it has F left), and the F fits before the first I can start (flag
// overshoot_first_i: starts before it). The first F is always placed.
void Planner::warm_up(std::int32_t s) {
  const double first_i = first_i_ready(s);
  while (available(s, kF) && memory_allows_f(s)) {
    const std::int32_t f = done(s, kF);
    if (f > 0 && s > 0 && f + 1 >= done(s - 1, kF) && done(s - 1, kF) < m_) return;
    const double start = *ready(s, kF);
    const bool fits =
        flags_.overshoot_first_i ? start < first_i : start + cost_of(kF, s) <= first_i;
    if (f > 0 && !fits) return;
    place(s, kF, start);
  }
}

// The next kind for stage s; W when F is blocked by memory or nothing else is left.
std::optional<Kind> Planner::choose(std::int32_t s) const {
  const bool f_left = available(s, kF);
  const bool i_left = available(s, kI);
  Kind k = kW;
  if (f_left && i_left) {
    k = preference(s);
  } else if (f_left || i_left) {
    k = f_left ? kF : kI;
  }
  if (k == kF && !memory_allows_f(s)) k = available(s, kW) ? kW : kI;
  if (!available(s, k)) return std::nullopt;
  return k;
}

bool Planner::should_insert_w(std::int32_t s, double wait) const {
  if (!available(s, kW)) return false;
  if (wait >= cost_of(kW, s)) return true;
  if (!flags_.no_bubble_greedy || wait <= 0) return false;
  double max_bubble = 0;
  for (const Stage& st : stages_) max_bubble = std::max(max_bubble, st.bubble);
  return at(s).bubble + wait > max_bubble;
}

// Places stage s's next action if the heuristic can decide it now; false: wait for an input.
bool Planner::decide(std::int32_t s) {
  const auto k = choose(s);
  if (!k) return false;
  const double now = at(s).free_at;
  if (*k == kW) {
    place(s, kW, now);
    return true;
  }
  const auto when = ready(s, *k);
  if (should_insert_w(s, (when ? *when : ready_bound(s, *k)) - now)) {
    place(s, kW, now);
    return true;
  }
  if (!when) return false;
  place(s, *k, *when);
  return true;
}

// When every stage waits: run any action of s whose input exists (W first: it never waits).
bool Planner::fall_back(std::int32_t s) {
  for (Kind k : {kW, kI, kF}) {
    if (!available(s, k) || (k == kF && !memory_allows_f(s))) continue;
    if (auto when = ready(s, k)) {
      place(s, k, *when);
      return true;
    }
  }
  return false;
}

void Planner::place(std::int32_t s, Kind k, double ready_at) {
  Stage& st = stages_[ix(s)];
  const double start = std::max(ready_at, st.free_at);
  if (st.first_start < 0) {
    st.first_start = start;
  } else {
    st.bubble += start - st.free_at;
  }
  const std::int32_t mb = st.done[k]++;
  st.free_at = start + cost_of(k, s);
  st.end[k][ix(mb)] = st.free_at;
  st.half_memory += kHalfMemory[k];
  if (k != kW) st.last_compute = k;
  st.row.push_back({.type = kActionType[k], .stage = s, .microbatch = mb});
}

void Planner::run() {
  for (std::int32_t s = 0; s < p_; ++s) warm_up(s);
  const auto total = ix(3 * m_);
  std::vector<std::int32_t> by_time;
  while (true) {
    by_time.clear();
    for (std::int32_t s = 0; s < p_; ++s) {
      if (at(s).row.size() < total) by_time.push_back(s);
    }
    if (by_time.empty()) return;
    std::stable_sort(by_time.begin(), by_time.end(),
                     [&](std::int32_t a, std::int32_t b) { return at(a).free_at < at(b).free_at; });
    const auto decided = [&](std::int32_t s) { return decide(s); };
    const auto fell_back = [&](std::int32_t s) { return fall_back(s); };
    const bool placed = std::any_of(by_time.begin(), by_time.end(), decided) ||
                        std::any_of(by_time.begin(), by_time.end(), fell_back);
    METRON_ASSERT(placed, "zb-auto: no stage can place an action");
  }
}

double Planner::cost() const {
  double cost = 0;
  for (const Stage& st : stages_) cost = std::max(cost, st.free_at - st.first_start);
  return cost;
}

Order Planner::order() const {
  Order order;
  for (const Stage& st : stages_) order.rows.emplace_back(st.row.begin(), st.row.end());
  return order;
}

std::vector<double> stage_costs(const std::vector<double>& given, std::int32_t p,
                                const std::string& where, const char* what) {
  if (given.empty()) return std::vector<double>(static_cast<std::size_t>(p), 1.0);
  if (std::ssize(given) != p) {
    throw InvalidConfig(
        fmt::format("{}: {} times must have one entry per stage; expected {}, got {}", where, what,
                    p, given.size()));
  }
  for (std::size_t s = 0; s < given.size(); ++s) {
    if (!std::isfinite(given[s]) || given[s] < 0) {
      throw InvalidConfig(fmt::format("{}: {} time of stage {} must be finite and >= 0; got {}",
                                      where, what, s, given[s]));
    }
  }
  return given;
}

Costs checked_costs(const ScheduleSpec& spec, const std::string& where) {
  if (!std::isfinite(spec.times.p2p) || spec.times.p2p < 0) {
    throw InvalidConfig(
        fmt::format("{}: p2p time must be finite and >= 0; got {}", where, spec.times.p2p));
  }
  Costs costs{
      .per_stage = {stage_costs(spec.times.forward, spec.pp, where, "forward"),
                    stage_costs(spec.times.backward_input, spec.pp, where, "backward-input"),
                    stage_costs(spec.times.backward_weight, spec.pp, where, "backward-weight")},
      .comm = spec.times.p2p};
  return costs;
}

std::int32_t checked_memory_limit(const ScheduleSpec& spec, const std::string& where) {
  const std::int32_t limit = spec.memory_limit.value_or(spec.pp);
  if (limit < 1) {
    throw InvalidConfig(fmt::format(
        "{}: memory limit must hold at least one microbatch's activation; expected >= 1, got {}",
        where, limit));
  }
  return limit;
}

}  // namespace

Order zb_auto(const ScheduleSpec& spec) {
  const std::string where = detail::describe_spec("zb-auto", spec);
  detail::require_positive("zb-auto", spec);
  detail::require_chunks("zb-auto", spec, 1);
  const Costs costs = checked_costs(spec, where);
  const int half_limit = 2 * checked_memory_limit(spec, where);
  std::optional<Order> best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int bits = 0; bits < 8; ++bits) {
    Planner planner(spec.pp, spec.microbatches, half_limit, costs,
                    {.overshoot_first_i = (bits & 1) != 0,
                     .prioritize_i = (bits & 2) != 0,
                     .no_bubble_greedy = (bits & 4) != 0});
    planner.run();
    if (planner.cost() < best_cost) {
      best_cost = planner.cost();
      best = planner.order();
    }
  }
  if (spec.forward_only) {
    for (auto& row : best->rows) {
      std::erase_if(row, [](const auto& a) { return a->type != ir::ActionType::kForward; });
    }
  }
  return *std::move(best);
}

}  // namespace metron::pipeline
