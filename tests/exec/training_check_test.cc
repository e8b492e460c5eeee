// The check of issue 21 (Note [training check] in metron/exec/training_check.h): a pipeline of
// three stages running 1F1B trains as the single-process reference, the check passes it, and
// it fails the deliberately broken variants the issue names: a microbatch's activation sent to
// another microbatch's stage, and a dropped gradient bucket (one of Megatron's, by
// sync::megatron_buckets over the stage's tensors).

#include "metron/exec/training_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/sync/bucketing.h"

namespace metron::exec {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TrainingSetup setup() {
  return TrainingSetup{.model = {.vocab = 64,
                                 .hidden = 32,
                                 .heads = 4,
                                 .layers = 6,
                                 .seq_len = 16,
                                 .microbatch_size = 2,
                                 .seed = 11},
                       .steps = 3,
                       .microbatches = 6};
}

enum class Breakage { kNone, kSwappedActivation, kDroppedBucket };

/// One rank's 1F1B order: min(p − s − 1, m) warm-up forwards, then one forward and one
/// backward at a time, then the remaining backwards. (true, k): F of microbatch k.
std::deque<std::pair<bool, std::int64_t>> one_f_one_b(std::int64_t p, std::int64_t s,
                                                      std::int64_t m) {
  std::deque<std::pair<bool, std::int64_t>> out;
  const std::int64_t warmup = std::min(p - s - 1, m);
  std::int64_t f = 0;
  std::int64_t b = 0;
  for (; f < warmup; ++f) out.emplace_back(true, f);
  for (; f < m; ++f, ++b) {
    out.emplace_back(true, f);
    out.emplace_back(false, b);
  }
  for (; b < m; ++b) out.emplace_back(false, b);
  return out;
}

/// Three stages (2 + 2 + 2 layers) in one process, each walking its 1F1B order as far as the
/// activations and gradients it has received allow, then AdamW on each stage.
TrainingRecord pipeline_run(const TrainingSetup& s, Breakage breakage) {
  const std::int64_t p = 3;
  std::vector<GptStage> stages;
  for (std::int64_t i = 0; i < p; ++i) {
    stages.emplace_back(
        s.model,
        StageSlice{.first_layer = 2 * i, .layers = 2, .first = i == 0, .last = i == p - 1});
  }
  std::vector<std::vector<float>> exp_avg;
  std::vector<std::vector<float>> exp_avg_sq;
  for (GptStage& stage : stages) {
    exp_avg.emplace_back(stage.flat_parameters().size());
    exp_avg_sq.emplace_back(stage.flat_parameters().size());
  }
  const std::vector<float> factor{1.0F / static_cast<float>(s.microbatches)};
  TrainingRecord out;
  for (std::int64_t t = 0; t < s.steps; ++t) {
    std::vector<float>& losses = out.losses.emplace_back(s.microbatches);
    // What each stage has received: activations from the stage before, gradients from after.
    std::vector<std::map<std::int64_t, std::vector<float>>> activations(p);
    std::vector<std::map<std::int64_t, std::vector<float>>> gradients(p);
    std::vector<std::deque<std::pair<bool, std::int64_t>>> orders;
    for (std::int64_t i = 0; i < p; ++i) orders.push_back(one_f_one_b(p, i, s.microbatches));
    bool progressed = true;
    while (progressed) {
      progressed = false;
      for (std::int64_t i = 0; i < p; ++i) {
        auto& order = orders[static_cast<std::size_t>(i)];
        if (order.empty()) continue;
        const auto [forward, k] = order.front();
        GptStage& stage = stages[static_cast<std::size_t>(i)];
        const MicrobatchData data = step_microbatch(s, t, k);
        if (forward) {
          auto& inbox = activations[static_cast<std::size_t>(i)];
          if (i > 0 && !inbox.contains(k)) continue;
          const std::vector<float> result = stage.forward(
              k, {.tokens = data.tokens,
                  .activation = i > 0 ? std::span<const float>(inbox[k]) : std::span<const float>(),
                  .labels = data.labels});
          if (i == p - 1) {
            losses[static_cast<std::size_t>(k)] = result[0];
          } else {
            // The broken variant sends microbatch 1's output as microbatch 2's and back.
            std::int64_t to = k;
            if (breakage == Breakage::kSwappedActivation && t == 0 && i == 0 && k <= 2 && k >= 1) {
              to = 3 - k;
            }
            activations[static_cast<std::size_t>(i + 1)][to] = result;
          }
        } else {
          auto& inbox = gradients[static_cast<std::size_t>(i)];
          if (i < p - 1 && !inbox.contains(k)) continue;
          const std::vector<float> grad =
              stage.backward(k, i < p - 1 ? std::span<const float>(inbox[k]) : factor);
          if (i > 0) gradients[static_cast<std::size_t>(i - 1)][k] = grad;
        }
        order.pop_front();
        progressed = true;
      }
    }
    for (const auto& order : orders) EXPECT_TRUE(order.empty()) << "the 1F1B walk stalled";
    for (std::size_t i = 0; i < stages.size(); ++i) {
      GptStage& stage = stages[i];
      if (breakage == Breakage::kDroppedBucket && t == 0 && i == 1) {
        // Megatron's buckets of this chunk at 4,096 elements; bucket 1's gradients never arrive.
        std::vector<sync::ParamTensor> tensors;
        for (const ParameterSlot& slot : stage.parameter_layout()) {
          tensors.push_back({.name = slot.name, .numel = slot.numel});
        }
        const std::vector<sync::Bucket> buckets = sync::megatron_buckets(tensors, 4096, 1, false);
        EXPECT_GE(buckets.size(), 3U);
        for (const std::int32_t member : buckets.at(1).tensors) {
          const ParameterSlot& slot = stage.parameter_layout()[static_cast<std::size_t>(member)];
          std::fill_n(stage.flat_gradients().begin() + slot.offset, slot.numel, 0.0F);
        }
      }
      adam_step(stage.flat_parameters(), stage.flat_gradients(), exp_avg[i], exp_avg_sq[i], t + 1,
                s.adam);
      stage.zero_gradients();
    }
  }
  std::vector<GptStage*> all;
  for (GptStage& stage : stages) all.push_back(&stage);
  out.parameters = parameters_by_name(all);
  return out;
}

TEST(TrainingCheck, APipelineRunningOneFOneBTrainsAsTheReference) {
  const TrainingSetup s = setup();
  const TrainingRecord reference = reference_training(s);
  const CheckReport report = check_training(pipeline_run(s, Breakage::kNone), reference, s);
  EXPECT_TRUE(report.ok) << ::testing::PrintToString(report.problems);
  EXPECT_LE(report.worst_loss, 1.0);
  EXPECT_LE(report.worst_parameter, 1.0);
  RecordProperty("worst_loss", ::testing::PrintToString(report.worst_loss));
  RecordProperty("worst_parameter", ::testing::PrintToString(report.worst_parameter));
}

TEST(TrainingCheck, FailsAMicrobatchWhoseActivationWentToAnother) {
  const TrainingSetup s = setup();
  const CheckReport report =
      check_training(pipeline_run(s, Breakage::kSwappedActivation), reference_training(s), s);
  EXPECT_FALSE(report.ok);
  EXPECT_GT(report.worst_loss, 100.0);
  EXPECT_THAT(::testing::PrintToString(report.problems), HasSubstr("step 0 microbatch 1: loss"));
}

TEST(TrainingCheck, FailsADroppedGradientBucket) {
  const TrainingSetup s = setup();
  const CheckReport report =
      check_training(pipeline_run(s, Breakage::kDroppedBucket), reference_training(s), s);
  EXPECT_FALSE(report.ok);
  EXPECT_GT(report.worst_parameter, 100.0);
  EXPECT_THAT(report.worst_parameter_name, HasSubstr("layers."));
}

TEST(TrainingCheck, ComparesWithinItsTolerancesAndNamesWhatDiffers) {
  TrainingSetup s = setup();
  TrainingRecord reference{.losses = {{4.0F, 4.5F}},
                           .parameters = {{"a", {1.0F, -2.0F}}, {"b", {0.5F}}}};
  EXPECT_TRUE(check_training(reference, reference, s).ok);
  EXPECT_EQ(check_training(reference, reference, s).worst_parameter, 0.0);

  // Within: a loss 1e-6 relative off; a parameter 1e-6·|p| + 0.5·(1e-2·lr·steps) off.
  TrainingRecord close = reference;
  close.losses[0][1] = 4.5F * (1 + 1e-6F);
  close.parameters["a"][1] = -2.0F - static_cast<float>(1e-6 * 2 + 0.5 * 1e-2 * 1e-2);
  EXPECT_TRUE(check_training(close, reference, s).ok);

  TrainingRecord off = reference;
  off.losses[0][0] = 4.001F;
  off.parameters["b"][0] = 0.5F + 1e-3F;
  const CheckReport report = check_training(off, reference, s);
  EXPECT_FALSE(report.ok);
  EXPECT_THAT(::testing::PrintToString(report.problems),
              AllOf(HasSubstr("step 0 microbatch 0: loss 4.00099993, the reference 4"),
                    HasSubstr("parameter b[0]")));
  EXPECT_EQ(report.worst_parameter_name, "b");

  TrainingRecord missing = reference;
  missing.parameters.erase("a");
  missing.parameters["c"] = {0.0F};
  missing.losses.push_back({4.0F});
  EXPECT_THAT(::testing::PrintToString(check_training(missing, reference, s).problems),
              AllOf(HasSubstr("losses of 2 steps; the reference has 1"),
                    HasSubstr("parameter a missing"), HasSubstr("parameter c not in the model")));

  TrainingRecord nan = reference;
  nan.parameters["a"][0] = std::nanf("");
  EXPECT_FALSE(check_training(nan, reference, s).ok);

  s.steps = 0;
  EXPECT_THAT([&] { reference_training(s); },
              ThrowsMessage<InvalidConfig>(HasSubstr("steps 0; expected 1 to 10000")));
}

}  // namespace
}  // namespace metron::exec
