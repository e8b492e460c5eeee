#pragma once
// The model payload's GPT (gpt_stage.h) for a metron model and parallel configuration: the
// config of the model a scenario names and the slice of it each pipeline stage holds, so that the
// stages hold exactly the parameters metron's memory model counts for their ranks (the data-
// parallel buckets of the step's sync policy are sized from those counts).
//
// Only what the payload builds is accepted: a "gelu" model (learned positions, LayerNorms and
// linear biases), dense, multi-head attention, tp 1 (tensor parallelism would split the linears;
// the payload does not yet). Tied embeddings are tied as the model says (Note [gpt stage]). The
// vocabulary is Megatron's padded one (the padded rows train as any other row the data never
// names).

#include <cstdint>
#include <span>
#include <vector>

#include "metron/exec/gpt_stage.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::exec {

/// Throws InvalidConfig naming what the payload cannot build.
GptConfig gpt_config_of(const models::ModelSpec& model, const models::ParallelSpec& parallel,
                        std::uint64_t seed);

/// The slice of each of the pp·vp model stages, in model order; `stage_ranks` places them as
/// models::model_stage_layers takes it (empty: Megatron's looped placement). Throws
/// InvalidConfig as gpt_config_of and model_stage_layers do.
std::vector<StageSlice> stage_slices(const models::ModelSpec& model,
                                     const models::ParallelSpec& parallel,
                                     std::span<const std::int32_t> stage_ranks = {});

}  // namespace metron::exec
