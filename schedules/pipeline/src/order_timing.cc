// Timing of an order (order_checks.h): each rank runs its row in order; an action starts when
// its rank is free and its input exists. Dependencies are looked up among the actions the order
// contains, so placements need no special cases: DualPipe's two directions run disjoint
// microbatches and so never depend on each other.

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "metron/base/error.h"
#include "metron/pipeline/order_checks.h"
#include "order_index.h"

namespace metron::pipeline {
namespace {

using detail::Part;
using detail::Slot;
using ir::ActionType;

constexpr double kUnknown = -1;

class Timer {
 public:
  Timer(const Order& order, const ActionTimes& times)
      : order_(order), times_(times), index_(order) {
    for (const auto& row : order.rows) {
      t_.start.emplace_back(row.size(), kUnknown);
      t_.end.emplace_back(row.size(), kUnknown);
    }
  }

  Timeline run() {
    std::vector<std::size_t> next(order_.rows.size(), 0);
    std::vector<double> free(order_.rows.size(), 0);
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (std::size_t r = 0; r < order_.rows.size(); ++r) {
        while (next[r] < order_.rows[r].size() && try_start(r, next[r], free[r])) {
          ++next[r];
          progressed = true;
        }
      }
    }
    for (std::size_t r = 0; r < order_.rows.size(); ++r) {
      if (next[r] < order_.rows[r].size()) stuck(r, next[r]);
    }
    summarise();
    return std::move(t_);
  }

 private:
  [[nodiscard]] double duration(const ir::Action& a) const;
  [[nodiscard]] double part_duration(ActionType type) const;
  /// When the input of `part` (run on `rank`) is available, or kUnknown if not yet known.
  [[nodiscard]] double ready(const Part& part, std::size_t rank) const;
  [[nodiscard]] double arrival(const std::vector<Slot>& producers, std::size_t rank) const;
  bool try_start(std::size_t r, std::size_t k, double& free);
  [[noreturn]] void stuck(std::size_t r, std::size_t k) const;
  void summarise();

  const Order& order_;
  const ActionTimes& times_;
  detail::OrderIndex index_;
  Timeline t_;
};

double Timer::part_duration(ActionType type) const {
  switch (type) {
    case ActionType::kForward:
      return times_.forward;
    case ActionType::kBackwardInput:
      return times_.backward_input;
    case ActionType::kBackwardWeight:
      return times_.backward_weight;
    case ActionType::kBackward:
      return times_.backward;
    default:
      return 0;
  }
}

double Timer::duration(const ir::Action& a) const {
  if (a.type != ActionType::kOverlapForwardBackward) return part_duration(a.type);
  if (times_.overlap >= 0) return times_.overlap;
  double sum = 0;
  for (const auto& half : a.sub) sum += part_duration(half.type);
  return sum;
}

// The producer finishing last counts; p2p is added when it ran on another rank.
double Timer::arrival(const std::vector<Slot>& producers, std::size_t rank) const {
  double when = 0;
  for (const Slot& s : producers) {
    const double end = t_.end[static_cast<std::size_t>(s.rank)][static_cast<std::size_t>(s.index)];
    if (end == kUnknown) return kUnknown;
    when = std::max(when, end + (static_cast<std::size_t>(s.rank) == rank ? 0 : times_.p2p));
  }
  return when;
}

double Timer::ready(const Part& p, std::size_t rank) const {
  const auto& find = [&](ActionType type, std::int32_t stage) {
    return index_.find(type, stage, p.microbatch);
  };
  switch (p.type) {
    case ActionType::kForward:
      return arrival(find(ActionType::kForward, p.stage - 1), rank);
    case ActionType::kBackwardInput:
    case ActionType::kBackward: {
      // The gradient comes from the next stage's I or B; the stage that has none is the last.
      auto from_next = find(ActionType::kBackwardInput, p.stage + 1);
      const auto& full = find(ActionType::kBackward, p.stage + 1);
      from_next.insert(from_next.end(), full.begin(), full.end());
      const double own = arrival(find(ActionType::kForward, p.stage), rank);
      const double next = arrival(from_next, rank);
      return own == kUnknown || next == kUnknown ? kUnknown : std::max(own, next);
    }
    case ActionType::kBackwardWeight:
      return arrival(find(ActionType::kBackwardInput, p.stage), rank);
    default:
      return 0;
  }
}

bool Timer::try_start(std::size_t r, std::size_t k, double& free) {
  const auto& slot = order_.rows[r][k];
  if (!slot) return true;  // idle slots take no time here
  double start = free;
  for (const Part& p : detail::parts_of(*slot)) {
    const double when = ready(p, r);
    if (when == kUnknown) return false;
    start = std::max(start, when);
  }
  t_.start[r][k] = start;
  t_.end[r][k] = start + duration(*slot);
  free = t_.end[r][k];
  return true;
}

void Timer::stuck(std::size_t r, std::size_t k) const {
  throw InvalidConfig(fmt::format(
      "order cannot complete: rank {} waits forever at action {} ({}); expected every action's "
      "input to be produced earlier in some rank's order",
      r, k, ir::to_string(*order_.rows[r][k])));
}

void Timer::summarise() {
  for (std::size_t r = 0; r < order_.rows.size(); ++r) {
    std::int32_t alive = 0, peak = 0;
    double first = std::numeric_limits<double>::infinity(), last = 0, busy = 0;
    for (std::size_t k = 0; k < order_.rows[r].size(); ++k) {
      const auto& slot = order_.rows[r][k];
      if (!slot) continue;
      for (const Part& p : detail::parts_of(*slot)) {
        if (p.type == ActionType::kForward) peak = std::max(peak, ++alive);
        if (p.type == ActionType::kBackward || p.type == ActionType::kBackwardInput) --alive;
      }
      first = std::min(first, t_.start[r][k]);
      last = std::max(last, t_.end[r][k]);
      busy += t_.end[r][k] - t_.start[r][k];
    }
    t_.peak_activations.push_back(peak);
    t_.span.push_back(last > 0 ? last - first : 0);
    t_.busy.push_back(busy);
    t_.makespan = std::max(t_.makespan, last);
  }
}

}  // namespace

Timeline time_order(const Order& order, const ActionTimes& times) {
  return Timer(order, times).run();
}

}  // namespace metron::pipeline
