#pragma once
// A published training run, as metron checks its predictions against it: the scenario the source
// ran, the figure it printed and how that figure was computed, and where every setting came from.
// Note [published cases]:
//
//   {"cases": [{"id": "narayanan21_t1_1.7B",
//               "group": "Narayanan et al. SC'21 Table 1",
//               "source": {"title": "...", "ref": "arXiv:2104.04473, Table 1", "url": "..."},
//               "published": {"quantity": "tflops_per_gpu", "value": 137,
//                             "flops": "narayanan-eq3"},
//               "scenario": {...a scenario (Note [scenario JSON])...},
//               "settings_from": ["the authors' run script: --micro-batch-size 16, ..."],
//               "assumed": ["microbatch size 1 (not published)", ...],
//               "not_modelled": ["tensor-parallel communication overlap", ...]}]}
//
// published.quantity is what the source printed:
//   "tflops_per_gpu"     achieved TFLOP/s per GPU, FLOPs counted by published.flops;
//   "mfu"                those FLOPs over the time and published.peak_tflops (per GPU, the peak
//                        the source divided by; default: the scenario GPU's dense peak at the
//                        model's dtype);
//   "iteration_time_s"   seconds per training step (published.flops is not used);
//   "tokens_per_s_per_gpu"
//                        training tokens (global batch · sequence length) per second and GPU
//                        (published.flops is not used).
// published.flops names the source's own formula, so that the prediction is compared on the
// source's quantity rather than on metron's FLOPs count (flops_formulas.h).
// A run metron cannot express has "unsupported": "why" instead of "scenario"; it is listed with
// its reason, never skipped. Optional: settings_from, assumed, not_modelled (default empty),
// source.url. Unknown keys are errors, as in a scenario.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/scenario/scenario.h"
#include "metron/validation/flops_formulas.h"

namespace metron::validation {

/// What a source printed for a run.
enum class PublishedQuantity { kTflopsPerGpu, kMfu, kIterationTime, kTokensPerGpu };

/// "tflops_per_gpu", "mfu", "iteration_time_s", "tokens_per_s_per_gpu".
std::string_view to_string(PublishedQuantity quantity) noexcept;

struct PublishedFigure {
  PublishedQuantity quantity = PublishedQuantity::kTflopsPerGpu;
  double value = 0;
  std::optional<FlopsFormula> flops;  ///< required for tflops_per_gpu and mfu
  std::optional<double> peak_tflops;  ///< mfu's denominator, when the source states it
};

struct PublishedSource {
  std::string title;
  std::string ref;  ///< where in the source: "arXiv:2104.04473, Table 1"
  std::string url;
};

struct PublishedCase {
  std::string id;
  std::string group;  ///< the cases whose mean error is reported together (one table, one paper)
  PublishedSource source;
  PublishedFigure published;
  std::optional<scenario::Scenario> scenario;  ///< absent when unsupported
  std::string unsupported;                     ///< why metron cannot express the run
  std::vector<std::string> settings_from;      ///< where the published settings come from
  std::vector<std::string> assumed;            ///< settings the source leaves open
  std::vector<std::string> not_modelled;       ///< what the run did that metron does not model
};

/// Reads a cases document (Note [published cases]). Malformed JSON throws ParseError at
/// source:line:col; a missing or wrong field, an unknown key or a duplicate id throws ParseError
/// naming the case (`cases.json: cases[3] (narayanan21_t1_39.1B): published.flops: ...`); a
/// scenario is read by scenario_from_json with the same prefix.
std::vector<PublishedCase> cases_from_json(std::string_view text, const std::string& source);

/// The cases shipped with metron (validation/cases/published_runs.json, compiled in): the
/// development set of published runs with their citations.
const std::vector<PublishedCase>& shipped_cases();

/// Where the shipped cases come from, for messages: "validation/cases/published_runs.json".
inline constexpr std::string_view kShippedCasesName = "validation/cases/published_runs.json";

}  // namespace metron::validation
