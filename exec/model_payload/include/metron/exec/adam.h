#pragma once
// The optimizer step the model payload trains with (issue 21), kept free of libtorch so that a
// policy can run it on any flat shard of parameters: Adam with decoupled weight decay (AdamW),
// what Megatron-LM's optimizer (apex/TE FusedAdam, adam_w_mode) computes, element by element:
//
//   p ← p − lr·wd·p;  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²
//   p ← p − lr · (m / (1 − β1^t)) / (√(v / (1 − β2^t)) + ε)       t = step, counted from 1
//
// Each element depends only on its own p, g, m and v, so a shard stepped on its own ends exactly
// as the same elements of the whole buffer do: the distributed optimizer's correctness rests on
// that.

#include <cstdint>
#include <span>

namespace metron::exec {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

/// One step over equal-length spans. Throws InvalidConfig for unequal lengths, step < 1, or
/// options outside lr ≥ 0, 0 ≤ β < 1, ε > 0, wd ≥ 0.
void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
               std::span<float> exp_avg_sq, std::int64_t step, const AdamOptions& options);

}  // namespace metron::exec
