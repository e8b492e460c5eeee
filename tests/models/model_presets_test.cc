#include "metron/models/model_presets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "metron/base/error.h"
#include "metron/models/parameter_count.h"

namespace metron::models {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

struct PublishedSize {
  const char* name;
  double params;     // as published
  double tolerance;  // the rounding of the published figure
};

// The sizes the papers state, not our own counts.
constexpr PublishedSize kPublished[] = {
    // GPT-3 (Brown et al. 2020, Table 2.1) gives only the rounded size in each model's name.
    // "350M" is rounded to 50M (the shapes give 356M), hence its wider tolerance.
    {"gpt3-125m", 125e6, 0.5e6},
    {"gpt3-350m", 350e6, 10e6},
    {"gpt3-760m", 760e6, 5e6},
    {"gpt3-1.3b", 1.3e9, 0.05e9},
    {"gpt3-2.7b", 2.7e9, 0.05e9},
    {"gpt3-6.7b", 6.7e9, 0.05e9},
    {"gpt3-13b", 13e9, 0.5e9},
    {"gpt3-175b", 175e9, 0.5e9},
    // Narayanan et al. SC'21, Table 1, "number of parameters (billion)", one decimal.
    {"megatron-1.7b", 1.7e9, 0.1e9},
    {"megatron-3.6b", 3.6e9, 0.1e9},
    {"megatron-7.5b", 7.5e9, 0.1e9},
    {"megatron-18.4b", 18.4e9, 0.1e9},
    {"megatron-39.1b", 39.1e9, 0.1e9},
    {"megatron-76.1b", 76.1e9, 0.1e9},
    {"megatron-145.6b", 145.6e9, 0.1e9},
    {"megatron-310.1b", 310.1e9, 0.1e9},
    {"megatron-529.6b", 529.6e9, 0.1e9},
    {"megatron-1t", 1008.0e9, 0.1e9},
    // Smith et al. 2022 (MT-NLG): 530 billion.
    {"turing-530b", 530e9, 0.5e9},
    // Llama 2 (Touvron et al. 2023) and Llama 3 (Llama Team 2024): the papers round to the name;
    // the exact counts are those of the released checkpoints (their model cards: 6.74B, 13.0B,
    // 69.0B, 8.03B, 70.6B, 405.9B), tested exactly below.
    {"llama2-7b", 7e9, 0.5e9},
    {"llama2-13b", 13e9, 0.5e9},
    {"llama2-70b", 70e9, 1.5e9},
    {"llama3-8b", 8e9, 0.5e9},
    {"llama3-70b", 70e9, 1e9},
    {"llama3-405b", 405e9, 1e9},
    // Nemotron-4 15B and 340B technical reports: "3.2B embedding parameters and 12.5B
    // non-embedding parameters", "9.4 billion embedding parameters and 331.6 billion
    // non-embedding parameters", each rounded to 0.05B.
    {"nemotron4-15b", 15.7e9, 0.1e9},
    {"nemotron4-340b", 341.0e9, 0.1e9},
};

TEST(ModelPresets, ParameterCountsMatchThePublishedSizes) {
  for (const PublishedSize& row : kPublished) {
    const auto count = static_cast<double>(parameter_count(model_preset(row.name)));
    EXPECT_LE(std::abs(count - row.params), row.tolerance)
        << row.name << ": " << count << " parameters";
  }
}

// Parameter counts of the released Llama checkpoints (sum of tensor sizes in the published
// safetensors files), which the Llama shapes must reproduce exactly.
TEST(ModelPresets, LlamaCountsMatchTheReleasedCheckpoints) {
  EXPECT_EQ(parameter_count(model_preset("llama2-7b")), 6'738'415'616);
  EXPECT_EQ(parameter_count(model_preset("llama2-13b")), 13'015'864'320);
  EXPECT_EQ(parameter_count(model_preset("llama2-70b")), 68'976'648'192);
  EXPECT_EQ(parameter_count(model_preset("llama3-8b")), 8'030'261'248);
  EXPECT_EQ(parameter_count(model_preset("llama3-70b")), 70'553'706'496);
  EXPECT_EQ(parameter_count(model_preset("llama3-405b")), 405'853'388'800);
}

// SC'21 eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)); ours adds only the final norm.
TEST(ModelPresets, MegatronCountsFollowTheirEquationTwo) {
  const ModelSpec& spec = model_preset("megatron-1t");
  const std::int64_t l = spec.layers, h = spec.hidden;
  const std::int64_t eq2 = 12 * l * h * h + 13 * l * h + (spec.vocab + spec.seq_len) * h;
  EXPECT_EQ(parameter_count(spec), eq2 + 2 * h);
}

// The Nemotron-4 340B report splits its count: 9.4B embedding parameters (input and output
// embeddings, 2·256000·18432 = 9,437,184,000) and 331.6B in the 96 layers.
TEST(ModelPresets, Nemotron4SplitsItsParametersAsItsReportDoes) {
  const ModelSpec& spec = model_preset("nemotron4-340b");
  EXPECT_EQ(embedding_parameter_count(spec) * 2, 9'437'184'000);
  const auto layers = static_cast<double>(spec.layers * layer_parameter_count(spec));
  EXPECT_LE(std::abs(layers - 331.6e9), 0.05e9) << layers;
}

TEST(ModelPresets, EveryPresetIsPublishedAndValid) {
  std::set<std::string> names;
  for (const ModelSpec& spec : model_presets()) {
    EXPECT_NO_THROW(validate(spec)) << spec.name;
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
  }
  EXPECT_EQ(names.size(), std::size(kPublished));
  for (const PublishedSize& row : kPublished) EXPECT_TRUE(names.contains(row.name)) << row.name;
}

TEST(ModelPresets, EveryPresetRoundTripsThroughJson) {
  for (const ModelSpec& spec : model_presets()) {
    EXPECT_EQ(model_from_json(to_json(spec)), spec) << spec.name;
  }
}

TEST(ModelPresets, GroupedQueryAttentionWhereThePapersUseIt) {
  EXPECT_EQ(model_preset("llama2-7b").num_kv_heads(), 32);
  EXPECT_EQ(model_preset("llama2-70b").num_kv_heads(), 8);
  EXPECT_EQ(model_preset("llama3-8b").num_kv_heads(), 8);
  EXPECT_EQ(model_preset("gpt3-175b").num_kv_heads(), 96);
}

TEST(ModelPresets, UnknownNameListsThePresetsAndSuggestsACloseOne) {
  EXPECT_THAT([] { (void)model_preset("gpt3-175"); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("model preset: unknown name \"gpt3-175\"; expected one of "
                                  "gpt3-125m, gpt3-350m,"),
                        HasSubstr("nemotron4-340b; did you mean \"gpt3-175b\""))));
}

TEST(ModelPresets, UnknownFarNameGetsNoSuggestion) {
  EXPECT_THAT([] { (void)model_preset("bert-large"); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("unknown name \"bert-large\""), Not(HasSubstr("did you mean")))));
}

}  // namespace
}  // namespace metron::models
