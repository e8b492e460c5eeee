#pragma once
// What one rank computes and stores for one microbatch of one transformer layer: the model's sizes
// cut by the parallel sizes. Shared by the compute cost model and the memory model, so the two
// always agree on b, s, t, sp and cp.

#include <cstdint>

#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// The per-rank slice of a layer (docs/SCHEDULES.md / Korthikanti et al. notation in comments).
struct LayerShape {
  std::int64_t batch = 1;           ///< b: microbatch size
  std::int64_t seq = 1;             ///< s: full sequence length (cp splits it: seq / cp per rank)
  std::int64_t tp = 1;              ///< t: tensor-parallel size
  std::int64_t cp = 1;              ///< context-parallel size
  std::int64_t ep = 1;              ///< expert-parallel size
  bool sequence_parallel = false;   ///< norms, dropout and residuals split over t (t > 1 only)
  bool fused_attention = false;     ///< one flash-style kernel, no s×s tensors in memory
  Fp8Recipe fp8 = Fp8Recipe::kOff;  ///< the linear GEMMs in FP8 (Note [fp8 training])

  /// Tokens of this rank's sequence slice: b · s / cp.
  [[nodiscard]] std::int64_t tokens() const { return batch * seq / cp; }

  friend bool operator==(const LayerShape&, const LayerShape&) = default;
};

/// The shape a ParallelSpec gives `model`'s layers: b = microbatch_size, s = sequence_length,
/// sequence_parallel = spec.sp(), fused_attention = spec.attention is fused, fp8 = spec.fp8.
LayerShape layer_shape(const ModelSpec& model, const ParallelSpec& spec);

}  // namespace metron::models
