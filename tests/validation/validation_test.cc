// Validating a case: the prediction is the source's quantity computed from the simulated step, so
// it is checked against scenario::evaluate of the same scenario and the formula by hand; group
// means against sums by hand.

#include "metron/validation/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "metron/scenario/evaluation.h"

namespace metron::validation {
namespace {

using ::testing::HasSubstr;

PublishedCase read_one(const std::string& published, const std::string& scenario_text) {
  return cases_from_json(R"({"cases": [{"id": "r", "group": "g", "source": {"title": "T",
                            "ref": "R"}, "published": )" +
                             published + R"(, "scenario": )" + scenario_text + "}]}",
                         "cases.json")
      .front();
}

const std::string kScenario = R"({"model": "gpt3-1.3b", "hardware": "dgx-a100", "parallel":
    {"tp": 2, "pp": 2, "dp": 2, "vp": 1, "microbatch_size": 2, "global_batch": 32,
     "recompute": "full"}, "schedule": {"name": "1f1b"}, "sync": {"policy": "megatron-ddp"}})";

TEST(Validation, TflopsPerGpuAreTheSourcesFlopsOverThePredictedTime) {
  const PublishedCase c = read_one(
      R"({"quantity": "tflops_per_gpu", "value": 120, "flops": "narayanan-eq3"})", kScenario);
  const CaseOutcome o = validate_case(c);
  ASSERT_TRUE(o.predicted.has_value()) << o.failure;
  const double t = scenario::evaluate(*c.scenario).iteration_time_s;
  // gpt3-1.3b: l 24, h 2048, V 50257, s 2048; 32 sequences on 8 GPUs.
  const double b = 32;
  const double s = 2048;
  const double l = 24;
  const double h = 2048;
  const double v = 50257;
  const double flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  EXPECT_NEAR(*o.predicted, flops / t / 8 / 1e12, 1e-9);
  EXPECT_NEAR(o.error, (*o.predicted - 120) / 120, 1e-12);
  EXPECT_DOUBLE_EQ(o.iteration_time_s, t);
  EXPECT_EQ(o.hbm_capacity, 80'000'000'000);
  EXPECT_GT(o.peak_memory_bytes, 0);
}

TEST(Validation, MfuDividesByThePublishedPeakOrTheGpus) {
  const std::string figure = R"({"quantity": "mfu", "value": 0.4, "flops": "megatron-model-flops")";
  const CaseOutcome stated =
      validate_case(read_one(figure + R"(, "peak_tflops": 156})", kScenario));
  const CaseOutcome datasheet = validate_case(read_one(figure + "}", kScenario));
  ASSERT_TRUE(stated.predicted && datasheet.predicted);
  // gpt3-1.3b is bf16: the A100's 312 TFLOP/s, twice the stated 156.
  EXPECT_NEAR(*stated.predicted, 2 * *datasheet.predicted, 1e-12);
}

TEST(Validation, IterationTimeIsTheSimulatedStep) {
  const PublishedCase c = read_one(R"({"quantity": "iteration_time_s", "value": 1.0})", kScenario);
  const CaseOutcome o = validate_case(c);
  ASSERT_TRUE(o.predicted.has_value());
  EXPECT_DOUBLE_EQ(*o.predicted, scenario::evaluate(*c.scenario).iteration_time_s);
}

TEST(Validation, TokensPerGpuAreTheStepsTokensOverThePredictedTimeAndGpus) {
  const PublishedCase c =
      read_one(R"({"quantity": "tokens_per_s_per_gpu", "value": 5000})", kScenario);
  const CaseOutcome o = validate_case(c);
  ASSERT_TRUE(o.predicted.has_value()) << o.failure;
  // 32 sequences of 2048 tokens on 8 GPUs.
  const double t = scenario::evaluate(*c.scenario).iteration_time_s;
  EXPECT_NEAR(*o.predicted, 32.0 * 2048 / t / 8, 1e-9);
  EXPECT_NEAR(o.error, (*o.predicted - 5000) / 5000, 1e-12);
}

TEST(Validation, ACaseMetronCannotBuildIsAFailureNotAnError) {
  // 24 layers do not split over pp 5.
  const std::string bad = R"({"model": "gpt3-1.3b", "hardware": "dgx-a100", "parallel":
      {"tp": 1, "pp": 5, "dp": 1, "vp": 1, "num_microbatches": 8}, "schedule": {"name": "1f1b"}})";
  const CaseOutcome o =
      validate_case(read_one(R"({"quantity": "iteration_time_s", "value": 1.0})", bad));
  EXPECT_FALSE(o.predicted.has_value());
  EXPECT_THAT(o.failure, HasSubstr("cannot simulate"));
  EXPECT_THAT(o.failure, HasSubstr("layers"));
}

TEST(Validation, GroupsAverageTheMagnitudeAndTheSignSeparatelyAndCountFailures) {
  PublishedCase a{.id = "a", .group = "one"};
  PublishedCase b{.id = "b", .group = "two"};
  const std::vector<CaseOutcome> outcomes = {
      {.published_case = &a, .predicted = 1.1, .error = 0.10},
      {.published_case = &a, .predicted = 0.7, .error = -0.30},
      {.published_case = &b, .failure = "not expressible"},
      {.published_case = &b, .predicted = 1.2, .error = 0.20}};
  const std::vector<GroupSummary> g = summarize(outcomes);
  ASSERT_EQ(g.size(), 3U);
  EXPECT_EQ(g[0].group, "one");
  EXPECT_NEAR(g[0].mean_abs_error, 0.20, 1e-12);
  EXPECT_NEAR(g[0].mean_error, -0.10, 1e-12);
  EXPECT_EQ(g[1].cases, 1);
  EXPECT_EQ(g[1].failed, 1);
  EXPECT_EQ(g[2].group, "all");
  EXPECT_EQ(g[2].cases, 3);
  EXPECT_NEAR(g[2].mean_abs_error, 0.60 / 3, 1e-12);
  EXPECT_NEAR(g[2].mean_error, 0.0, 1e-12);
  const auto json = nlohmann::json::parse(validation_json(outcomes, g));
  EXPECT_TRUE(json.at("cases")[2].at("predicted").is_null());
  EXPECT_EQ(json.at("cases")[2].at("failure"), "not expressible");
  EXPECT_EQ(json.at("groups")[2].at("cases"), 3);
}

}  // namespace
}  // namespace metron::validation
