// Note [training check] (training_check.h).

#include "metron/exec/training_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metron/base/error.h"

namespace metron::exec {

namespace {

constexpr double kLossRelative = 1e-5;
constexpr double kParameterRelative = 1e-6;
constexpr double kParameterPerStepOfLr = 1e-2;

std::string number(double value) {
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

}  // namespace

void validate(const TrainingSetup& setup) {
  validate(setup.model);
  const auto bounded = [](const char* name, std::int64_t value) {
    if (value < 1 || value > 10000) {
      throw InvalidConfig("training: " + std::string(name) + " " + std::to_string(value) +
                          "; expected 1 to 10000");
    }
  };
  bounded("steps", setup.steps);
  bounded("microbatches", setup.microbatches);
  // adam_step's own checks, before anything runs.
  std::vector<float> one(1);
  adam_step(one, one, one, one, 1, setup.adam);
}

MicrobatchData step_microbatch(const TrainingSetup& setup, std::int64_t step, std::int64_t k) {
  return synthetic_microbatch(setup.model,
                              (step * setup.microbatches + k) * setup.model.microbatch_size);
}

std::map<std::string, std::vector<float>> parameters_by_name(const std::vector<GptStage*>& stages) {
  std::map<std::string, std::vector<float>> out;
  for (GptStage* stage : stages) {
    const std::span<float> flat = stage->flat_parameters();
    for (const ParameterSlot& slot : stage->parameter_layout()) {
      const auto first = flat.begin() + slot.offset;
      const bool fresh =
          out.try_emplace(slot.name, std::vector<float>(first, first + slot.numel)).second;
      if (!fresh) throw InvalidConfig("training record: parameter " + slot.name + " twice");
    }
  }
  return out;
}

TrainingRecord reference_training(const TrainingSetup& setup) {
  validate(setup);
  GptStage whole(setup.model, {.first_layer = 0, .layers = setup.model.layers});
  const std::size_t n = whole.flat_parameters().size();
  std::vector<float> exp_avg(n);
  std::vector<float> exp_avg_sq(n);
  const std::vector<float> factor{1.0F / static_cast<float>(setup.microbatches)};
  TrainingRecord out;
  for (std::int64_t t = 0; t < setup.steps; ++t) {
    std::vector<float>& losses = out.losses.emplace_back();
    for (std::int64_t k = 0; k < setup.microbatches; ++k) {
      const MicrobatchData data = step_microbatch(setup, t, k);
      losses.push_back(whole.forward(k, {.tokens = data.tokens, .labels = data.labels})[0]);
      whole.backward(k, factor);
    }
    adam_step(whole.flat_parameters(), whole.flat_gradients(), exp_avg, exp_avg_sq, t + 1,
              setup.adam);
    whole.zero_gradients();
  }
  out.parameters = parameters_by_name({&whole});
  return out;
}

CheckReport check_training(const TrainingRecord& run, const TrainingRecord& reference,
                           const TrainingSetup& setup) {
  CheckReport report;
  const auto problem = [&](std::string what) {
    report.ok = false;
    report.problems.push_back(std::move(what));
  };
  if (run.losses.size() != reference.losses.size()) {
    problem("losses of " + std::to_string(run.losses.size()) + " steps; the reference has " +
            std::to_string(reference.losses.size()));
  }
  for (std::size_t t = 0; t < std::min(run.losses.size(), reference.losses.size()); ++t) {
    const std::vector<float>& got = run.losses[t];
    const std::vector<float>& want = reference.losses[t];
    if (got.size() != want.size()) {
      problem("step " + std::to_string(t) + ": " + std::to_string(got.size()) +
              " microbatch losses; the reference has " + std::to_string(want.size()));
      continue;
    }
    for (std::size_t k = 0; k < got.size(); ++k) {
      const double ratio = std::abs(static_cast<double>(got[k]) - want[k]) /
                           (kLossRelative * std::abs(static_cast<double>(want[k])) + 1e-30);
      report.worst_loss = std::max(report.worst_loss, ratio);
      if (!(ratio <= 1)) {  // NaN fails too
        problem("step " + std::to_string(t) + " microbatch " + std::to_string(k) + ": loss " +
                number(got[k]) + ", the reference " + number(want[k]));
      }
    }
  }
  const double absolute =
      kParameterPerStepOfLr * setup.adam.lr * static_cast<double>(reference.losses.size());
  // Each reference parameter, and its DualPipe copy where the run has one; with tied
  // embeddings, the last stage's copy of the word embeddings where the run has one (the
  // reference's one stage holds a single tensor: Note [gpt stage]).
  std::vector<std::pair<std::string, const std::vector<float>*>> expected;
  for (const auto& [name, want] : reference.parameters) {
    expected.emplace_back(name, &want);
    const std::string copy = std::string(kStageCopyPrefix) + name;
    if (run.parameters.contains(copy)) expected.emplace_back(copy, &want);
    if (setup.model.tied_embeddings && name == kWordEmbeddings) {
      for (std::string head : {std::string(kTiedHeadCopy),
                               std::string(kStageCopyPrefix) + std::string(kTiedHeadCopy)}) {
        if (run.parameters.contains(head)) expected.emplace_back(std::move(head), &want);
      }
    }
  }
  for (const auto& [name, want_values] : expected) {
    const std::vector<float>& want = *want_values;
    const auto it = run.parameters.find(name);
    if (it == run.parameters.end()) {
      problem("parameter " + name + " missing");
      continue;
    }
    if (it->second.size() != want.size()) {
      problem("parameter " + name + ": " + std::to_string(it->second.size()) +
              " elements; the reference has " + std::to_string(want.size()));
      continue;
    }
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double ratio = std::abs(static_cast<double>(it->second[i]) - want[i]) /
                           (kParameterRelative * std::abs(static_cast<double>(want[i])) + absolute);
      if (!(ratio <= worst)) {
        worst = std::isnan(ratio) ? HUGE_VAL : ratio;
        at = i;
      }
    }
    if (worst > report.worst_parameter) {
      report.worst_parameter = worst;
      report.worst_parameter_name = name;
    }
    if (worst > 1) {
      problem("parameter " + name + "[" + std::to_string(at) + "]: " + number(it->second[at]) +
              ", the reference " + number(want[at]));
    }
  }
  for (const auto& [name, values] : run.parameters) {
    const std::string_view base = std::string_view(name).starts_with(kStageCopyPrefix)
                                      ? std::string_view(name).substr(kStageCopyPrefix.size())
                                      : std::string_view(name);
    const bool tied_copy = setup.model.tied_embeddings && base == kTiedHeadCopy;
    if (!reference.parameters.contains(std::string(tied_copy ? kWordEmbeddings : base))) {
      problem("parameter " + name + " not in the model");
    }
  }
  return report;
}

}  // namespace metron::exec
