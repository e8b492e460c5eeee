// DeepSeek DualPipe and DualPipeV (docs/SCHEDULES.md §2.4, §4.2; upstream deepseek-ai/DualPipe
// dualpipe.py / dualpipev.py and PyTorch ScheduleDualPipeV).
//
// Note [dualpipe steps]: both schedules run the same eight steps per rank, written with
// half, hr and M:
//   DualPipe   half = p/2, hr = min(r, p−1−r), M = m/2 (microbatches per direction)
//   DualPipeV  half = p,   hr = r,             M = m
// Phase 0 is the rank's "own forward" chunk, phase 1 the other. The steps' F and B/I of each
// phase take that phase's microbatches in order; W drains, oldest first, the queue that only
// the zero-bubble backwards (I) fill. The rank with hr == half−1 (DualPipe's two middle ranks,
// DualPipeV's last rank, where the pipeline turns) runs the first pair of step 4 unoverlapped.
//
// Note [dualpipe stage ids]: our convention for DualPipe's text form. Direction a's model
// stage k is global stage k on rank k and runs microbatches [0, m/2); direction b's model stage
// k is global stage p + k on rank p−1−k and runs microbatches [m/2, m). So rank r holds stages
// r and 2p−1−r, as in V placement, but the two directions are separate pipelines and every
// (stage, microbatch) pair is distinct. Phase 0 is direction a on ranks r < p/2 and direction
// b on the others (upstream swaps phases for the second half).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

using ir::Action;
using ir::ActionType;

/// One of a rank's two chunks: its global stage and the microbatches it runs.
struct Phase {
  std::int32_t stage = 0;
  std::int32_t first_microbatch = 0;
  std::int32_t next_forward = 0;
  std::int32_t next_backward = 0;
};

/// The step counts of Note [dualpipe steps] for one rank.
struct StepShape {
  std::int32_t half = 0;
  std::int32_t hr = 0;
  std::int32_t per_phase = 0;  ///< M
};

/// Appends one rank's actions, numbering microbatches per phase and queueing W behind I.
class RankRow {
 public:
  RankRow(Phase phase0, Phase phase1) : phases_{phase0, phase1} {}

  void forward(std::size_t phase) { row_.emplace_back(next_forward(phase)); }
  void backward(std::size_t phase, bool zero_bubble) {
    row_.emplace_back(next_backward(phase, zero_bubble));
  }
  void weight() {
    METRON_ASSERT(!weights_.empty(), "dualpipe: W with no pending I");
    row_.emplace_back(weights_.front());
    weights_.pop_front();
  }
  void overlap(std::size_t forward_phase, std::size_t backward_phase) {
    Action f = next_forward(forward_phase);
    Action b = next_backward(backward_phase, false);
    row_.emplace_back(Action{.type = ActionType::kOverlapForwardBackward, .sub = {f, b}});
  }
  std::vector<std::optional<Action>> take() && {
    METRON_ASSERT(weights_.empty(), "dualpipe: I left without its W");
    return std::move(row_);
  }

 private:
  Action next_forward(std::size_t phase) {
    Phase& ph = phases_.at(phase);
    return {.type = ActionType::kForward,
            .stage = ph.stage,
            .microbatch = ph.first_microbatch + ph.next_forward++};
  }
  Action next_backward(std::size_t phase, bool zero_bubble) {
    Phase& ph = phases_.at(phase);
    Action a{.type = zero_bubble ? ActionType::kBackwardInput : ActionType::kBackward,
             .stage = ph.stage,
             .microbatch = ph.first_microbatch + ph.next_backward++};
    if (zero_bubble) {
      weights_.push_back(
          {.type = ActionType::kBackwardWeight, .stage = a.stage, .microbatch = a.microbatch});
    }
    return a;
  }

  std::array<Phase, 2> phases_;
  std::deque<Action> weights_;
  std::vector<std::optional<Action>> row_;
};

// Steps 1–3: forwards of phase 0, then both phases, then zero-bubble backwards of phase 1.
void run_warmup(RankRow& row, const StepShape& s) {
  for (std::int32_t i = 0; i < 2 * (s.half - s.hr - 1); ++i) row.forward(0);
  for (std::int32_t i = 0; i < s.hr + 1; ++i) {
    row.forward(0);
    row.forward(1);
  }
  for (std::int32_t i = 0; i < s.half - s.hr - 1; ++i) {
    row.backward(1, true);
    row.weight();
    row.forward(1);
  }
}

// Steps 4–5: overlapped forward-backward pairs.
void run_steady(RankRow& row, const StepShape& s) {
  const bool is_turning_rank = s.hr == s.half - 1;
  for (std::int32_t i = 0; i < s.per_phase - 2 * s.half + s.hr + 1; ++i) {
    if (i == 0 && is_turning_rank) {
      // Upstream leaves this pair unoverlapped to shorten the bubble.
      row.forward(0);
      row.backward(1, false);
    } else {
      row.overlap(0, 1);
    }
    row.overlap(1, 0);
  }
  for (std::int32_t i = 0; i < s.half - s.hr - 1; ++i) {
    row.backward(1, false);
    row.overlap(1, 0);
  }
}

// Steps 6–8: the remaining backwards, the second half of them zero-bubble, then the W.
void run_cooldown(RankRow& row, const StepShape& s) {
  const std::int32_t count = s.hr + 1;
  const bool switch_first = s.hr % 2 == 1;  // odd hr: I from phase 1's op of index count/2 on
  bool zero_bubble = false;
  for (std::int32_t i = 0; i < count; ++i) {
    if (i == count / 2 && switch_first) zero_bubble = true;
    row.backward(1, zero_bubble);
    if (i == count / 2 && !switch_first) zero_bubble = true;
    row.backward(0, zero_bubble);
  }
  for (std::int32_t i = 0; i < s.half - s.hr - 1; ++i) {
    row.weight();
    row.backward(0, true);
  }
  for (std::int32_t i = 0; i < s.hr + 1; ++i) row.weight();
}

std::vector<std::optional<Action>> rank_row(Phase phase0, Phase phase1, const StepShape& s) {
  RankRow row(phase0, phase1);
  run_warmup(row, s);
  run_steady(row, s);
  run_cooldown(row, s);
  return std::move(row).take();
}

// The even rank counts next to an odd one.
std::string nearest_even(std::int32_t odd) {
  if (odd == 1) return "2";
  return fmt::format("{} or {}", odd - 1, odd + 1);
}

void check_common(std::string_view name, const ScheduleSpec& spec) {
  detail::require_positive(name, spec);
  detail::require_chunks(name, spec, 2);
  if (spec.forward_only) {
    throw InvalidConfig(detail::describe_spec(name, spec) + ": has no forward-only form");
  }
}

void check_dualpipe(const ScheduleSpec& spec) {
  check_common("dualpipe", spec);
  const std::int32_t p = spec.pp;
  const std::int32_t m = spec.microbatches;
  if (p % 2 != 0) {
    throw InvalidConfig(fmt::format(
        "{}: pp must be even (half the ranks start each direction); got {}; nearest valid: {}",
        detail::describe_spec("dualpipe", spec), p, nearest_even(p)));
  }
  if (m < 2 * p) {
    throw InvalidConfig(
        fmt::format("{}: microbatches must be >= 2*pp = {}; got {}; nearest valid: {}",
                    detail::describe_spec("dualpipe", spec), 2 * p, m, 2 * p));
  }
  if (m % 2 != 0) {
    throw InvalidConfig(fmt::format(
        "{}: microbatches must be even (half enter from each end); got {}; nearest valid: {} or {}",
        detail::describe_spec("dualpipe", spec), m, m - 1, m + 1));
  }
}

void check_dualpipe_v(const ScheduleSpec& spec) {
  check_common("dualpipe-v", spec);
  if (spec.microbatches < 2 * spec.pp) {
    throw InvalidConfig(fmt::format(
        "{}: microbatches must be >= 2*pp = {}; got {}; nearest valid: {}",
        detail::describe_spec("dualpipe-v", spec), 2 * spec.pp, spec.microbatches, 2 * spec.pp));
  }
}

}  // namespace

Order dualpipe(const ScheduleSpec& spec) {
  check_dualpipe(spec);
  const std::int32_t p = spec.pp;
  const std::int32_t half_m = spec.microbatches / 2;
  Order order;
  for (std::int32_t r = 0; r < p; ++r) {
    // Note [dualpipe stage ids]: direction a is stage r, direction b stage 2p−1−r.
    const Phase a{.stage = r, .first_microbatch = 0};
    const Phase b{.stage = 2 * p - 1 - r, .first_microbatch = half_m};
    const StepShape shape{.half = p / 2, .hr = std::min(r, p - 1 - r), .per_phase = half_m};
    const bool is_second_half = r >= p / 2;
    order.rows.push_back(is_second_half ? rank_row(b, a, shape) : rank_row(a, b, shape));
  }
  return order;
}

Order dualpipe_v(const ScheduleSpec& spec) {
  check_dualpipe_v(spec);
  const std::int32_t p = spec.pp;
  Order order;
  for (std::int32_t r = 0; r < p; ++r) {
    const StepShape shape{.half = p, .hr = r, .per_phase = spec.microbatches};
    order.rows.push_back(rank_row({.stage = r}, {.stage = 2 * p - 1 - r}, shape));
  }
  return order;
}

}  // namespace metron::pipeline
