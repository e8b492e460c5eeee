#pragma once
// Published runs simulated and compared: per case the published figure, metron's prediction of
// the same quantity and the error; per group (one table of one source) and over all cases the
// mean error. Note [validation error]:
//
//   error = (predicted − published) / published, signed: positive means metron predicts a
//   faster run (more TFLOP/s, a higher MFU) or a slower one for an iteration time; groups report
//   the mean of |error| (what "x % off" means) and the mean signed error (the bias).
//
// A case that cannot be simulated (unsupported, or rejected when its step is built) has no
// prediction; it is counted in its group's `failed`, never averaged in and never dropped.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metron/validation/published_case.h"

namespace metron::validation {

struct CaseOutcome {
  const PublishedCase* published_case = nullptr;  ///< not owned
  std::optional<double> predicted;                ///< in the published quantity's unit
  double error = 0;                               ///< Note [validation error]; 0 without prediction
  std::string failure;                            ///< why there is no prediction
  // What the simulation showed, to explain the error.
  double iteration_time_s = 0;
  double bubble_fraction = 0;
  double exposed_comm_fraction = 0;
  double peak_memory_bytes = 0;   ///< the largest rank's
  std::int64_t hbm_capacity = 0;  ///< one GPU's
};

/// Simulates one case (the steady-state step of one pipeline, as `metron simulate`) and compares.
/// Never throws for a case metron rejects: that becomes `failure`.
CaseOutcome validate_case(const PublishedCase& published_case);

struct GroupSummary {
  std::string group;
  std::int64_t cases = 0;   ///< with a prediction
  std::int64_t failed = 0;  ///< without one
  double mean_abs_error = 0;
  double mean_error = 0;
};

/// Per group in first-appearance order, then one summary named "all" over every case.
std::vector<GroupSummary> summarize(const std::vector<CaseOutcome>& outcomes);

/// The predicted value of `quantity` for a step of `iteration_time_s` on `gpus` GPUs whose FLOPs
/// by the source's formula are `flops` (used by tflops_per_gpu and mfu) and which trains on
/// `tokens` tokens (used by tokens_per_s_per_gpu); `peak_flops` per GPU is mfu's denominator.
double predicted_quantity(PublishedQuantity quantity, double iteration_time_s, double flops,
                          std::int64_t gpus, double peak_flops, double tokens = 0);

/// `metron validate --json`: {"cases": [{id, group, source {title, ref, url}, quantity, flops,
/// published, predicted, error, failure, iteration_time_s, bubble_fraction,
/// exposed_comm_fraction, peak_memory_bytes, hbm_capacity_bytes, settings_from, assumed,
/// not_modelled}], "groups": [{group, cases, failed, mean_abs_error, mean_error}]}; predicted and
/// error are null without a prediction.
std::string validation_json(const std::vector<CaseOutcome>& outcomes,
                            const std::vector<GroupSummary>& groups);

}  // namespace metron::validation
