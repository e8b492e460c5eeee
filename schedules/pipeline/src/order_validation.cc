// validate_order (order_checks.h): PyTorch's _validate_schedule rules plus completeness per
// (stage, microbatch) and a dry run. Errors draw the rows and mark the failing action (STYLE E4).

#include <fmt/format.h>

#include <string>

#include "metron/base/error.h"
#include "metron/pipeline/order_checks.h"
#include "order_index.h"

namespace metron::pipeline {
namespace {

using detail::Slot;
using ir::ActionType;

std::int32_t num_stages(Placement placement, const ScheduleSpec& spec) {
  return placement == Placement::kLoop ? spec.pp * spec.vp : 2 * spec.pp;
}

const char* letter(ActionType type) {
  switch (type) {
    case ActionType::kForward:
      return "F";
    case ActionType::kBackward:
      return "B";
    case ActionType::kBackwardInput:
      return "I";
    case ActionType::kBackwardWeight:
      return "W";
    default:
      return "?";
  }
}

/// The rows, with a marker under the action at `at` (docs/STYLE.md E4).
std::string picture(const Order& order, Slot at) {
  std::string out;
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    std::string line = fmt::format("rank {}:", r);
    std::size_t mark_from = 0, mark_len = 0;
    for (std::size_t k = 0; k < order.rows[r].size(); ++k) {
      const auto& slot = order.rows[r][k];
      const std::string token = slot ? ir::to_string(*slot) : "_";
      line += " ";
      if (static_cast<std::int32_t>(r) == at.rank && static_cast<std::int32_t>(k) == at.index) {
        mark_from = line.size();
        mark_len = token.size();
      }
      line += token;
    }
    out += "\n  " + line;
    if (mark_len > 0) {
      out += "\n  " + std::string(mark_from, ' ') + std::string(mark_len, '^') + " <-- here";
    }
  }
  return out;
}

class Validator {
 public:
  Validator(const Order& order, const ScheduleSpec& spec, Placement placement)
      : order_(order),
        spec_(spec),
        placement_(placement),
        index_(order),
        where_(fmt::format("invalid order for schedule \"{}\" (pp={}, vp={}, microbatches={})",
                           spec.name, spec.pp, spec.vp, spec.microbatches)) {}

  void run() {
    if (order_.rows.size() != static_cast<std::size_t>(spec_.pp)) {
      fail({}, fmt::format("{} rows; expected one per rank ({})", order_.rows.size(), spec_.pp));
    }
    check_actions_and_placement();
    for (std::int32_t s = 0; s < num_stages(placement_, spec_); ++s) check_stage(s);
    try {
      (void)time_order(order_, ActionTimes{});
    } catch (const InvalidConfig& e) {
      fail({}, e.what());
    }
  }

 private:
  [[noreturn]] void fail(Slot at, const std::string& what) const {
    throw InvalidConfig(where_ + ": " + what + (at.rank >= 0 ? picture(order_, at) : ""));
  }
  void check_actions_and_placement();
  void check_stage(std::int32_t stage);
  void check_counts(std::int32_t stage, std::int32_t mb);
  void check_before(ActionType first, ActionType then, std::int32_t stage, std::int32_t mb);

  const Order& order_;
  const ScheduleSpec& spec_;
  Placement placement_;
  detail::OrderIndex index_;
  std::string where_;
  std::vector<std::int32_t> stage_rank_;
};

void Validator::check_actions_and_placement() {
  stage_rank_.assign(static_cast<std::size_t>(num_stages(placement_, spec_)), -1);
  for (const auto& [key, slots] : index_.all()) {
    const auto [type, stage, mb] = key;
    const Slot at = slots.front();
    const bool compute = type == ActionType::kForward || type == ActionType::kBackward ||
                         type == ActionType::kBackwardInput || type == ActionType::kBackwardWeight;
    if (!compute) fail(at, "expected only F, I, W, B and OVERLAP_F_B actions");
    if (stage < 0 || stage >= static_cast<std::int32_t>(stage_rank_.size())) {
      fail(at, fmt::format("stage {} out of range; expected 0..{}", stage, stage_rank_.size() - 1));
    }
    for (const Slot& s : slots) {
      auto& owner = stage_rank_[static_cast<std::size_t>(stage)];
      if (owner < 0) owner = s.rank;
      if (owner != s.rank) {
        fail(s, fmt::format("stage {} runs on ranks {} and {}; expected one rank per stage", stage,
                            owner, s.rank));
      }
    }
    const auto range = stage_microbatches(placement_, spec_.pp, stage, spec_.microbatches);
    if (mb < range.first || mb >= range.first + range.count) {
      fail(at, fmt::format("stage {} does not run microbatch {}; expected {}..{}", stage, mb,
                           range.first, range.first + range.count - 1));
    }
  }
}

void Validator::check_stage(std::int32_t stage) {
  if (stage_rank_[static_cast<std::size_t>(stage)] < 0) {
    fail({}, fmt::format("stage {} appears on no rank", stage));
  }
  const auto range = stage_microbatches(placement_, spec_.pp, stage, spec_.microbatches);
  for (std::int32_t mb = range.first; mb < range.first + range.count; ++mb) {
    check_counts(stage, mb);
    check_before(ActionType::kForward, ActionType::kBackward, stage, mb);
    check_before(ActionType::kForward, ActionType::kBackwardInput, stage, mb);
    check_before(ActionType::kBackwardInput, ActionType::kBackwardWeight, stage, mb);
  }
}

void Validator::check_counts(std::int32_t stage, std::int32_t mb) {
  const auto count = [&](ActionType t) { return index_.find(t, stage, mb).size(); };
  const std::size_t f = count(ActionType::kForward), b = count(ActionType::kBackward),
                    i = count(ActionType::kBackwardInput), w = count(ActionType::kBackwardWeight);
  const bool ok = spec_.forward_only
                      ? (f == 1 && b + i + w == 0)
                      : (f == 1 && ((b == 1 && i + w == 0) || (b == 0 && i == 1 && w == 1)));
  if (ok) return;
  Slot at{};
  for (ActionType t : {ActionType::kForward, ActionType::kBackward, ActionType::kBackwardInput,
                       ActionType::kBackwardWeight}) {
    if (count(t) > 1) at = index_.find(t, stage, mb)[1];
  }
  fail(at,
       fmt::format(
           "stage {} microbatch {} has {} F, {} B, {} I and {} W; expected one F and {}", stage, mb,
           f, b, i, w,
           spec_.forward_only ? "nothing else (forward-only)" : "either one B or one I and one W"));
}

void Validator::check_before(ActionType first, ActionType then, std::int32_t stage,
                             std::int32_t mb) {
  const auto& a = index_.find(first, stage, mb);
  const auto& b = index_.find(then, stage, mb);
  if (a.empty() || b.empty()) return;
  // A stage lives on one rank (checked first), so positions in that rank's row compare.
  if (a.front().index < b.front().index) return;
  fail(b.front(), fmt::format("{}{}{} runs before {}{}{}; expected F before I or B, and I before W",
                              stage, letter(then), mb, stage, letter(first), mb));
}

}  // namespace

StageMicrobatches stage_microbatches(Placement placement, std::int32_t pp, std::int32_t stage,
                                     std::int32_t microbatches) {
  if (placement != Placement::kBidirectional) return {0, microbatches};
  const std::int32_t half = microbatches / 2;
  return stage < pp ? StageMicrobatches{0, half} : StageMicrobatches{half, microbatches - half};
}

void validate_order(const Order& order, const ScheduleSpec& spec, Placement placement) {
  Validator(order, spec, placement).run();
}

}  // namespace metron::pipeline
