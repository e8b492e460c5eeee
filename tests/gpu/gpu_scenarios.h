#pragma once
// The GPU tests' workload: a small GPT on one H100-class rank, tasks of tens of microseconds that
// list every operation kind.

#include <cstdint>
#include <string>

#include "metron/models/hardware_presets.h"
#include "metron/scenario/scenario.h"

namespace metron::testing {

inline scenario::Scenario one_gpu_scenario(const std::string& schedule, std::int64_t vp = 1) {
  scenario::Scenario s;
  s.model = {.name = "gpu-test",
             .layers = 4,
             .hidden = 1024,
             .heads = 16,
             .vocab = 32000,
             .seq_len = 1024};
  s.hardware = models::hardware_preset("dgx-h100");
  s.parallel = {.tp = 1, .pp = 1, .dp = 1, .microbatch_size = 1, .seq_len = 1024};
  s.parallel.vp = vp;
  s.parallel.num_microbatches = 4;
  s.schedule = {.name = schedule};
  return s;
}

}  // namespace metron::testing
