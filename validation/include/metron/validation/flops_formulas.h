#pragma once
// The FLOPs formulas sources use to turn a step time into TFLOP/s or MFU. A prediction is compared
// on the source's own quantity, so the source's formula is applied to the predicted time, whatever
// metron itself counts. B is the global batch in sequences, s the sequence length, l layers, h the
// hidden size, V the vocabulary.

#include <cstdint>
#include <optional>
#include <string_view>

#include "metron/models/model_spec.h"

namespace metron::validation {

enum class FlopsFormula {
  /// Narayanan et al. SC'21 eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh). It assumes full activation
  /// recomputation, so it counts the forward twice (four passes of 2 FLOPs per multiply-add).
  kNarayananEq3,
  /// Megatron-LM's model FLOPs (its README's TFLOP/s and MFU): 72·B·s·l·h²·(1 + s/6h + V/12lh),
  /// forward and backward without recomputation.
  kMegatronModelFlops,
};

/// "narayanan-eq3", "megatron-model-flops".
std::string_view to_string(FlopsFormula formula) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<FlopsFormula> parse_flops_formula(std::string_view name) noexcept;

/// FLOPs of one step of `global_batch` sequences of `seq_len` tokens by `formula`, from the
/// model's layers, hidden size and vocabulary (the formulas know no other shape).
double step_flops(FlopsFormula formula, const models::ModelSpec& model, std::int64_t global_batch,
                  std::int64_t seq_len);

}  // namespace metron::validation
