#pragma once
// The steps the Chakra tests export, shared by chakra_tests and the driver that writes files for
// the Python reader (read_chakra.py): pipelines with point-to-point transfers, an interleaved
// one, and a model with tensor- and data-parallel collectives and ZeRO-3's host waits.

#include <string>
#include <vector>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"

namespace metron::chakra::testing {

struct NamedStep {
  std::string name;
  scenario::Step step;
};

inline scenario::Scenario explicit_costs(const std::string& schedule, int pp, int vp, int m) {
  scenario::Scenario s = scenario::scenario_from_json(
      R"({"parallel": {"pp": )" + std::to_string(pp) + R"(, "num_microbatches": )" +
          std::to_string(m) + R"(}, "schedule": {"name": ")" + schedule +
          R"(", "p2p": "async"}, "costs": {"F": 1, "B": 2.0004, "p2p": 0.25}})",
      "chakra-test.json");
  s.parallel.vp = vp;
  return s;
}

/// gpt3-125m with tp = pp = dp = 2 and ZeRO-3: tp and dp collectives, and host waits.
inline scenario::Scenario model_zero3() {
  scenario::Scenario s;
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("dgx-a100");
  s.parallel = {
      .tp = 2, .pp = 2, .dp = 2, .microbatch_size = 1, .num_microbatches = 4, .seq_len = 512};
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = *sync::parse_sync_policy("zero3")};
  return s;
}

inline std::vector<NamedStep> chakra_steps() {
  std::vector<NamedStep> steps;
  steps.push_back({"1f1b-pp3", scenario::build_step(explicit_costs("1f1b", 3, 1, 4))});
  steps.push_back({"1f1b-pp4", scenario::build_step(explicit_costs("1f1b", 4, 1, 6))});
  steps.push_back(
      {"interleaved-pp2-vp2", scenario::build_step(explicit_costs("interleaved-1f1b", 2, 2, 4))});
  steps.push_back(
      {"gpt-tp2-pp2-dp2-zero3", scenario::build_step(model_zero3(), scenario::Replication::kFull)});
  return steps;
}

}  // namespace metron::chakra::testing
