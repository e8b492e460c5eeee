// Note in adam.h.

#include "metron/exec/adam.h"

#include <cmath>
#include <string>

#include "metron/base/error.h"

namespace metron::exec {

void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
               std::span<float> exp_avg_sq, std::int64_t step, const AdamOptions& options) {
  const std::size_t n = params.size();
  if (grads.size() != n || exp_avg.size() != n || exp_avg_sq.size() != n) {
    throw InvalidConfig("adam step: " + std::to_string(n) + " parameters but " +
                        std::to_string(grads.size()) + " gradients, " +
                        std::to_string(exp_avg.size()) + " first and " +
                        std::to_string(exp_avg_sq.size()) + " second moments; expected equal");
  }
  if (step < 1) {
    throw InvalidConfig("adam step: step " + std::to_string(step) + "; expected 1 or more");
  }
  const bool valid = options.lr >= 0 && options.beta1 >= 0 && options.beta1 < 1 &&
                     options.beta2 >= 0 && options.beta2 < 1 && options.eps > 0 &&
                     options.weight_decay >= 0;
  if (!valid) {
    throw InvalidConfig(
        "adam step: expected lr >= 0, 0 <= beta1, beta2 < 1, eps > 0 and weight_decay >= 0");
  }
  const auto t = static_cast<double>(step);
  const double correction1 = 1 - std::pow(options.beta1, t);
  const double correction2 = 1 - std::pow(options.beta2, t);
  const auto decay = static_cast<float>(1 - options.lr * options.weight_decay);
  const auto beta1 = static_cast<float>(options.beta1);
  const auto beta2 = static_cast<float>(options.beta2);
  const auto step_size = static_cast<float>(options.lr / correction1);
  const auto root_correction2 = static_cast<float>(std::sqrt(correction2));
  const auto eps = static_cast<float>(options.eps);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    exp_avg[i] = beta1 * exp_avg[i] + (1 - beta1) * g;
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1 - beta2) * g * g;
    const float denominator = std::sqrt(exp_avg_sq[i]) / root_correction2 + eps;
    params[i] = params[i] * decay - step_size * exp_avg[i] / denominator;
  }
}

}  // namespace metron::exec
