// The checks every JSON reader runs on the raw text before parsing (issue 14): nesting depth and
// locating a number too large for a double.

#include "metron/base/json_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "metron/base/error.h"

namespace metron {
namespace {

using ::testing::ThrowsMessage;

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// nlohmann's lexer ends the input at a NUL: every reader refuses one instead (issue 14's fuzzing).
TEST(JsonNul, TheFirstNulIsFoundByItsOneBasedOffset) {
  EXPECT_EQ(find_json_nul("{}"), std::nullopt);
  EXPECT_EQ(find_json_nul(std::string("{}\0]]", 5)), 3U);
  EXPECT_EQ(find_json_nul(std::string("\0", 1)), 1U);
}

TEST(JsonDepth, NestingUpToTheLimitIsAccepted) {
  EXPECT_EQ(find_json_too_deep(nested(kMaxJsonDepth)), std::nullopt);
  EXPECT_EQ(find_json_too_deep(R"({"a": [1, {"b": []}], "c": {}})", 4), std::nullopt);
  EXPECT_EQ(find_json_too_deep(R"({"a": [1, {"b": []}], "c": {}})", 3), 17U);
}

TEST(JsonDepth, TheBracketOneLevelTooDeepIsFound) {
  EXPECT_EQ(find_json_too_deep(nested(kMaxJsonDepth + 1)), kMaxJsonDepth + 1);
  EXPECT_EQ(find_json_too_deep(R"({"a": [[1]]})", 2), 8U);
  // Closed levels do not count toward the next one.
  EXPECT_EQ(find_json_too_deep("[[]] [[]] [[[]]]", 2), 13U);
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(find_json_too_deep(R"(["[[[[", "{{{\"[[[", "\\"])", 1), std::nullopt);
  EXPECT_EQ(find_json_too_deep(R"(["\\", [[]]])", 2), 9U);
}

TEST(JsonDepth, AHundredThousandLevelsAreRefusedWithPlaceAndLimit) {
  const std::string text = "{\n  \"unknown\": " + std::string(100'000, '[');
  EXPECT_THAT([&] { check_json_depth(text, "s.json"); },
              ThrowsMessage<ParseError>(
                  "s.json:2:525: JSON nested too deeply; expected at most 512 nested arrays and "
                  "objects, found a deeper one here"));
}

TEST(JsonNumbers, TheNumberTooLargeForADoubleIsLocated) {
  EXPECT_EQ(find_json_number_overflow(R"({"a": 1e300, "b": -1e400})"), 19U);
  EXPECT_EQ(find_json_number_overflow(R"({"1e400": 1e-400, "c": 12})"), std::nullopt);
  EXPECT_EQ(find_json_number_overflow("[0.5E+999]"), 2U);
}

}  // namespace
}  // namespace metron
