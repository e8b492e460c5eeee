// Reading published cases: the shipped development set, and the errors a hand-edited cases file
// gets (each naming the case and the key).

#include "metron/validation/published_case.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "metron/base/error.h"

namespace metron::validation {
namespace {

using ::testing::HasSubstr;

std::string one_case(const std::string& fields) {
  return R"({"cases": [{"id": "r1", "group": "g", "source": {"title": "T", "ref": "Table 1"}, )" +
         fields + "}]}";
}

const std::string kScenario =
    R"("scenario": {"model": "gpt3-1.3b", "hardware": "dgx-a100", "parallel": {"tp": 2, "pp": 1,
       "dp": 4, "vp": 1, "microbatch_size": 1, "global_batch": 32}, "schedule": {"name": "1f1b"}})";

std::string error_of(const std::string& text) {
  try {
    cases_from_json(text, "cases.json");
  } catch (const ParseError& e) {
    return e.what();
  }
  return "no error";
}

TEST(PublishedCases, TheShippedSetHasEveryDevelopmentRunWithItsSourceAndAScenario) {
  const std::vector<PublishedCase>& cases = shipped_cases();
  // The development set: Narayanan et al. SC'21 Table 1 (10), Table 2 (6 PTD-P, 6 ZeRO-3),
  // Megatron-LM's README (9); and NeMo 24.07's DGX-H100 FP8 table (12). Every one is expressible.
  ASSERT_EQ(cases.size(), 43U);
  std::set<std::string> groups;
  int unsupported = 0;
  for (const PublishedCase& c : cases) {
    groups.insert(c.group);
    EXPECT_FALSE(c.source.ref.empty()) << c.id;
    if (!c.scenario) {
      ++unsupported;
      EXPECT_FALSE(c.unsupported.empty()) << c.id;
      continue;
    }
    // Every figure can be recomputed from a prediction: a FLOPs formula, or tokens or a time.
    EXPECT_TRUE(c.published.flops.has_value() ||
                c.published.quantity == PublishedQuantity::kTokensPerGpu)
        << c.id;
  }
  EXPECT_EQ(unsupported, 0);
  EXPECT_EQ(groups.size(), 5U);
}

TEST(PublishedCases, ACaseReadsWithItsFigureAndNotes) {
  const auto cases = cases_from_json(
      one_case(R"("published": {"quantity": "mfu", "value": 0.41, "flops": "megatron-model-flops",
                  "peak_tflops": 989.4}, "assumed": ["mbs 1"], )" +
               kScenario),
      "cases.json");
  ASSERT_EQ(cases.size(), 1U);
  EXPECT_EQ(cases[0].published.quantity, PublishedQuantity::kMfu);
  EXPECT_EQ(cases[0].published.peak_tflops, 989.4);
  EXPECT_EQ(cases[0].assumed, std::vector<std::string>{"mbs 1"});
  EXPECT_EQ(cases[0].scenario->parallel.tp, 2);
}

TEST(PublishedCases, AnUnsupportedRunKeepsItsReason) {
  const auto cases =
      cases_from_json(one_case(R"("published": {"quantity": "iteration_time_s", "value": 12.5},
                  "unsupported": "expert parallelism over nodes")"),
                      "cases.json");
  EXPECT_FALSE(cases[0].scenario.has_value());
  EXPECT_EQ(cases[0].unsupported, "expert parallelism over nodes");
}

TEST(PublishedCases, MistakesAreNamedWithTheCaseAndTheKey) {
  const std::string figure = R"("published": {"quantity": "tflops_per_gpu", "value": 100,
                                 "flops": "narayanan-eq3"}, )";
  EXPECT_THAT(error_of(one_case(figure + R"("asumed": [], )" + kScenario)),
              HasSubstr("cases[0] (r1): asumed: unknown key"));
  EXPECT_THAT(error_of(one_case(R"("published": {"quantity": "tflops_per_gpu", "value": 100}, )" +
                                kScenario)),
              HasSubstr("cases[0] (r1): published.flops: missing"));
  EXPECT_THAT(
      error_of(one_case(R"("published": {"quantity": "tokens", "value": 1}, )" + kScenario)),
      HasSubstr("published.quantity: expected tflops_per_gpu, mfu, iteration_time_s or "
                "tokens_per_s_per_gpu"));
  EXPECT_THAT(error_of(one_case(R"("published": {"quantity": "mfu", "value": 41,
                                   "flops": "narayanan-eq3"}, )" +
                                kScenario)),
              HasSubstr("an MFU is a fraction"));
  EXPECT_THAT(error_of(one_case(figure + R"("unsupported": "x", )" + kScenario)),
              HasSubstr("expected either \"scenario\" or \"unsupported\""));
  EXPECT_THAT(error_of(one_case(figure + R"("scenario": {"parallel": {"tpp": 2}})")),
              HasSubstr("cases[0] (r1): scenario"));
  const std::string a_case =
      R"({"id": "r1", "group": "g", "source": {"title": "T", "ref": "R"}, )" + figure + kScenario +
      "}";
  EXPECT_THAT(error_of(R"({"cases": [)" + a_case + "," + a_case + "]}"),
              HasSubstr("cases[1]: id: \"r1\" is used twice"));
  EXPECT_THAT(error_of("[1, 2"), HasSubstr("cases.json:1:"));
}

}  // namespace
}  // namespace metron::validation
