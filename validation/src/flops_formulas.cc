#include "metron/validation/flops_formulas.h"

namespace metron::validation {

std::string_view to_string(FlopsFormula formula) noexcept {
  switch (formula) {
    case FlopsFormula::kNarayananEq3:
      return "narayanan-eq3";
    case FlopsFormula::kMegatronModelFlops:
      return "megatron-model-flops";
  }
  return "?";
}

std::optional<FlopsFormula> parse_flops_formula(std::string_view name) noexcept {
  for (const FlopsFormula f : {FlopsFormula::kNarayananEq3, FlopsFormula::kMegatronModelFlops}) {
    if (to_string(f) == name) return f;
  }
  return std::nullopt;
}

double step_flops(FlopsFormula formula, const models::ModelSpec& model, std::int64_t global_batch,
                  std::int64_t seq_len) {
  const auto b = static_cast<double>(global_batch);
  const auto s = static_cast<double>(seq_len);
  const auto l = static_cast<double>(model.layers);
  const auto h = static_cast<double>(model.hidden);
  const auto v = static_cast<double>(model.vocab);
  switch (formula) {
    case FlopsFormula::kNarayananEq3:
      return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
    case FlopsFormula::kMegatronModelFlops:
      return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
  }
  return 0;
}

}  // namespace metron::validation
