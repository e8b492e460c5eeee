#include "metron/models/cost_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"

namespace metron::models {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::ThrowsMessage;

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// Entries of all three kinds, set out of order so that the output must sort them.
CostProfile sample() {
  CostProfile p;
  p.hardware = "dgx-h100";
  p.set_p2p(kMiB, true, 0.25e-3);
  p.set_p2p(kMiB, false, 0.5e-3);
  p.set_collective(CommOp::kReduceScatter, {.ranks = 8, .nodes = 1}, kMiB, 0.125e-3);
  p.set_collective(CommOp::kAllReduce, {.ranks = 16, .nodes = 2}, kMiB, 2e-3);
  p.set_collective(CommOp::kAllReduce, {.ranks = 8, .nodes = 1}, kMiB, 1e-3);
  p.set_compute("gemm:2048x4608x12288", Precision::kFp8, 0.125e-3);
  p.set_compute("gemm:2048x4608x12288", Precision::kBf16, 0.25e-3);
  p.set_compute("elementwise:softmax:1024", Precision::kBf16, 0.5e-3);
  return p;
}

TEST(CostProfile, LooksUpOnlyExactEntries) {
  const CostProfile p = sample();
  EXPECT_EQ(p.size(), 8U);
  EXPECT_EQ(p.compute("gemm:2048x4608x12288", Precision::kBf16), 0.25e-3);
  EXPECT_EQ(p.compute("gemm:2048x4608x12288", Precision::kFp16), std::nullopt);
  EXPECT_EQ(p.collective(CommOp::kAllReduce, {.ranks = 8, .nodes = 1}, kMiB), 1e-3);
  EXPECT_EQ(p.collective(CommOp::kAllReduce, {.ranks = 8, .nodes = 1}, kMiB + 1), std::nullopt);
  EXPECT_EQ(p.p2p(kMiB, false), 0.5e-3);
  EXPECT_EQ(p.p2p(kMiB - 1, false), std::nullopt);
}

TEST(CostProfileJson, WritesSortedEntriesOnePerLineInMilliseconds) {
  // Sorted by (key, dtype), by (op in to_string order, ranks, nodes, bytes), by (bytes,
  // same_node); seconds × 1000.
  EXPECT_EQ(
      to_json(sample()),
      "{\n"
      "  \"hardware\": \"dgx-h100\",\n"
      "  \"compute\": [\n"
      "    {\"key\":\"elementwise:softmax:1024\",\"dtype\":\"bf16\",\"time_ms\":0.5},\n"
      "    {\"key\":\"gemm:2048x4608x12288\",\"dtype\":\"bf16\",\"time_ms\":0.25},\n"
      "    {\"key\":\"gemm:2048x4608x12288\",\"dtype\":\"fp8\",\"time_ms\":0.125}\n"
      "  ],\n"
      "  \"collectives\": [\n"
      "    {\"op\":\"all-reduce\",\"ranks\":8,\"nodes\":1,\"bytes\":1048576,\"time_ms\":1.0},\n"
      "    {\"op\":\"all-reduce\",\"ranks\":16,\"nodes\":2,\"bytes\":1048576,\"time_ms\":2.0},\n"
      "    {\"op\":\"reduce-scatter\",\"ranks\":8,\"nodes\":1,\"bytes\":1048576,"
      "\"time_ms\":0.125}\n"
      "  ],\n"
      "  \"p2p\": [\n"
      "    {\"bytes\":1048576,\"same_node\":false,\"time_ms\":0.5},\n"
      "    {\"bytes\":1048576,\"same_node\":true,\"time_ms\":0.25}\n"
      "  ]\n"
      "}\n");
}

TEST(CostProfileJson, RoundTripsEntriesOfAllKinds) {
  const CostProfile p = sample();
  EXPECT_EQ(cost_profile_from_json(to_json(p)), p);
}

TEST(CostProfileJson, EmptyProfileRoundTrips) {
  EXPECT_EQ(to_json(CostProfile{}),
            "{\n  \"hardware\": \"\",\n  \"compute\": [],\n  \"collectives\": [],\n"
            "  \"p2p\": []\n}\n");
  EXPECT_EQ(cost_profile_from_json("{}"), CostProfile{});
}

TEST(CostProfileJson, ReadsMillisecondsAsSeconds) {
  const CostProfile p = cost_profile_from_json(
      R"({"compute": [{"key": "gemm:1x2x3", "dtype": "bf16", "time_ms": 0.21}],
          "collectives": [{"op": "all-to-all", "ranks": 64, "nodes": 8, "bytes": 33554432,
                           "time_ms": 3}],
          "p2p": [{"bytes": 0, "same_node": true, "time_ms": 0.004}]})");
  EXPECT_EQ(p.hardware, "");
  // 0.21 ms = 0.21 / 1000 s
  EXPECT_DOUBLE_EQ(*p.compute("gemm:1x2x3", Precision::kBf16), 0.21e-3);
  EXPECT_DOUBLE_EQ(*p.collective(CommOp::kAllToAll, {.ranks = 64, .nodes = 8}, 33554432), 3e-3);
  EXPECT_DOUBLE_EQ(*p.p2p(0, true), 4e-6);
}

// ms / 1000 and back × 1000 do not always give the same double (about 1% of decimals); the
// writer must still write a value that reads back to the same seconds.
TEST(CostProfileJson, ProfileReadFromJsonWritesBackToItself) {
  std::string text = R"({"p2p": [)";
  for (int k = 1; k <= 3000; ++k) {
    // 0.001, 0.002, ..., 3.0 ms, and some with more digits
    text += (k > 1 ? "," : "") + std::string(R"({"bytes":)") + std::to_string(k) +
            R"(,"same_node":true,"time_ms":)" + std::to_string(k) + "e-3}";
    text += R"(,{"bytes":)" + std::to_string(k) + R"(,"same_node":false,"time_ms":)" +
            std::to_string(k) + ".123456789}";
  }
  text += "]}";
  const CostProfile p = cost_profile_from_json(text);
  ASSERT_EQ(p.size(), 6000U);
  EXPECT_EQ(cost_profile_from_json(to_json(p)), p);
}

void expect_parse_error(const std::string& text, const std::string& message) {
  EXPECT_THAT([&] { cost_profile_from_json(text, "prof.json"); },
              ThrowsMessage<ParseError>(HasSubstr(message)))
      << text;
}

TEST(CostProfileJson, MalformedJsonNamesLineAndColumn) {
  EXPECT_THAT(
      [] { cost_profile_from_json("{\n  \"p2p\": [}", "prof.json"); },
      ThrowsMessage<ParseError>(AllOf(StartsWith("prof.json:2:"), HasSubstr("malformed JSON"))));
}

TEST(CostProfileJson, RejectsNegativeTimeNamingThePath) {
  expect_parse_error(R"({"collectives": [{"op": "all-reduce", "ranks": 8, "nodes": 1, "bytes": 1,)"
                     R"( "time_ms": -1}]})",
                     "prof.json: collectives[0].time_ms: expected a number >= 0, got -1");
}

TEST(CostProfileJson, RejectsUnknownOpAndDtypeListingTheValidNames) {
  expect_parse_error(
      R"({"collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "bytes": 1,)"
      R"( "time_ms": 1}]})",
      "collectives[0].op: expected one of \"all-reduce\", \"reduce-scatter\", \"all-gather\", "
      "\"reduce\", \"broadcast\", \"all-to-all\", got \"allreduce\"");
  expect_parse_error(R"({"compute": [{"key": "gemm:1x1x1", "dtype": "int8", "time_ms": 1}]})",
                     "compute[0].dtype: expected one of \"bf16\", \"fp16\", \"fp32\", \"fp8\", "
                     "got \"int8\"");
}

TEST(CostProfileJson, RejectsDuplicateEntriesNamingBothPaths) {
  expect_parse_error(R"({"p2p": [{"bytes": 1, "same_node": true, "time_ms": 1},)"
                     R"( {"bytes": 2, "same_node": true, "time_ms": 1},)"
                     R"( {"bytes": 1, "same_node": true, "time_ms": 2}]})",
                     "p2p[2]: duplicate entry (bytes 1, same_node true), first listed at p2p[0]");
  expect_parse_error(
      R"({"collectives": [{"op": "reduce", "ranks": 8, "nodes": 1, "bytes": 1, "time_ms": 1},)"
      R"( {"op": "reduce", "ranks": 8, "nodes": 1, "bytes": 1, "time_ms": 1}]})",
      "collectives[1]: duplicate entry (op \"reduce\", ranks 8, nodes 1, bytes 1), first listed "
      "at collectives[0]");
  expect_parse_error(R"({"compute": [{"key": "k", "dtype": "bf16", "time_ms": 1},)"
                     R"( {"key": "k", "dtype": "bf16", "time_ms": 1}]})",
                     "compute[1]: duplicate entry (key \"k\", dtype \"bf16\"), first listed at "
                     "compute[0]");
}

TEST(CostProfileJson, RejectsMissingAndMistypedFields) {
  expect_parse_error(R"({"compute": [{"key": "gemm:1x1x1", "time_ms": 1}]})",
                     "prof.json: compute[0]: missing key \"dtype\"");
  expect_parse_error(R"({"p2p": [{"bytes": 1, "time_ms": 1}]})",
                     "p2p[0]: missing key \"same_node\"");
  expect_parse_error(R"({"p2p": [{"bytes": -1, "same_node": true, "time_ms": 1}]})",
                     "p2p[0].bytes: expected an integer >= 0, got -1");
  expect_parse_error(R"({"p2p": [{"bytes": 1.5, "same_node": true, "time_ms": 1}]})",
                     "p2p[0].bytes: expected an integer >= 0, got 1.5");
  expect_parse_error(R"({"compute": {"key": "k"}})", "compute: expected an array, got {");
  expect_parse_error(R"({"compute": [{"key": "", "dtype": "bf16", "time_ms": 1}]})",
                     "compute[0].key: expected a non-empty string, got \"\"");
  expect_parse_error(R"({"hardware": 7})", "hardware: expected a string, got 7");
  expect_parse_error("[]", "top level: expected an object, got []");
  expect_parse_error(
      R"({"collectives": [{"op": "reduce", "ranks": 2, "nodes": 4, "bytes": 1, "time_ms": 1}]})",
      "collectives[0].nodes: expected at most ranks (2), got 4");
}

TEST(CostProfileJson, CountsUnknownKeys) {
  Diagnostics diagnostics;
  const CostProfile p = cost_profile_from_json(
      R"({"version": 1, "p2p": [{"bytes": 1, "same_node": true, "time_ms": 1, "note": "x"}]})",
      "prof.json", &diagnostics);
  EXPECT_EQ(p.size(), 1U);
  EXPECT_EQ(diagnostics.count("unknown_key"), 2U);
  EXPECT_THAT(diagnostics.messages(),
              ::testing::ElementsAre(::testing::StartsWith("version: unknown key"),
                                     ::testing::StartsWith("p2p[0].note: unknown key")));
}

TEST(CostProfileJson, WritingRejectsNegativeOrNonFiniteTimes) {
  CostProfile p;
  p.set_p2p(1, true, -1e-3);
  p.set_compute("k", Precision::kBf16, std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT([&] { (void)to_json(p); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("invalid profile: 2 problems"),
                        HasSubstr("compute[0].time_ms: expected a number >= 0, got nan"),
                        HasSubstr("p2p[0].time_ms: expected a number >= 0, got -1.0"))));
}

// Issue 17: the measured compute slow-down during communication is one optional number, written
// after "hardware" only when set, read back exactly.
TEST(CostProfileJson, SlowdownIsWrittenAfterTheHardwareAndRoundTrips) {
  CostProfile p;
  p.hardware = "cpu";
  p.compute_slowdown_during_comm = 0.116;
  p.set_p2p(4, true, 1e-3);
  const std::string text = to_json(p);
  EXPECT_THAT(text, StartsWith("{\n  \"hardware\": \"cpu\",\n"
                               "  \"compute_slowdown_during_comm\": 0.116,\n  \"compute\": []"));
  EXPECT_EQ(cost_profile_from_json(text), p);
  // Values that print with many digits still read back to the same double.
  for (const double s : {0.0, 1.0 / 3, 0.1 + 0.2, 1e-300, 10.0}) {
    p.compute_slowdown_during_comm = s;
    EXPECT_EQ(cost_profile_from_json(to_json(p)).compute_slowdown_during_comm, s);
  }
  EXPECT_EQ(cost_profile_from_json(R"({"p2p": []})").compute_slowdown_during_comm, std::nullopt);
  EXPECT_THAT(to_json(CostProfile{}), Not(HasSubstr("slowdown")));
  // The communication slow-down follows the compute one, under the same rules.
  p.compute_slowdown_during_comm = 0.5;
  p.comm_slowdown_during_compute = 0.75;
  EXPECT_THAT(to_json(p), HasSubstr("  \"compute_slowdown_during_comm\": 0.5,\n"
                                    "  \"comm_slowdown_during_compute\": 0.75,\n"));
  EXPECT_EQ(cost_profile_from_json(to_json(p)), p);
  expect_parse_error(R"({"comm_slowdown_during_compute": 11})",
                     "comm_slowdown_during_compute: expected a number between 0 and 10, got 11");
}

TEST(CostProfileJson, RejectsASlowdownOutsideZeroToTen) {
  expect_parse_error(R"({"compute_slowdown_during_comm": -0.1})",
                     "prof.json: compute_slowdown_during_comm: expected a number between 0 and "
                     "10, got -0.1");
  expect_parse_error(R"({"compute_slowdown_during_comm": 12})",
                     "compute_slowdown_during_comm: expected a number between 0 and 10, got 12");
  expect_parse_error(R"({"compute_slowdown_during_comm": "0.1"})",
                     "compute_slowdown_during_comm: expected a number between 0 and 10, got "
                     "\"0.1\"");
  expect_parse_error(R"({"compute_slowdown_during_comm": null})",
                     "compute_slowdown_during_comm: expected a number between 0 and 10, got null");
  CostProfile p;
  p.compute_slowdown_during_comm = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT([&] { (void)to_json(p); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "invalid profile: compute_slowdown_during_comm: expected a number between 0 "
                  "and 10, got nan")));
  p.compute_slowdown_during_comm = 10.5;
  EXPECT_THROW((void)to_json(p), InvalidConfig);
}

TEST(CostProfileJson, AMisspelledSlowdownIsAnUnknownKey) {
  Diagnostics diagnostics;
  const CostProfile p =
      cost_profile_from_json(R"({"compute_slowdown_during_com": 0.1})", "prof.json", &diagnostics);
  EXPECT_EQ(p.compute_slowdown_during_comm, std::nullopt);
  ASSERT_EQ(diagnostics.count("unknown_key"), 1U);
  EXPECT_THAT(diagnostics.messages().front(),
              AllOf(StartsWith("compute_slowdown_during_com: unknown key"),
                    HasSubstr("did you mean \"compute_slowdown_during_comm\"")));
}

// Issue 14: a profiled time beyond a day is refused at its JSON path, with the limit.
TEST(CostProfileJson, RefusesATimeBeyondADay) {
  EXPECT_THAT(
      [] {
        (void)cost_profile_from_json(
            R"({"p2p": [{"bytes": 1, "same_node": true, "time_ms": 1e12}]})", "p.json");
      },
      ThrowsMessage<ParseError>(
          AllOf(HasSubstr("p.json: p2p[0].time_ms"), HasSubstr("expected at most 86400000 ms"))));
}

}  // namespace
}  // namespace metron::models
