// The model payload's GPT for a metron model (gpt_of_model.h): its stages hold exactly the
// parameters metron's memory model counts for their pipeline ranks (models::rank_parameters,
// an independent count from the model's formulas), for even, interleaved and uneven splits.

#include "metron/exec/gpt_of_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/memory_model.h"
#include "metron/models/parameter_tensors.h"

namespace metron::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// Eight GPT layers, a vocabulary of 100 that Megatron pads to 128.
models::ModelSpec small_gpt() {
  return models::ModelSpec{.name = "small-gpt",
                           .layers = 8,
                           .hidden = 32,
                           .heads = 4,
                           .vocab = 100,
                           .seq_len = 16,
                           .dtype = models::Precision::kFp32};
}

/// Each pipeline rank's parameters as the payload's stages hold them (stage s on rank s mod pp).
std::vector<std::int64_t> payload_rank_parameters(const models::ModelSpec& model,
                                                  const models::ParallelSpec& parallel) {
  const GptConfig config = gpt_config_of(model, parallel, 1);
  std::vector<std::int64_t> out(static_cast<std::size_t>(parallel.pp), 0);
  const std::vector<StageSlice> slices = stage_slices(model, parallel);
  for (std::size_t s = 0; s < slices.size(); ++s) {
    GptStage stage(config, slices[s]);
    out[s % out.size()] += static_cast<std::int64_t>(stage.flat_parameters().size());
  }
  return out;
}

TEST(GptOfModel, StagesHoldWhatTheMemoryModelCountsForTheirRanks) {
  const models::ModelSpec model = small_gpt();
  std::vector<models::ParallelSpec> configurations{
      {.pp = 1}, {.pp = 2}, {.pp = 4, .vp = 2}, {.pp = 3, .first_stage_layers = 2}};
  for (const models::ParallelSpec& parallel : configurations) {
    const std::vector<std::int64_t> got = payload_rank_parameters(model, parallel);
    for (std::int64_t r = 0; r < parallel.pp; ++r) {
      EXPECT_EQ(got[static_cast<std::size_t>(r)], models::rank_parameters(model, parallel, r).dense)
          << "pp " << parallel.pp << " vp " << parallel.vp << " rank " << r;
    }
  }
  const GptConfig config = gpt_config_of(model, {}, 1);
  EXPECT_EQ(config.vocab, 128);
  EXPECT_EQ(config.ffn_hidden, 128);
}

// The payload's layout is what the sync policies bucket: models::parameter_tensors' tensors, by
// name, size and order, chunk by chunk (written apart from the payload, from the model's formulas).
TEST(GptOfModel, EachStageLaysOutTheTensorsTheSyncPoliciesBucket) {
  const models::ModelSpec model = small_gpt();
  const models::ParallelSpec parallel{.pp = 4, .vp = 2};
  const GptConfig config = gpt_config_of(model, parallel, 1);
  for (const StageSlice& slice : stage_slices(model, parallel)) {
    const GptStage stage(config, slice);
    const std::vector<models::ParameterTensor> expected =
        models::parameter_tensors(model, parallel, slice.first_layer,
                                  slice.first_layer + slice.layers, slice.first, slice.last);
    const std::vector<ParameterSlot>& layout = stage.parameter_layout();
    ASSERT_EQ(layout.size(), expected.size()) << "layers from " << slice.first_layer;
    for (std::size_t i = 0; i < layout.size(); ++i) {
      EXPECT_EQ(layout[i].name, expected[i].name);
      EXPECT_EQ(layout[i].numel, expected[i].numel) << expected[i].name;
    }
  }
}

TEST(GptOfModel, SlicesFollowTheSplitInModelOrder) {
  const std::vector<StageSlice> slices =
      stage_slices(small_gpt(), {.pp = 3, .first_stage_layers = 2});
  ASSERT_EQ(slices.size(), 3U);
  EXPECT_EQ(slices[0].first_layer, 0);
  EXPECT_EQ(slices[0].layers, 2);
  EXPECT_EQ(slices[1].first_layer, 2);
  EXPECT_EQ(slices[1].layers, 3);
  EXPECT_EQ(slices[2].first_layer, 5);
  EXPECT_EQ(slices[2].layers, 3);
  EXPECT_TRUE(slices[0].first && !slices[0].last);
  EXPECT_TRUE(!slices[1].first && !slices[1].last);
  EXPECT_TRUE(!slices[2].first && slices[2].last);
}

TEST(GptOfModel, TiedEmbeddingsStayTied) {
  models::ModelSpec tied = small_gpt();
  tied.tied_embeddings = true;
  EXPECT_TRUE(gpt_config_of(tied, {}, 1).tied_embeddings);
  EXPECT_FALSE(gpt_config_of(small_gpt(), {}, 1).tied_embeddings);
}

TEST(GptOfModel, RefusesWhatThePayloadCannotBuildByName) {
  models::ModelSpec swiglu = small_gpt();
  swiglu.mlp = models::MlpKind::kSwiglu;
  EXPECT_THAT([&] { gpt_config_of(swiglu, {}, 1); },
              ThrowsMessage<InvalidConfig>(HasSubstr("its MLP is not \"gelu\"")));
  models::ModelSpec grouped = small_gpt();
  grouped.kv_heads = 2;
  EXPECT_THAT([&] { gpt_config_of(grouped, {}, 1); },
              ThrowsMessage<InvalidConfig>(HasSubstr("kv_heads 2")));
  EXPECT_THAT([&] { gpt_config_of(small_gpt(), {.tp = 2}, 1); },
              ThrowsMessage<InvalidConfig>(HasSubstr("tp 2, cp 1, ep 1")));
  EXPECT_THAT([&] { stage_slices(small_gpt(), {.pp = 3}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("divisible")));
}

}  // namespace
}  // namespace metron::exec
