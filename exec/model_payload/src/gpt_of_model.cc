// What gpt_of_model.h says.

#include "metron/exec/gpt_of_model.h"

#include <string>

#include "metron/base/error.h"
#include "metron/models/stage_cost_model.h"

namespace metron::exec {

GptConfig gpt_config_of(const models::ModelSpec& model, const models::ParallelSpec& parallel,
                        std::uint64_t seed) {
  models::validate(model);
  const std::string where = "model payload: model \"" + model.name + "\": ";
  const auto refuse = [&](const std::string& what) { throw InvalidConfig(where + what); };
  if (model.mlp != models::MlpKind::kGelu) {
    refuse(
        "its MLP is not \"gelu\"; the payload builds GPT layers (GeLU MLP, LayerNorms, "
        "learned positions, biases)");
  }
  if (model.moe) refuse("mixture of experts; the payload builds dense layers");
  if (model.kv_heads && *model.kv_heads != model.heads) {
    refuse("grouped-query attention (kv_heads " + std::to_string(*model.kv_heads) +
           "); the payload builds multi-head attention");
  }
  if (parallel.tp != 1 || parallel.cp != 1 || parallel.ep != 1) {
    refuse("tp " + std::to_string(parallel.tp) + ", cp " + std::to_string(parallel.cp) + ", ep " +
           std::to_string(parallel.ep) + "; the payload runs tp = cp = ep = 1");
  }
  GptConfig out{.vocab = model.vocab_per_rank(1),
                .hidden = model.hidden,
                .heads = model.heads,
                .layers = model.layers,
                .ffn_hidden = model.ffn_hidden.value_or(4 * model.hidden),
                .seq_len = parallel.sequence_length(model),
                .microbatch_size = parallel.microbatch_size,
                .seed = seed,
                .tied_embeddings = model.tied_embeddings};
  validate(out);
  return out;
}

std::vector<StageSlice> stage_slices(const models::ModelSpec& model,
                                     const models::ParallelSpec& parallel,
                                     std::span<const std::int32_t> stage_ranks) {
  const GptConfig config = gpt_config_of(model, parallel, 0);
  const std::vector<std::int64_t> layers = models::model_stage_layers(model, parallel, stage_ranks);
  std::vector<StageSlice> out;
  std::int64_t first = 0;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    out.push_back({.first_layer = first,
                   .layers = layers[s],
                   .first = s == 0,
                   .last = s + 1 == layers.size()});
    first += layers[s];
  }
  METRON_ASSERT(first == config.layers, "model payload: the stages hold " + std::to_string(first) +
                                            " layers of " + std::to_string(config.layers));
  return out;
}

}  // namespace metron::exec
