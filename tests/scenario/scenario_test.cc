// Scenarios (Note [scenario JSON]): the canonical JSON round-trips, and every malformed or
// unknown piece is an error that names where it is.

#include "metron/scenario/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "metron/base/error.h"

namespace metron::scenario {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(Scenario, DefaultRoundTripsWithPresetsWrittenByName) {
  const Scenario s = default_scenario();
  const std::string text = to_json(s);
  EXPECT_THAT(text, HasSubstr("\"model\": \"gpt3-175b\""));
  EXPECT_THAT(text, HasSubstr("\"hardware\": \"dgx-h100\""));
  EXPECT_EQ(scenario_from_json(text, "s.json"), s);
  EXPECT_NO_THROW(validate(s));
}

// A NUL byte ends nlohmann's input, so a scenario followed by a NUL and anything at all was read
// as the part before it; every reader now refuses the byte at its place (base/json_parse.h).
TEST(Scenario, ANulByteIsMalformedJsonNotTheEndOfTheFile) {
  const std::string text = std::string(R"({"model": "gpt3-125m"})") + '\0' + "garbage ]]";
  EXPECT_THAT([&] { (void)scenario_from_json(text, "s.json"); },
              ThrowsMessage<ParseError>(AllOf(HasSubstr("s.json:1:"), HasSubstr("NUL byte"))));
}

TEST(Scenario, AMeasuredProfileRoundTripsAndATypoInItIsNamed) {
  const std::string text = R"({
    "model": "gpt3-125m", "parallel": {"pp": 2, "num_microbatches": 4},
    "profile": {"hardware": "here", "compute": [{"key": "gemm:1x2x3", "dtype": "bf16",
                                                  "time_ms": 0.5}]}})";
  const Scenario s = scenario_from_json(text, "s.json");
  ASSERT_TRUE(s.profile.has_value());
  EXPECT_EQ(s.profile->compute("gemm:1x2x3", models::Precision::kBf16), 0.5e-3);
  EXPECT_EQ(scenario_from_json(to_json(s), "back.json"), s);
  EXPECT_THROW(
      {
        try {
          static_cast<void>(scenario_from_json(
              R"({"parallel": {"pp": 1}, "profile": {"compute": [], "colectives": []}})",
              "typo.json"));
        } catch (const ParseError& e) {
          EXPECT_THAT(e.what(), HasSubstr("colectives"));
          throw;
        }
      },
      ParseError);
}

TEST(Scenario, SpecsThatAreNoPresetAndCostsRoundTripInFull) {
  const std::string text = R"({
    "model": {"name": "mine", "layers": 4, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32},
    "hardware": "dgx-a100",
    "parallel": {"pp": 2, "num_microbatches": 4},
    "schedule": {"name": "zb-h1", "p2p": "async"},
    "sync": {"policy": "zero1"},
    "costs": {"F": 1.5, "I": [1, 1], "W": [0.5, 0.5], "p2p": 0.25}})";
  const Scenario s = scenario_from_json(text, "s.json");
  ASSERT_TRUE(s.model.has_value());
  EXPECT_EQ(s.model->name, "mine");
  EXPECT_EQ(s.hardware.name, "dgx-a100");
  EXPECT_EQ(s.schedule.name, "zb-h1");
  EXPECT_EQ(s.sync.policy, sync::SyncPolicy::kZero1);
  ASSERT_TRUE(s.costs.has_value());
  EXPECT_DOUBLE_EQ(s.costs->forward[1], 1.5e-3);  // milliseconds in, seconds kept
  EXPECT_DOUBLE_EQ(s.costs->p2p, 0.25e-3);
  const Scenario back = scenario_from_json(to_json(s), "back.json");
  EXPECT_EQ(back.model, s.model);
  EXPECT_EQ(back.parallel, s.parallel);
  EXPECT_EQ(back.schedule, s.schedule);
  ASSERT_TRUE(back.costs.has_value());
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(back.costs->forward[i], s.costs->forward[i]);
    EXPECT_DOUBLE_EQ(back.costs->backward[i], s.costs->backward[i]);
  }
}

TEST(Scenario, UnknownKeysAnywhereAreErrorsThatNameThem) {
  EXPECT_THAT(
      [] { (void)scenario_from_json(R"({"parallel": {}, "modle": "gpt3-175b"})", "s.json"); },
      ThrowsMessage<ParseError>(HasSubstr("s.json: modle: unknown key")));
  EXPECT_THAT([] { (void)scenario_from_json(R"({"parallel": {"tpp": 2}})", "s.json"); },
              ThrowsMessage<ParseError>(HasSubstr("parallel.tpp: unknown key")));
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(R"({"parallel": {}, "schedule": {"nmae": "1f1b"}})", "s.json");
      },
      ThrowsMessage<ParseError>(HasSubstr("schedule.nmae: unknown key")));
  EXPECT_THAT(
      [] { (void)scenario_from_json(R"({"parallel": {}, "sync": {"polcy": "ddp"}})", "s.json"); },
      ThrowsMessage<ParseError>(HasSubstr("sync.polcy: unknown key")));
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(R"({"parallel": {}, "costs": {"F": 1, "B": 2, "f": 3}})",
                                 "s.json");
      },
      ThrowsMessage<ParseError>(HasSubstr("costs.f: unknown key")));
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(
            R"({"parallel": {}, "model": {"name": "m", "layers": 2, "hidden": 8, "heads": 2,)"
            R"( "vocab": 10, "seq_len": 4, "hiden": 8}})",
            "s.json");
      },
      ThrowsMessage<ParseError>(HasSubstr("model.hiden: unknown key")));
}

TEST(Scenario, BadValuesNameTheirPlace) {
  EXPECT_THAT([] { (void)scenario_from_json("{\"parallel\": {}\n, }", "s.json"); },
              ThrowsMessage<ParseError>(HasSubstr("s.json:2:")));
  // A number too large for a double has no position; it is still bad input, not a crash.
  EXPECT_THAT([] { (void)scenario_from_json(R"({"parallel": {"tp": 1e400}})", "s.json"); },
              ThrowsMessage<ParseError>(
                  AllOf(HasSubstr("s.json"), HasSubstr("malformed JSON: number overflow"))));
  EXPECT_THAT([] { (void)scenario_from_json(R"({"parallel": {"tp": 0}})", "s.json"); },
              ThrowsMessage<ParseError>(HasSubstr("tp: expected a positive integer, got 0")));
  EXPECT_THAT(
      [] { (void)scenario_from_json(R"({"parallel": {}, "model": "gpt3-17b"})", "s.json"); },
      ThrowsMessage<InvalidConfig>(HasSubstr("unknown name \"gpt3-17b\"")));
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(R"({"parallel": {}, "schedule": {"p2p": "eager"}})", "s.json");
      },
      ThrowsMessage<ParseError>(HasSubstr("schedule.p2p: expected \"batched\" or \"async\"")));
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(R"({"parallel": {}, "sync": {"policy": "zero4"}})", "s.json");
      },
      ThrowsMessage<ParseError>(HasSubstr("sync.policy: expected one of ddp")));
  EXPECT_THAT([] { (void)scenario_from_json(R"({"schedule": {}})", "s.json"); },
              ThrowsMessage<ParseError>(HasSubstr("parallel: missing")));
}

TEST(Scenario, ValidationNeedsAModelOrCostsAndAConsistentConfiguration) {
  Scenario s = default_scenario();
  s.model.reset();
  EXPECT_THAT([&] { validate(s); }, ThrowsMessage<InvalidConfig>(
                                        HasSubstr("expected a \"model\" or explicit \"costs\"")));
  Scenario wrong = default_scenario();
  wrong.gpus = 1000;
  EXPECT_THAT([&] { validate(wrong); },
              ThrowsMessage<InvalidConfig>(HasSubstr("gpus (1000) must equal tp·pp·dp·cp")));
}

TEST(Scenario, MegatronSchedulesDefaultToBatchedExchanges) {
  EXPECT_EQ(p2p_mode({.name = "1f1b"}), lowering::P2PMode::kBatched);
  EXPECT_EQ(p2p_mode({.name = "interleaved-1f1b"}), lowering::P2PMode::kBatched);
  EXPECT_EQ(p2p_mode({.name = "zb-v"}), lowering::P2PMode::kAsync);
  EXPECT_EQ(p2p_mode({.name = "1f1b", .p2p = lowering::P2PMode::kAsync}),
            lowering::P2PMode::kAsync);
}

// Issue 14: without a model, explicit costs still bound the graph: a billion microbatches is
// refused naming the key and the limit, before anything is built.
TEST(Scenario, ExplicitCostsWithoutAModelStillHaveSizeLimits) {
  const Scenario s = scenario_from_json(
      R"({"parallel": {"pp": 2, "num_microbatches": 1000000000}, "costs": {"F": 1, "B": 2}})",
      "s.json");
  EXPECT_THAT([&] { validate(s); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "num_microbatches: expected at most 65536 (the limit of microbatches per "
                  "iteration), got 1000000000")));
}

// Issue 14: an unknown key of a nested model names the valid keys and the likely one.
TEST(Scenario, AnUnknownModelKeySuggestsTheNearestKey) {
  EXPECT_THAT(
      [] {
        (void)scenario_from_json(
            R"({"model": {"name": "t", "layers": 2, "hidden": 8, "heads": 2, "vocab": 10,)"
            R"( "seq_len": 4, "ffn_hiden": 32}, "parallel": {"num_microbatches": 1}})",
            "s.json");
      },
      ThrowsMessage<ParseError>(AllOf(HasSubstr("s.json: model.ffn_hiden: unknown key"),
                                      HasSubstr("did you mean \"ffn_hidden\"?"))));
}

}  // namespace
}  // namespace metron::scenario
