#pragma once
// `metron run --payload model` (issue 21): the model payload of a scenario, its built-in default
// scenario, and what the run trained against the single-process reference (--check). Only in
// metron-exec with the CPU backend: the model payload trains on libtorch CPU tensors.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metron/exec/cpu_run.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"

namespace metron::cli {

/// What `run --payload model` runs without a scenario: a 4-layer GPT of hidden 64 (vocabulary
/// 256, sequence 32, fp32) on 2 ranks, 1F1B, 4 microbatches of 2 samples, on cpu-local: a few
/// seconds per step with its reference on one core.
scenario::Scenario default_model_run_scenario();

/// The scenario as the model payload trains it: in fp32 (what the payload computes in, so the
/// graph's transfers carry its values). Returns whether the dtype changed.
bool train_in_fp32(scenario::Scenario& scenario);

/// The payload of `step` (built from `scenario`, in fp32): `steps` training steps from `seed`.
/// Throws InvalidConfig naming what the payload cannot run, before any process starts.
exec::ModelPayload model_payload_of(const scenario::Scenario& scenario, const scenario::Step& step,
                                    std::int64_t steps, std::uint64_t seed);

/// What a run trained, and with `check` how it compares with the single-process reference.
struct TrainingReport {
  std::string text;             ///< per step the mean loss (and the reference's), for stdout
  nlohmann::ordered_json json;  ///< the same, for the result JSON's "training"
  bool ok = true;               ///< false when `check` found a difference beyond tolerance
  std::string failure;          ///< the first difference, when !ok
};
TrainingReport training_report(const exec::ModelPayload& payload,
                               const std::vector<exec::RankRecord>& records, bool check);

}  // namespace metron::cli
