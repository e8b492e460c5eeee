#include "layer_split_flags.h"

#include "list_flags.h"
#include "metron/base/error.h"

namespace metron::cli {

void add_layer_split_flags(CLI::App& cmd, LayerSplitFlags& o) {
  cmd.add_option("--first-stage-layers", o.first_stage_layers,
                 "layers of the first pipeline rank, the rest split evenly (Megatron's\n"
                 "--decoder-first-pipeline-num-layers)");
  cmd.add_option("--last-stage-layers", o.last_stage_layers,
                 "layers of the last pipeline rank (Megatron's\n"
                 "--decoder-last-pipeline-num-layers)");
  cmd.add_option("--pipeline-layers", o.pipeline_layers,
                 "every pipeline rank's layers, e.g. 8,8,8,6 (pp counts adding up to the\n"
                 "model's layers, each divisible by vp); replaces --first/--last-stage-layers");
  cmd.add_flag("--account-for-embedding-in-pipeline-split", o.account_for_embedding,
               "Megatron's: the embedding counts as a layer of the first virtual stage, which\n"
               "holds one layer less ((layers + 1 [+ 1]) / (pp·vp) per virtual stage)");
  cmd.add_flag("--account-for-loss-in-pipeline-split", o.account_for_loss,
               "Megatron's: the loss counts as a layer of the last virtual stage, which holds\n"
               "one layer less");
}

void apply_layer_split(const LayerSplitFlags& o, models::ParallelSpec& p) {
  // Note [uneven stages]: a split given on the command line replaces the file's, of any form.
  const bool edges = o.first_stage_layers || o.last_stage_layers;
  const bool accounted = o.account_for_embedding || o.account_for_loss;
  if (static_cast<int>(edges) + static_cast<int>(o.pipeline_layers.has_value()) +
          static_cast<int>(accounted) >
      1) {
    throw InvalidConfig(
        "--pipeline-layers, --first-stage-layers/--last-stage-layers and "
        "--account-for-embedding/loss-in-pipeline-split: expected one way to split the layers, "
        "got two");
  }
  if (!edges && !o.pipeline_layers && !accounted) return;
  // A first or last count alone keeps the spec's other edge count; the other forms go.
  if (!edges) {
    p.first_stage_layers.reset();
    p.last_stage_layers.reset();
  }
  p.pipeline_layers.clear();
  p.account_for_embedding_in_pipeline_split = o.account_for_embedding;
  p.account_for_loss_in_pipeline_split = o.account_for_loss;
  if (o.pipeline_layers) {
    p.pipeline_layers = parse_int64_list("--pipeline-layers", *o.pipeline_layers);
  }
  if (o.first_stage_layers) p.first_stage_layers = *o.first_stage_layers;
  if (o.last_stage_layers) p.last_stage_layers = *o.last_stage_layers;
}

}  // namespace metron::cli
