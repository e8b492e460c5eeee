// The sources' FLOPs formulas against a count built up from the layer's matrix products
// (Narayanan et al. SC'21 §3.5 / Appendix): per token and layer the forward multiplies by the QKV
// (3h²), projection (h²) and MLP (8h²) weights and forms scores and values (2·s·h), 2 FLOPs per
// multiply-add; the logits add 2·h·V per token.

#include "metron/validation/flops_formulas.h"

#include <gtest/gtest.h>

namespace metron::validation {
namespace {

/// One forward pass of the whole batch, summed matrix by matrix; `logits` adds the LM head.
double forward_flops(double b, double s, double l, double h, double v, bool logits) {
  const double per_token_layer = 2 * (3 * h * h + h * h + 8 * h * h) + 2 * (2 * s * h);
  return b * s * (l * per_token_layer + (logits ? 2 * h * v : 0));
}

TEST(FlopsFormulas, MegatronsModelFlopsAreThreeForwardPasses) {
  models::ModelSpec m{
      .name = "t", .layers = 24, .hidden = 2048, .heads = 16, .vocab = 131072, .seq_len = 4096};
  // Backward = 2 x forward; no recomputation.
  const double expected = 3 * forward_flops(192, 4096, 24, 2048, 131072, true);
  EXPECT_NEAR(step_flops(FlopsFormula::kMegatronModelFlops, m, 192, 4096), expected,
              expected * 1e-12);
}

TEST(FlopsFormulas, NarayanansEq3CountsTheRecomputedForwardButNotTheLogitsTwice) {
  models::ModelSpec m{
      .name = "t", .layers = 24, .hidden = 2304, .heads = 24, .vocab = 51200, .seq_len = 2048};
  // Full recomputation runs the layers' forward a second time; the LM head is not recomputed.
  const double expected = 4 * forward_flops(512, 2048, 24, 2304, 0, false) +
                          3 * forward_flops(512, 2048, 0, 2304, 51200, true);
  EXPECT_NEAR(step_flops(FlopsFormula::kNarayananEq3, m, 512, 2048), expected, expected * 1e-12);
}

TEST(FlopsFormulas, NamesRoundTripAndOthersAreRejected) {
  for (const FlopsFormula f : {FlopsFormula::kNarayananEq3, FlopsFormula::kMegatronModelFlops}) {
    EXPECT_EQ(parse_flops_formula(to_string(f)), f);
  }
  EXPECT_EQ(parse_flops_formula("6nd"), std::nullopt);
}

}  // namespace
}  // namespace metron::validation
