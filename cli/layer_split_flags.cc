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
}

void apply_layer_split(const LayerSplitFlags& o, models::ParallelSpec& p) {
  // Note [uneven stages]: a split given on the command line replaces the file's, of either form.
  if (o.pipeline_layers && (o.first_stage_layers || o.last_stage_layers)) {
    throw InvalidConfig(
        "--pipeline-layers and --first-stage-layers/--last-stage-layers: expected one way to split "
        "the layers, got both");
  }
  if (o.pipeline_layers) {
    p.pipeline_layers = parse_int64_list("--pipeline-layers", *o.pipeline_layers);
    p.first_stage_layers.reset();
    p.last_stage_layers.reset();
  }
  if (o.first_stage_layers || o.last_stage_layers) p.pipeline_layers.clear();
  if (o.first_stage_layers) p.first_stage_layers = *o.first_stage_layers;
  if (o.last_stage_layers) p.last_stage_layers = *o.last_stage_layers;
}

}  // namespace metron::cli
