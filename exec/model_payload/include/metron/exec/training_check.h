#pragma once
// The check of issue 21: whether a configuration trained the model exactly. A run records each
// step's microbatch losses and the parameters after its last step; the single-process reference
// trains the same model on the same data with the same optimizer; check_training compares the
// two within fp32 tolerance. Free of libtorch (the stages are behind gpt_stage.h's pimpl).
//
// Note [training check]:
//   - The reference: one GptStage holding the whole model; each step runs every microbatch's F
//     and B in order, each microbatch's loss entering the step's loss with 1/microbatches (the
//     mean over the step's microbatches), then AdamW (adam.h) on every parameter.
//   - Microbatch k of step t holds samples (t·microbatches + k)·microbatch_size onwards
//     (step_microbatch): every configuration draws the same data for the same microbatch.
//   - Tolerances, fp32 throughout. A configuration may sum each gradient in another order than
//     the reference (W apart from I, microbatches interleaved, buckets reduced over replicas),
//     so gradients may differ by the rounding of those sums. Losses: 1e-5 relative (a 2-stage
//     run with every W reversed agrees within 1e-6; a 1F1B pipeline is bitwise equal, as it sums
//     in the reference's order). Parameters: 1e-6 relative plus 1e-2·lr per step: Adam divides
//     each gradient by its running RMS, so a rounding difference δ in a small gradient g moves
//     its update by about lr·δ/|g|, up to the whole update (about lr) where g is no larger than
//     its rounding. Measured worst differences, at lr 1e-2: 8e-6 after 3 steps for a 2-stage
//     run with every W reversed; 2.1e-5 after 2 steps for 2 replicas reducing their gradient
//     sums (megatron-distopt, element 9904 of layers.2.mlp.fc2.weight of the default model of
//     `metron run --payload model`), 0.1 of the bound 2e-4. A wrong result flips whole updates:
//     a dropped bucket or a microbatch's activation sent to another's stage measured 2·lr per
//     step, 200 times the bound.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "metron/exec/adam.h"
#include "metron/exec/gpt_stage.h"

namespace metron::exec {

/// What trains, on what, how long.
struct TrainingSetup {
  GptConfig model;
  std::int64_t steps = 2;
  std::int64_t microbatches = 4;  ///< per step (per pipeline, all replicas together)
  AdamOptions adam{.lr = 1e-2, .weight_decay = 0.01};
};

/// Throws InvalidConfig naming the field when `setup` is not one the check runs (steps and
/// microbatches 1 to 10,000, a valid model and optimizer).
void validate(const TrainingSetup& setup);

/// Microbatch k of step t (Note [training check]).
MicrobatchData step_microbatch(const TrainingSetup& setup, std::int64_t step, std::int64_t k);

/// What a run trained.
struct TrainingRecord {
  std::vector<std::vector<float>> losses;                ///< [step][microbatch]
  std::map<std::string, std::vector<float>> parameters;  ///< after the last step, by name
};

/// What a TrainingRecord calls the parameters of a stage's second copy: DualPipe runs every
/// model stage twice, on ranks r and P-1-r (Note [stage copies] in sync/stage_copies.h), and the
/// check compares both copies with the reference.
inline constexpr std::string_view kStageCopyPrefix = "copy of ";

/// The parameters of `stages` by name, for a TrainingRecord. Names must not repeat.
std::map<std::string, std::vector<float>> parameters_by_name(const std::vector<GptStage*>& stages);

/// The single-process reference (Note [training check]).
TrainingRecord reference_training(const TrainingSetup& setup);

struct CheckReport {
  bool ok = true;
  double worst_loss = 0;       ///< the largest |Δloss| / tolerance
  double worst_parameter = 0;  ///< the largest |Δp| / tolerance
  std::string worst_parameter_name;
  std::vector<std::string> problems;  ///< what differs beyond tolerance, or is missing
};

/// Compares a run with the reference within Note [training check]'s tolerances.
CheckReport check_training(const TrainingRecord& run, const TrainingRecord& reference,
                           const TrainingSetup& setup);

}  // namespace metron::exec
