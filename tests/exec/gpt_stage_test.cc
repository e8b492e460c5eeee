// The model payload's math (Note [gpt stage] in metron/exec/gpt_stage.h, adam.h): a model cut
// into stages computes what the whole model computes, the split backward what libtorch's
// autograd computes, and Adam what its formula gives by hand.
//
// Tolerances: everything is fp32, and a gradient is a sum over tokens and microbatches whose order
// differs between the runs compared (a split runs W in another order than B; autograd and the
// split backward use other kernels), so gradients agree to the rounding of sums of terms up to
// the tensor's largest, which cancellation can leave far above the sum: 1e-5 of that (fp32's ε,
// 6e-8, times the hundreds of terms; measured: at most 1.7e-8 absolute, 1.6e-6 of the largest).
// Adam divides each gradient by its running RMS, so a rounding difference δ in a small gradient g
// moves its update by about lr·δ/|g|: parameters agree to 1e-6 relative plus 1e-3·lr per step taken
// (measured: 8e-6 after 3 steps at lr 1e-2, the bound 3e-5).

#include "metron/exec/gpt_stage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/adam.h"

namespace metron::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Tolerance {
  double relative = 0;
  double of_largest = 0;
  double absolute = 0;
};

constexpr double kLr = 1e-2;
constexpr Tolerance kGradients{.of_largest = 1e-5, .absolute = 1e-12};

GptConfig tiny() {
  return GptConfig{.vocab = 64,
                   .hidden = 32,
                   .heads = 4,
                   .layers = 4,
                   .seq_len = 16,
                   .microbatch_size = 2,
                   .seed = 7};
}

/// Every parameter's values (or gradients) by name.
std::map<std::string, std::vector<float>> by_name(GptStage& stage, bool gradients) {
  std::map<std::string, std::vector<float>> out;
  const std::span<float> flat = gradients ? stage.flat_gradients() : stage.flat_parameters();
  for (const ParameterSlot& slot : stage.parameter_layout()) {
    out[slot.name].assign(flat.begin() + slot.offset, flat.begin() + slot.offset + slot.numel);
  }
  return out;
}

std::map<std::string, std::vector<float>> merged(std::vector<GptStage*> stages, bool gradients) {
  std::map<std::string, std::vector<float>> out;
  for (GptStage* s : stages) out.merge(by_name(*s, gradients));
  return out;
}

/// The largest |a − b| / (relative·|b| + of_largest·max|b| + absolute) over every element, the
/// maximum taken per parameter: at most 1 where they agree.
double worst(const std::map<std::string, std::vector<float>>& a,
             const std::map<std::string, std::vector<float>>& b, const Tolerance& tolerance) {
  EXPECT_EQ(a.size(), b.size());
  double out = 0;
  for (const auto& [name, values] : b) {
    const auto it = a.find(name);
    if (it == a.end()) {
      ADD_FAILURE() << name << " missing";
      continue;
    }
    EXPECT_EQ(it->second.size(), values.size()) << name;
    double largest = 0;
    for (const float v : values) largest = std::max(largest, static_cast<double>(std::abs(v)));
    for (std::size_t i = 0; i < std::min(values.size(), it->second.size()); ++i) {
      const double scale = tolerance.relative * std::abs(values[i]) +
                           tolerance.of_largest * largest + tolerance.absolute;
      out = std::max(out, std::abs(static_cast<double>(it->second[i]) - values[i]) / scale);
    }
  }
  return out;
}

struct AdamState {
  std::vector<float> m, v;
};

void step(GptStage& stage, AdamState& state, std::int64_t t) {
  const std::size_t n = stage.flat_parameters().size();
  state.m.resize(n);
  state.v.resize(n);
  adam_step(stage.flat_parameters(), stage.flat_gradients(), state.m, state.v, t,
            AdamOptions{.lr = kLr, .weight_decay = 0.01});
  stage.zero_gradients();
}

/// Microbatch k of an iteration of `microbatches`: consecutive samples, every run the same.
MicrobatchData data_of(std::int64_t iteration, std::int64_t microbatches, std::int64_t k) {
  const GptConfig c = tiny();
  return synthetic_microbatch(c, (iteration * microbatches + k) * c.microbatch_size);
}

// The reference: the whole model in one stage, microbatch by microbatch, loss mean over them.
std::vector<float> train_whole(GptStage& whole, std::int64_t iteration, std::int64_t microbatches) {
  std::vector<float> losses;
  const std::vector<float> factor{1.0F / static_cast<float>(microbatches)};
  for (std::int64_t k = 0; k < microbatches; ++k) {
    const MicrobatchData data = data_of(iteration, microbatches, k);
    losses.push_back(whole.forward(k, {.tokens = data.tokens, .labels = data.labels})[0]);
    whole.backward(k, factor);
  }
  return losses;
}

// The same model on two stages, every F first and then every backward split into I and W, W in
// reverse order: the order a zero-bubble schedule may take, as far from the reference as any.
std::vector<float> train_split(GptStage& s0, GptStage& s1, std::int64_t iteration,
                               std::int64_t microbatches) {
  std::vector<float> losses;
  const std::vector<float> factor{1.0F / static_cast<float>(microbatches)};
  for (std::int64_t k = 0; k < microbatches; ++k) {
    const MicrobatchData data = data_of(iteration, microbatches, k);
    const std::vector<float> sent = s0.forward(k, {.tokens = data.tokens});
    losses.push_back(s1.forward(k, {.activation = sent, .labels = data.labels})[0]);
  }
  for (std::int64_t k = 0; k < microbatches; ++k) {
    const std::vector<float> grad = s1.backward_input(k, factor);
    s0.backward_input(k, grad);
  }
  for (std::int64_t k = microbatches - 1; k >= 0; --k) {
    s1.backward_weight(k);
    s0.backward_weight(k);
  }
  return losses;
}

TEST(GptStage, StagesOfTheModelTrainAsTheWholeModel) {
  const GptConfig c = tiny();
  GptStage whole(c, {.first_layer = 0, .layers = 4, .first = true, .last = true});
  GptStage s0(c, {.first_layer = 0, .layers = 1, .first = true, .last = false});
  GptStage s1(c, {.first_layer = 1, .layers = 3, .first = false, .last = true});
  // Initialised from the seed and the names alone: the stages hold the whole model's values.
  EXPECT_EQ(merged({&s0, &s1}, false), by_name(whole, false));
  EXPECT_EQ(s0.flat_parameters().size() + s1.flat_parameters().size(),
            whole.flat_parameters().size());

  AdamState whole_adam;
  std::vector<AdamState> split_adam(2);
  for (std::int64_t it = 0; it < 3; ++it) {
    const std::vector<float> expected = train_whole(whole, it, 4);
    const std::vector<float> losses = train_split(s0, s1, it, 4);
    ASSERT_EQ(losses.size(), expected.size());
    for (std::size_t k = 0; k < losses.size(); ++k) {
      EXPECT_NEAR(losses[k], expected[k], 1e-6 * std::abs(expected[k])) << "iteration " << it;
    }
    EXPECT_LE(worst(merged({&s0, &s1}, true), by_name(whole, true), kGradients), 1.0)
        << "iteration " << it;
    step(whole, whole_adam, it + 1);
    step(s0, split_adam[0], it + 1);
    step(s1, split_adam[1], it + 1);
    EXPECT_LE(worst(merged({&s0, &s1}, false), by_name(whole, false),
                    {.relative = 1e-6, .absolute = 1e-3 * kLr * static_cast<double>(it + 1)}),
              1.0)
        << "iteration " << it;
  }
  EXPECT_EQ(s0.microbatches_in_flight() + s1.microbatches_in_flight(), 0);
}

TEST(GptStage, TiedEmbeddingsAreOneTensorOnOneStageAndACopySummedAcrossTwo) {
  GptConfig c = tiny();
  c.tied_embeddings = true;
  // One stage: the head multiplies by the word embeddings themselves (no output.weight), with
  // the split backward as with autograd (the head's W adds into the embeddings' gradient).
  GptStage whole(c, {.first_layer = 0, .layers = 4}, GptStage::Backward::kSplit);
  GptStage reference(c, {.first_layer = 0, .layers = 4}, GptStage::Backward::kAutograd);
  EXPECT_FALSE(by_name(whole, false).contains(std::string(kTiedHeadCopy)));
  train_whole(whole, 0, 2);
  train_whole(reference, 0, 2);
  EXPECT_LE(worst(by_name(whole, true), by_name(reference, true), kGradients), 1.0);
  // Two stages: the last holds a copy that starts as the word embeddings, and the two copies'
  // gradients add up to the one tensor's.
  GptStage s0(c, {.first_layer = 0, .layers = 1, .first = true, .last = false});
  GptStage s1(c, {.first_layer = 1, .layers = 3, .first = false, .last = true});
  const auto first = by_name(s0, false);
  const auto last = by_name(s1, false);
  EXPECT_EQ(last.at(std::string(kTiedHeadCopy)), first.at(std::string(kWordEmbeddings)));
  train_split(s0, s1, 0, 2);
  auto split = merged({&s0, &s1}, true);
  const std::vector<float> embedding = split.at(std::string(kWordEmbeddings));
  const std::vector<float> head = split.at(std::string(kTiedHeadCopy));
  const std::vector<float> tensor = by_name(reference, true).at(std::string(kWordEmbeddings));
  // Neither copy's gradient alone is the tensor's.
  EXPECT_GT(worst({{"w", embedding}}, {{"w", tensor}}, kGradients), 1.0);
  EXPECT_GT(worst({{"w", head}}, {{"w", tensor}}, kGradients), 1.0);
  std::vector<float>& sum = split.at(std::string(kWordEmbeddings));
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += head[i];
  split.erase(std::string(kTiedHeadCopy));
  EXPECT_LE(worst(split, by_name(reference, true), kGradients), 1.0);
}

TEST(GptStage, TheSplitBackwardComputesWhatAutogradComputes) {
  const GptConfig c = tiny();
  GptStage split(c, {.first_layer = 0, .layers = 4}, GptStage::Backward::kSplit);
  GptStage reference(c, {.first_layer = 0, .layers = 4}, GptStage::Backward::kAutograd);
  const std::vector<float> factor{0.5F};
  for (std::int64_t k = 0; k < 2; ++k) {
    const MicrobatchData data = synthetic_microbatch(c, k * c.microbatch_size);
    const float a = split.forward(k, {.tokens = data.tokens, .labels = data.labels})[0];
    const float b = reference.forward(k, {.tokens = data.tokens, .labels = data.labels})[0];
    EXPECT_NEAR(a, b, 1e-6 * std::abs(b));
  }
  for (std::int64_t k = 0; k < 2; ++k) {
    split.backward_input(k, factor);
    reference.backward_input(k, factor);
  }
  // I alone leaves every parameter gradient to W; autograd has them all after its backward.
  const std::span<float> deferred = split.flat_gradients();
  EXPECT_TRUE(std::all_of(deferred.begin(), deferred.end(), [](float g) { return g == 0; }));
  const std::span<float> computed = reference.flat_gradients();
  const std::vector<float> after_input(computed.begin(), computed.end());
  for (std::int64_t k = 0; k < 2; ++k) {
    split.backward_weight(k);
    reference.backward_weight(k);
  }
  // Autograd's W adds nothing: its gradients (non-zero for every parameter, below) were all
  // there after I.
  EXPECT_EQ(std::vector<float>(computed.begin(), computed.end()), after_input);
  const auto expected = by_name(reference, true);
  // Every parameter has a gradient (none is left out of the split backward).
  for (const auto& [name, values] : expected) {
    EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float g) { return g != 0; })) << name;
  }
  EXPECT_LE(worst(by_name(split, true), expected, kGradients), 1.0);
}

// The input gradient a stage returns is what the previous stage needs: the two-stage backward
// above depends on it; here its size and that it is the reference's.
TEST(GptStage, ReturnsTheGradientOfItsInput) {
  const GptConfig c = tiny();
  GptStage head(c, {.first_layer = 2, .layers = 2, .first = false, .last = true});
  GptStage reference(c, {.first_layer = 2, .layers = 2, .first = false, .last = true},
                     GptStage::Backward::kAutograd);
  const MicrobatchData data = synthetic_microbatch(c, 0);
  std::vector<float> activation(static_cast<std::size_t>(c.microbatch_size * c.seq_len * c.hidden));
  for (std::size_t i = 0; i < activation.size(); ++i) {
    activation[i] = std::sin(static_cast<float>(i));
  }
  head.forward(0, {.activation = activation, .labels = data.labels});
  reference.forward(0, {.activation = activation, .labels = data.labels});
  const std::vector<float> got = head.backward(0, std::vector<float>{1.0F});
  const std::vector<float> want = reference.backward(0, std::vector<float>{1.0F});
  ASSERT_EQ(got.size(), activation.size());
  ASSERT_EQ(want.size(), activation.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-8) << i;
  }
}

// At initialisation (weights of std 0.02) the logits are nearly equal, so the loss is about
// ln(vocab); a few Adam steps on one microbatch must lower it.
TEST(GptStage, StartsNearTheUniformLossAndLearns) {
  const GptConfig c = tiny();
  GptStage model(c, {.first_layer = 0, .layers = 4});
  const MicrobatchData data = synthetic_microbatch(c, 0);
  AdamState adam;
  std::vector<float> losses;
  for (std::int64_t t = 1; t <= 10; ++t) {
    losses.push_back(model.forward(0, {.tokens = data.tokens, .labels = data.labels})[0]);
    model.backward(0, std::vector<float>{1.0F});
    step(model, adam, t);
  }
  EXPECT_NEAR(losses.front(), std::log(64.0), 0.05);
  EXPECT_LT(losses.back(), losses.front() - 0.5);
}

TEST(GptStage, RefusesWhatItCannotRunByName) {
  const GptConfig c = tiny();
  EXPECT_THAT([&] { GptStage(c, {.first_layer = 3, .layers = 2}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("outside the model's 4")));
  EXPECT_THAT([&] { GptStage(c, {.first_layer = 1, .layers = 0, .first = false, .last = false}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("holds nothing")));
  GptConfig odd = c;
  odd.heads = 5;
  EXPECT_THAT([&] { validate(odd); },
              ThrowsMessage<InvalidConfig>(HasSubstr("divisible by heads 5")));
  GptConfig huge = c;
  huge.vocab = std::int64_t{1} << 40;
  EXPECT_THAT([&] { validate(huge); }, ThrowsMessage<InvalidConfig>(HasSubstr("vocab")));
  GptConfig long_sequences = c;
  long_sequences.seq_len = 65536;
  long_sequences.microbatch_size = 16;
  EXPECT_THAT([&] { validate(long_sequences); },
              ThrowsMessage<InvalidConfig>(HasSubstr("largest tensor would hold 274877906944")));
  GptConfig wide = c;
  wide.hidden = 8192;
  wide.heads = 8;
  wide.layers = 1000;
  EXPECT_THAT([&] { GptStage(wide, {.first_layer = 0, .layers = 1000}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("parameters; at most")));

  GptStage first(c, {.first_layer = 0, .layers = 2, .first = true, .last = false});
  const MicrobatchData data = synthetic_microbatch(c, 0);
  std::vector<std::int64_t> short_tokens(data.tokens.begin(), data.tokens.end() - 1);
  EXPECT_THAT([&] { first.forward(0, {.tokens = short_tokens}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("tokens: 31 given; expected")));
  std::vector<std::int64_t> bad_token = data.tokens;
  bad_token[3] = 64;
  EXPECT_THAT([&] { first.forward(0, {.tokens = bad_token}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("token 64 outside the vocabulary")));
  EXPECT_EQ(first.microbatches_in_flight(), 0);  // a refused F leaves nothing behind
  EXPECT_THAT([&] { first.backward_input(0, {}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("I of microbatch 0 before its F")));
  const std::vector<float> out = first.forward(0, {.tokens = data.tokens});
  EXPECT_THAT([&] { first.forward(0, {.tokens = data.tokens}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("again before its backward")));
  EXPECT_THAT([&] { first.backward_weight(0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("W of microbatch 0 before its I")));
  EXPECT_THAT([&] { first.backward_input(0, std::vector<float>(3)); },
              ThrowsMessage<InvalidConfig>(HasSubstr("output gradient: 3 floats given")));
  first.backward(0, out);
  EXPECT_EQ(first.microbatches_in_flight(), 0);
}

TEST(SyntheticData, EveryCallDrawsTheSameTokensAndTheLabelsAreTheNextTokens) {
  const GptConfig c = tiny();
  EXPECT_EQ(synthetic_sample(c, 5), synthetic_sample(c, 5));
  EXPECT_NE(synthetic_sample(c, 5), synthetic_sample(c, 6));
  const std::vector<std::int64_t> s = synthetic_sample(c, 9);
  ASSERT_EQ(std::ssize(s), c.seq_len + 1);
  EXPECT_TRUE(std::all_of(s.begin(), s.end(), [&](std::int64_t t) { return t >= 0 && t < 64; }));
  const MicrobatchData data = synthetic_microbatch(c, 8);
  ASSERT_EQ(std::ssize(data.tokens), 2 * c.seq_len);
  EXPECT_EQ(std::vector(data.tokens.begin() + c.seq_len, data.tokens.end()),
            std::vector(s.begin(), s.end() - 1));
  EXPECT_EQ(std::vector(data.labels.begin() + c.seq_len, data.labels.end()),
            std::vector(s.begin() + 1, s.end()));
}

// Adam's first step moves each parameter by lr·g/(|g| + ε) ≈ lr·sign(g), after the decay.
TEST(Adam, FirstStepMovesByTheLearningRateAgainstTheGradient) {
  std::vector<float> p{1.0F, -2.0F};
  const std::vector<float> g{0.5F, -0.25F};
  std::vector<float> m(2), v(2);
  adam_step(p, g, m, v, 1, {.lr = 0.1, .eps = 1e-8, .weight_decay = 0.01});
  EXPECT_NEAR(p[0], 1.0 * (1 - 0.1 * 0.01) - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * (1 - 0.1 * 0.01) + 0.1, 1e-6);
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[1], 0.001 * 0.0625, 1e-9);
  // Second step, gradient 0 on the first element: m = 0.045, v = 0.999·0.00025,
  // m̂ = 0.045 / 0.19, v̂ = 0.00024975 / 0.001999.
  const std::vector<float> g2{0.0F, -0.25F};
  const float before = p[0];
  adam_step(p, g2, m, v, 2, {.lr = 0.1, .eps = 1e-8});
  const double m_hat = 0.045 / (1 - 0.81);
  const double v_hat = 0.999 * 0.00025 / (1 - 0.998001);
  EXPECT_NEAR(p[0], before - 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-5);
}

// A shard stepped alone ends as the same elements of the whole buffer: what the distributed
// optimizer relies on.
TEST(Adam, AShardStepsAsTheSameElementsOfTheWhole) {
  std::vector<float> whole(10), grads(10);
  for (std::size_t i = 0; i < 10; ++i) {
    whole[i] = std::cos(static_cast<float>(i));
    grads[i] = std::sin(static_cast<float>(3 * i));
  }
  std::vector<float> shards = whole;
  std::vector<float> m(10), v(10), ms(10), vs(10);
  adam_step(whole, grads, m, v, 1, {});
  const std::span<float> all(shards);
  const std::span<const float> g(grads);
  adam_step(all.subspan(0, 4), g.subspan(0, 4), std::span(ms).subspan(0, 4),
            std::span(vs).subspan(0, 4), 1, {});
  adam_step(all.subspan(4), g.subspan(4), std::span(ms).subspan(4), std::span(vs).subspan(4), 1,
            {});
  EXPECT_EQ(shards, whole);
  EXPECT_THAT([&] { adam_step(all.subspan(1), g, ms, vs, 1, {}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("9 parameters but 10 gradients")));
  EXPECT_THAT([&] { adam_step(all, g, ms, vs, 0, {}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("step 0")));
}

}  // namespace
}  // namespace metron::exec
