#include "metron/validation/validation.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "metron/base/error.h"
#include "metron/scenario/evaluation.h"

namespace metron::validation {

double predicted_quantity(PublishedQuantity quantity, double iteration_time_s, double flops,
                          std::int64_t gpus, double peak_flops, double tokens) {
  const double per_gpu = flops / iteration_time_s / static_cast<double>(gpus);
  switch (quantity) {
    case PublishedQuantity::kTflopsPerGpu:
      return per_gpu / 1e12;
    case PublishedQuantity::kMfu:
      return per_gpu / peak_flops;
    case PublishedQuantity::kIterationTime:
      return iteration_time_s;
    case PublishedQuantity::kTokensPerGpu:
      return tokens / iteration_time_s / static_cast<double>(gpus);
  }
  return 0;
}

CaseOutcome validate_case(const PublishedCase& c) {
  CaseOutcome out{.published_case = &c};
  if (!c.scenario) {
    out.failure = "not expressible: " + c.unsupported;
    return out;
  }
  scenario::Evaluation e;
  try {
    e = scenario::evaluate(*c.scenario);
  } catch (const Error& error) {
    out.failure = std::string("cannot simulate: ") + error.what();
    return out;
  }
  const scenario::Scenario& s = e.scenario;
  const models::ParallelSpec& p = s.parallel;
  out.iteration_time_s = e.iteration_time_s;
  out.bubble_fraction = e.bubble_fraction;
  out.exposed_comm_fraction = e.exposed_comm_fraction;
  out.hbm_capacity = s.hardware.gpu.hbm_capacity;
  if (!e.peak_memory_bytes.empty()) {
    out.peak_memory_bytes = *std::ranges::max_element(e.peak_memory_bytes);
  }
  double flops = 0;
  double peak = 0;
  double tokens = 0;
  // The formulas count the sequences of the whole step: microbatches of every replica.
  const std::int64_t global_batch = p.microbatches().value_or(0) * p.microbatch_size * p.dp;
  if (c.published.flops) {
    flops = step_flops(*c.published.flops, *s.model, global_batch, p.sequence_length(*s.model));
  }
  if (c.published.quantity == PublishedQuantity::kTokensPerGpu) {
    tokens = static_cast<double>(global_batch) * static_cast<double>(p.sequence_length(*s.model));
  }
  if (c.published.quantity == PublishedQuantity::kMfu) {
    if (c.published.peak_tflops) {
      peak = *c.published.peak_tflops * 1e12;
    } else if (const auto gpu_peak = s.hardware.gpu.peak(s.model->dtype)) {
      peak = *gpu_peak;
    } else {
      out.failure =
          "cannot compute an MFU: the GPU has no peak at the model's dtype and the "
          "case gives no published.peak_tflops";
      return out;
    }
  }
  out.predicted =
      predicted_quantity(c.published.quantity, e.iteration_time_s, flops, p.gpus(), peak, tokens);
  out.error = (*out.predicted - c.published.value) / c.published.value;
  return out;
}

std::vector<GroupSummary> summarize(const std::vector<CaseOutcome>& outcomes) {
  std::vector<GroupSummary> groups;
  GroupSummary all{.group = "all"};
  const auto add = [](GroupSummary& g, const CaseOutcome& o) {
    if (!o.predicted) {
      ++g.failed;
      return;
    }
    ++g.cases;
    g.mean_abs_error += std::abs(o.error);
    g.mean_error += o.error;
  };
  for (const CaseOutcome& o : outcomes) {
    const std::string& name = o.published_case->group;
    auto it = std::ranges::find(groups, name, &GroupSummary::group);
    if (it == groups.end()) it = groups.insert(groups.end(), GroupSummary{.group = name});
    add(*it, o);
    add(all, o);
  }
  groups.push_back(all);
  for (GroupSummary& g : groups) {
    if (g.cases == 0) continue;
    g.mean_abs_error /= static_cast<double>(g.cases);
    g.mean_error /= static_cast<double>(g.cases);
  }
  return groups;
}

std::string validation_json(const std::vector<CaseOutcome>& outcomes,
                            const std::vector<GroupSummary>& groups) {
  using Json = nlohmann::ordered_json;
  Json cases = Json::array();
  for (const CaseOutcome& o : outcomes) {
    const PublishedCase& c = *o.published_case;
    Json j;
    j["id"] = c.id;
    j["group"] = c.group;
    j["source"] = {{"title", c.source.title}, {"ref", c.source.ref}, {"url", c.source.url}};
    j["quantity"] = to_string(c.published.quantity);
    j["flops"] = c.published.flops ? Json(to_string(*c.published.flops)) : Json(nullptr);
    j["published"] = c.published.value;
    j["predicted"] = o.predicted ? Json(*o.predicted) : Json(nullptr);
    j["error"] = o.predicted ? Json(o.error) : Json(nullptr);
    j["failure"] = o.failure.empty() ? Json(nullptr) : Json(o.failure);
    j["iteration_time_s"] = o.iteration_time_s;
    j["bubble_fraction"] = o.bubble_fraction;
    j["exposed_comm_fraction"] = o.exposed_comm_fraction;
    j["peak_memory_bytes"] = o.peak_memory_bytes;
    j["hbm_capacity_bytes"] = o.hbm_capacity;
    j["settings_from"] = c.settings_from;
    j["assumed"] = c.assumed;
    j["not_modelled"] = c.not_modelled;
    cases.push_back(std::move(j));
  }
  Json summary = Json::array();
  for (const GroupSummary& g : groups) {
    summary.push_back({{"group", g.group},
                       {"cases", g.cases},
                       {"failed", g.failed},
                       {"mean_abs_error", g.mean_abs_error},
                       {"mean_error", g.mean_error}});
  }
  Json root;
  root["cases"] = std::move(cases);
  root["groups"] = std::move(summary);
  return root.dump(1) + "\n";
}

}  // namespace metron::validation
