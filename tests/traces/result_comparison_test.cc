// Predicted against measured from two result JSONs (traces/result_comparison.h): the figures
// read back from small hand-written results, the report's errors computed by hand, and every
// kind of document that is no result refused with the place it is wrong at.

#include "metron/traces/result_comparison.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"

namespace metron::traces {
namespace {

using ::testing::HasSubstr;

/// A result of two ranks in the shape `simulate --json` writes (with keys compare ignores).
/// `rank1` replaces rank 1's object when given.
std::string result(double iteration_ms, double compute0_ms, const std::string& rank1 = "") {
  return R"({"iteration_time_ms": )" + std::to_string(iteration_ms) +
         R"(, "tokens_per_s": 5, "bubble_fraction": 0.25, "exposed_comm_fraction": 0.1,
  "per_rank": [
   {"rank": 0, "compute_ms": )" +
         std::to_string(compute0_ms) +
         R"(, "idle_ms": 2, "bubble_ms": {"warmup": 1.5, "wait_recv": 0.5},
    "comm_ms": 3, "comm_exposed_ms": 1, "comm_overlapped_ms": 2, "peak_memory_bytes": 4e9,
    "bytes_sent": {"pp": 10}},
   )" +
         (rank1.empty() ? R"({"rank": 1, "compute_ms": 6, "idle_ms": 4, "bubble_ms": {},
    "comm_ms": 0, "comm_exposed_ms": 0, "comm_overlapped_ms": 0, "peak_memory_bytes": 1000})"
                        : rank1) +
         "]}";
}

TEST(ResultComparison, ReadsTheFiguresCompareUses) {
  const ResultFigures r = read_result_figures(result(10, 8), "r.json");
  EXPECT_EQ(r.iteration_time_ms, 10);
  EXPECT_EQ(r.bubble_fraction, 0.25);
  EXPECT_EQ(r.exposed_comm_fraction, 0.1);
  ASSERT_EQ(r.ranks.size(), 2U);
  EXPECT_EQ(r.ranks[0].compute_ms, 8);
  EXPECT_EQ(r.ranks[0].idle_ms, 2);
  EXPECT_EQ(r.ranks[0].comm_ms, 3);
  EXPECT_EQ(r.ranks[0].comm_exposed_ms, 1);
  EXPECT_EQ(r.ranks[0].comm_overlapped_ms, 2);
  EXPECT_EQ(r.ranks[0].peak_memory_bytes, 4e9);
  EXPECT_EQ(r.ranks[0].bubble_ms,
            (std::map<std::string, double>{{"warmup", 1.5}, {"wait_recv", 0.5}}));
  EXPECT_TRUE(r.ranks[1].bubble_ms.empty());
  EXPECT_EQ(r.ranks[1].peak_memory_bytes, 1000);
}

TEST(ResultComparison, TheReportsErrorsAreTheHandComputedOnes) {
  // Predicted 12 ms against a measured 10: +20.0 %; rank 0's compute 9 against 8: +12.5 %;
  // equal figures +0.0 %; a measured 0 (rank 1's communication) has no error to print.
  const std::string report = compare_result_figures(read_result_figures(result(12, 9), "p"),
                                                    read_result_figures(result(10, 8), "m"));
  EXPECT_THAT(report, HasSubstr("iteration time                    12.000 ms      10.000 ms"
                                "    +20.0%\n"));
  EXPECT_THAT(report, HasSubstr("  compute                          9.000 ms       8.000 ms"
                                "    +12.5%\n"));
  EXPECT_THAT(report, HasSubstr("bubble fraction                   25.000  %      25.000  %"
                                "     +0.0%\n"));
  EXPECT_THAT(report, HasSubstr("  bubble wait_recv                 0.500 ms       0.500 ms"));
  EXPECT_THAT(report, HasSubstr("  peak memory                   4000.000 MB    4000.000 MB"));
  EXPECT_THAT(report, HasSubstr("rank 1\n  compute                          6.000 ms       6.000 ms"
                                "     +0.0%\n"));
  EXPECT_THAT(report, HasSubstr("    exposed                        0.000 ms       0.000 ms"
                                "          \n"));
}

TEST(ResultComparison, ResultsOfDifferentStepsAreRefused) {
  const std::string one_rank = R"({"iteration_time_ms": 1, "bubble_fraction": 0,
      "exposed_comm_fraction": 0, "per_rank": [{"compute_ms": 1, "idle_ms": 0, "bubble_ms": {},
      "comm_ms": 0, "comm_exposed_ms": 0, "comm_overlapped_ms": 0, "peak_memory_bytes": 0}]})";
  EXPECT_THAT(
      [&] {
        (void)compare_result_figures(read_result_figures(one_rank, "p"),
                                     read_result_figures(result(1, 1), "m"));
      },
      ::testing::ThrowsMessage<InvalidConfig>(HasSubstr("the results have 1 and 2 ranks")));
}

// Each document that is no result, and the place and expectation its error names. Before the
// reader, compare treated a missing or mistyped figure as 0, printed 1e308 as a 309-digit number
// and read per_rank of a result without it through nlohmann's unchecked const operator[].
TEST(ResultComparison, ADocumentThatIsNoResultIsRefusedNamingThePlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2]", "r.json: top level: expected a result JSON object, got an array"},
      {R"({"bubble_fraction": 0})",
       "r.json: iteration_time_ms: expected a number from 0 to 9.22337e+12 ms, got nothing"},
      {R"({"iteration_time_ms": "5"})", "iteration_time_ms: expected a number from 0 to "},
      {R"({"iteration_time_ms": 1e308})", ", got 1e+308"},
      {R"({"iteration_time_ms": -1})", ", got -1"},
      {R"({"iteration_time_ms": 1, "bubble_fraction": 1.5, "exposed_comm_fraction": 0})",
       "bubble_fraction: expected a number from 0 to 1, got 1.5"},
      {R"({"iteration_time_ms": 1, "bubble_fraction": 0, "exposed_comm_fraction": 0})",
       "per_rank: expected a non-empty array of the ranks' figures, got nothing"},
      {R"({"iteration_time_ms": 1, "bubble_fraction": 0, "exposed_comm_fraction": 0,
           "per_rank": []})",
       "per_rank: expected a non-empty array of the ranks' figures, got an empty array"},
      {result(1, 1, "7"), "per_rank[1]: expected an object of the rank's figures, got number"},
      {result(1, 1, R"({"compute_ms": 1})"), "per_rank[1].idle_ms: expected a number from 0"},
      {result(1, -3), "per_rank[0].compute_ms: expected a number from 0 to 9.22337e+12 ms, got -3"},
      {result(1, 1, R"({"compute_ms": 1, "idle_ms": 0, "comm_ms": 0, "comm_exposed_ms": 0,
           "comm_overlapped_ms": 0, "peak_memory_bytes": 0, "bubble_ms": [1]})"),
       "per_rank[1].bubble_ms: expected an object of times by cause, got an array"},
      {result(1, 1, R"({"compute_ms": 1, "idle_ms": 0, "comm_ms": 0, "comm_exposed_ms": 0,
           "comm_overlapped_ms": 0, "peak_memory_bytes": 0, "bubble_ms": {"warmup": null}})"),
       "per_rank[1].bubble_ms.warmup: expected a number from 0 to 9.22337e+12 ms, got null"},
      {result(1, 1, R"({"compute_ms": 1, "idle_ms": 0, "comm_ms": 0, "comm_exposed_ms": 0,
           "comm_overlapped_ms": 0, "peak_memory_bytes": 0, "bubble_ms": {"a\u001b[2J": 1}})"),
       "per_rank[1].bubble_ms: expected causes named by letters, digits and _ (at most 64)"},
      {result(1, 1, R"({"compute_ms": 1, "idle_ms": 0, "comm_ms": 0, "comm_exposed_ms": 0,
           "comm_overlapped_ms": 0, "peak_memory_bytes": 1e19, "bubble_ms": {}})"),
       "per_rank[1].peak_memory_bytes: expected a number from 0 to 9.22337e+18 bytes, got 1e+19"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    EXPECT_THAT([&] { (void)read_result_figures(c.first, "r.json"); },
                ::testing::ThrowsMessage<InvalidConfig>(HasSubstr(c.second)));
  }
  EXPECT_THROW((void)read_result_figures("{", "r.json"), ParseError);
}

}  // namespace
}  // namespace metron::traces
