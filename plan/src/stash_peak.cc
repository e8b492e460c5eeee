// Note [configuration estimate] (estimate.h): the activation-stash peak per rank.

#include "stash_peak.h"

#include <algorithm>

#include "metron/pipeline/placement.h"

namespace metron::plan::detail {

std::optional<std::vector<double>> closed_form_stash_peak(const pipeline::ScheduleSpec& spec,
                                                          const std::vector<StashBytes>& bytes) {
  const std::int32_t p = spec.pp;
  const std::int32_t m = spec.microbatches;
  const std::int32_t v = spec.vp;
  std::vector<double> out(static_cast<std::size_t>(p), 0.0);
  if (spec.name == "1f1b") {
    // Warm-up p − r − 1 forwards, then the steady state's forward before the first backward.
    for (std::int32_t r = 0; r < p; ++r) {
      const std::int32_t in_flight = std::min(p - r, m);
      const StashBytes& b = bytes[static_cast<std::size_t>(r)];
      // The forward at the peak sends its output unless it is the last stage's.
      out[static_cast<std::size_t>(r)] = in_flight * b.activation + (r < p - 1 ? b.output : 0.0);
    }
    return out;
  }
  if (spec.name == "interleaved-1f1b") {
    const std::int32_t n = spec.group_size.value_or(p);
    for (std::int32_t r = 0; r < p; ++r) {
      // Megatron's get_pp_rank_microbatches: the warm-up forwards, then one steady forward.
      const std::int32_t warmup = 2 * (p - r - 1) + (v - 1) * n;
      const std::int32_t in_flight = std::min(warmup + 1, m * v);
      const StashBytes& b = bytes[static_cast<std::size_t>(r)];
      out[static_cast<std::size_t>(r)] = in_flight * b.activation + b.output;
    }
    return out;
  }
  return std::nullopt;
}

namespace {

// An output sent asynchronously is freed when its isend completes: during the rank's next
// compute task, so the walk holds it through that task (`in_flight_output`).
struct Walker {
  const std::vector<std::int32_t>& stage_rank;
  const StashBytes& bytes;
  double held = 0;
  double peak = 0;
  double in_flight_output = 0;

  void forward(std::int32_t stage, std::int32_t rank) {
    const std::size_t next = static_cast<std::size_t>(stage) + 1;
    const bool sent = next < stage_rank.size() && stage_rank[next] != rank;
    held += bytes.activation;
    const double output = sent ? bytes.output : 0.0;
    peak = std::max(peak, held + in_flight_output + output);
    in_flight_output = output;
  }
  void backward_input() {
    peak = std::max(peak, held + in_flight_output + bytes.weight_grad);
    held += bytes.weight_grad - bytes.activation;
    in_flight_output = 0;
  }
  void backward() {
    held -= bytes.activation;
    in_flight_output = 0;
  }
  void weight() {
    held -= bytes.weight_grad;
    in_flight_output = 0;
  }

  void action(const ir::Action& a, std::int32_t rank) {
    switch (a.type) {
      case ir::ActionType::kForward:
        forward(a.stage, rank);
        break;
      case ir::ActionType::kBackwardInput:
        backward_input();
        break;
      case ir::ActionType::kBackward:
        backward();
        break;
      case ir::ActionType::kBackwardWeight:
        weight();
        break;
      case ir::ActionType::kOverlapForwardBackward:
        for (const ir::Action& half : a.sub) action(half, rank);
        break;
      default:
        break;
    }
  }
};

}  // namespace

std::vector<double> walked_stash_peak(const pipeline::Order& order, pipeline::Placement placement,
                                      std::int32_t pp, const std::vector<StashBytes>& bytes) {
  std::int32_t stages = 0;
  for (const auto& row : order.rows) {
    for (const auto& a : row) {
      if (a) stages = std::max(stages, a->stage + 1);
      if (a) {
        for (const ir::Action& half : a->sub) stages = std::max(stages, half.stage + 1);
      }
    }
  }
  const std::vector<std::int32_t> stage_rank = pipeline::stage_ranks(placement, pp, stages);
  std::vector<double> out;
  for (std::size_t r = 0; r < order.rows.size(); ++r) {
    Walker w{stage_rank, bytes[r]};
    for (const auto& a : order.rows[r]) {
      if (a) w.action(*a, static_cast<std::int32_t>(r));
    }
    out.push_back(w.peak);
  }
  return out;
}

}  // namespace metron::plan::detail
