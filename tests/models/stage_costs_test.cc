#include "metron/models/stage_costs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metron/base/error.h"

namespace metron::models {
namespace {

using ::testing::AllOf;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pointwise;
using ::testing::StartsWith;
using ::testing::ThrowsMessage;

TEST(StageCosts, ReadsListsAndBroadcastsScalarsInSeconds) {
  const StageCosts c = stage_costs_from_json(
      R"({"F": [1, 2, 3, 4], "I": 1, "W": [0.5, 0.5, 0.5, 0.25], "p2p": 0.5})", "s.json", 4);
  ASSERT_EQ(c.stages(), 4U);
  // ms / 1000: 1 ms = 1e-3 s (both sides are the double nearest the same real number)
  EXPECT_THAT(c.forward, ElementsAre(1e-3, 2e-3, 3e-3, 4e-3));
  EXPECT_THAT(c.backward_input, ElementsAre(1e-3, 1e-3, 1e-3, 1e-3));
  EXPECT_THAT(c.backward_weight, ElementsAre(0.5e-3, 0.5e-3, 0.5e-3, 0.25e-3));
  // B defaults to I + W: 1 + 0.5 = 1.5 ms, 1 + 0.25 = 1.25 ms
  EXPECT_THAT(c.backward, Pointwise(DoubleEq(), std::vector{1.5e-3, 1.5e-3, 1.5e-3, 1.25e-3}));
  EXPECT_EQ(c.p2p, 0.5e-3);
  EXPECT_TRUE(c.splits_backward());
}

TEST(StageCosts, ScalarAppliesToEveryGivenStage) {
  const StageCosts c = stage_costs_from_json(R"({"F": 2, "B": 4})", "s.json", 3);
  EXPECT_THAT(c.forward, ElementsAre(2e-3, 2e-3, 2e-3));
  EXPECT_THAT(c.backward, ElementsAre(4e-3, 4e-3, 4e-3));
  EXPECT_EQ(c.p2p, 0.0);
}

TEST(StageCosts, LongestListDecidesWhenStagesAreUnknown) {
  const StageCosts c = stage_costs_from_json(R"({"F": [1, 2], "B": 3})");
  EXPECT_THAT(c.backward, ElementsAre(3e-3, 3e-3));
  // Only numbers: one stage.
  EXPECT_EQ(stage_costs_from_json(R"({"F": 1, "B": 2})").stages(), 1U);
}

TEST(StageCosts, BAloneCannotBeSplit) {
  const StageCosts c = stage_costs_from_json(R"({"F": 1, "B": 2, "I": null, "W": null})");
  EXPECT_FALSE(c.splits_backward());
  EXPECT_THAT(c.backward_input, IsEmpty());
  EXPECT_THAT(c.backward_weight, IsEmpty());
  EXPECT_THAT(c.backward, ElementsAre(2e-3));
}

TEST(StageCosts, NullBDefaultsToISumW) {
  // B = 0.75 + 0.25 = 1 ms
  const StageCosts c = stage_costs_from_json(R"({"F": 1, "I": 0.75, "W": 0.25, "B": null})");
  EXPECT_THAT(c.backward, ElementsAre(DoubleEq(1e-3)));
}

TEST(StageCosts, AcceptsBEqualToISumWUpToDecimalRounding) {
  // 1.1 + 0.7 is 1.8000000000000003 in binary, yet the user means 1.8.
  const StageCosts c = stage_costs_from_json(R"({"F": 1, "I": 1.1, "W": 0.7, "B": 1.8})");
  EXPECT_THAT(c.backward, ElementsAre(DoubleEq(1.8e-3)));
}

void expect_parse_error(const std::string& text, const std::string& message,
                        std::optional<std::int64_t> stages = std::nullopt,
                        const std::string& path = "costs") {
  EXPECT_THAT([&] { stage_costs_from_json(text, "s.json", stages, path); },
              ThrowsMessage<ParseError>(HasSubstr(message)))
      << text;
}

TEST(StageCosts, RejectsBDisagreeingWithISumW) {
  // stage 1: I + W = 1 + 1 = 2 ms, B says 3
  expect_parse_error(R"({"F": 1, "I": [1, 1], "W": [1, 1], "B": [2, 3]})",
                     "s.json: costs.B[1]: expected I + W = 2.0 (I 1.0 + W 1.0), got 3.0");
}

TEST(StageCosts, RejectsListsOfTheWrongLength) {
  expect_parse_error(R"({"F": [1, 1, 1, 1], "B": 1, "W": [1, 1, 1], "I": 1})",
                     "costs.W: expected 4 entries (one per stage), got 3", 4);
  expect_parse_error(R"({"F": [1, 1, 1, 1], "B": [1, 1]})",
                     "costs.B: expected 4 entries (one per stage, as the longest list), got 2");
  expect_parse_error(R"({"F": [], "B": 1})",
                     "costs.F: expected a number or a non-empty array of numbers, got []");
}

TEST(StageCosts, RejectsNegativeAndMistypedEntries) {
  expect_parse_error(R"({"F": 1, "I": 1, "W": [1, 1, -1]})",
                     "costs.W[2]: expected a number >= 0, got -1");
  expect_parse_error(R"({"F": "fast", "B": 1})",
                     "costs.F: expected a number or an array of numbers, got \"fast\"");
  expect_parse_error(R"({"F": 1, "B": 1, "p2p": -0.5})",
                     "costs.p2p: expected a number >= 0, got -0.5");
  expect_parse_error(R"({"F": [1, true], "B": 1})", "costs.F[1]: expected a number >= 0, got true");
}

TEST(StageCosts, RejectsMissingForwardOrBackward) {
  expect_parse_error(R"({"B": 1})", "s.json: costs: missing key \"F\"");
  expect_parse_error(R"({"F": 1})", "costs: expected \"B\" or both \"I\" and \"W\", got neither");
  expect_parse_error(R"({"F": 1, "B": 2, "I": 1})",
                     "costs: expected \"I\" and \"W\" together, got only \"I\"");
}

TEST(StageCosts, RejectsARootThatIsNotAnObject) {
  expect_parse_error("[1, 2]", "s.json: costs: expected an object, got [1,2]");
}

TEST(StageCosts, MessagesStartWithTheGivenPath) {
  expect_parse_error(R"({"F": 1, "I": 1, "W": [1, 1, -1]})",
                     "s.json: scenario.costs.W[2]: expected a number >= 0, got -1", std::nullopt,
                     "scenario.costs");
}

TEST(StageCosts, MalformedJsonNamesLineAndColumn) {
  EXPECT_THAT([] { stage_costs_from_json("{\"F\": 1,\n \"B\": }", "s.json"); },
              ThrowsMessage<ParseError>(AllOf(StartsWith("s.json:2:"), HasSubstr("malformed"))));
}

TEST(StageCosts, RejectsNonPositiveStageCount) {
  EXPECT_THAT(
      [] { stage_costs_from_json(R"({"F": 1, "B": 1})", "s.json", 0); },
      ThrowsMessage<InvalidConfig>(HasSubstr("costs: stages: expected a positive integer, got 0")));
}

TEST(StageCosts, WritesListsForEveryStageInMilliseconds) {
  StageCosts c;
  c.forward = {1e-3, 2e-3};
  c.backward = {3e-3, 3e-3};
  c.p2p = 0.5e-3;
  EXPECT_EQ(to_json(c), "{\"F\":[1.0,2.0],\"B\":[3.0,3.0],\"p2p\":0.5}\n");
}

TEST(StageCosts, RoundTripsUpToUnitRounding) {
  StageCosts c;
  c.forward = {1.1e-3, 1.3e-3, 0.7e-3};
  c.backward_input = {1e-3, 1.2e-3, 0.9e-3};
  c.backward_weight = {0.8e-3, 0.8e-3, 0.1e-3};
  c.backward = {1.8e-3, 2e-3, 1e-3};  // I + W, as written by a user
  c.p2p = 0.6e-3;
  const StageCosts back = stage_costs_from_json(to_json(c), "s.json", 3);
  EXPECT_THAT(back.forward, Pointwise(DoubleEq(), c.forward));
  EXPECT_THAT(back.backward_input, Pointwise(DoubleEq(), c.backward_input));
  EXPECT_THAT(back.backward_weight, Pointwise(DoubleEq(), c.backward_weight));
  EXPECT_THAT(back.backward, Pointwise(DoubleEq(), c.backward));
  EXPECT_DOUBLE_EQ(back.p2p, c.p2p);
}

TEST(StageCosts, WritingRejectsNegativeTimes) {
  StageCosts c;
  c.forward = {1e-3, -1e-3};
  c.backward = {1e-3, 1e-3};
  EXPECT_THAT([&] { (void)to_json(c); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("invalid costs: F[1]: expected a number >= 0, got -1.0")));
}

// Issue 14: explicit costs beyond a day (5e11 ms crashed the simulator) are refused at their
// JSON path, with the limit.
TEST(StageCostsJson, RefusesATimeBeyondADay) {
  EXPECT_THAT([] { (void)stage_costs_from_json(R"({"F": [1, 5e11], "B": 2})", "s.json"); },
              ThrowsMessage<ParseError>(AllOf(HasSubstr("s.json: costs.F[1]"),
                                              HasSubstr("expected at most 86400000 ms"),
                                              HasSubstr("got 500000000000"))));
  EXPECT_THAT([] { (void)stage_costs_from_json(R"({"F": 1, "B": 2, "p2p": 1e300})", "s.json"); },
              ThrowsMessage<ParseError>(HasSubstr("p2p: expected at most")));
  EXPECT_NO_THROW((void)stage_costs_from_json(R"({"F": 86400000, "B": 2})", "s.json"));
}

}  // namespace
}  // namespace metron::models
