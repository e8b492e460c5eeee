#pragma once
// Well-known models by name, from their papers (sources in model_presets.cc):
//   GPT-3       gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b,
//               gpt3-175b
//   Megatron    megatron-1.7b, -3.6b, -7.5b, -18.4b, -39.1b, -76.1b, -145.6b, -310.1b, -529.6b,
//               megatron-1t (Narayanan et al. SC'21, Table 1)
//   MT-NLG      turing-530b
//   Llama       llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, llama3-405b

#include <span>
#include <string_view>

#include "metron/models/model_spec.h"

namespace metron::models {

/// Every preset, in the order listed above.
std::span<const ModelSpec> model_presets();

/// The preset called `name`. Throws InvalidConfig listing the names, with a "did you mean" hint
/// for a close one.
/// @code
///   const ModelSpec& gpt = model_preset("gpt3-175b");
/// @endcode
const ModelSpec& model_preset(std::string_view name);

}  // namespace metron::models
