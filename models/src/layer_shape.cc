#include "metron/models/layer_shape.h"

namespace metron::models {

LayerShape layer_shape(const ModelSpec& model, const ParallelSpec& spec) {
  return {.batch = spec.microbatch_size,
          .seq = spec.sequence_length(model),
          .tp = spec.tp,
          .cp = spec.cp,
          .ep = spec.ep,
          .sequence_parallel = spec.sp(),
          .fused_attention = spec.attention == AttentionKernel::kFused,
          .fp8 = spec.fp8};
}

}  // namespace metron::models
