#include "metron/base/json_error_text.h"

#include <gtest/gtest.h>

namespace metron {
namespace {

// nlohmann counts a newline as ending its line: the next character is line + 1, column 1, and
// the newline itself reports as line + 1, column 0.
TEST(LineAndColumn, CountsAsTheJsonLexerDoes) {
  const std::string_view text = "{\n  \"a\" 1\n}";
  EXPECT_EQ(line_and_column(text, 1), (std::pair<std::size_t, std::size_t>{1, 1}));   // '{'
  EXPECT_EQ(line_and_column(text, 2), (std::pair<std::size_t, std::size_t>{2, 0}));   // '\n'
  EXPECT_EQ(line_and_column(text, 9), (std::pair<std::size_t, std::size_t>{2, 7}));   // '1'
  EXPECT_EQ(line_and_column(text, 11), (std::pair<std::size_t, std::size_t>{3, 1}));  // '}'
  // End of input counts as one more byte read.
  EXPECT_EQ(line_and_column(text, 12), (std::pair<std::size_t, std::size_t>{3, 2}));
}

TEST(ShortJsonReason, DropsTheLibraryPrefixOnly) {
  EXPECT_EQ(short_json_reason("[json.exception.parse_error.101] parse error at line 3, column 5: "
                              "syntax error while parsing value"),
            "syntax error while parsing value");
  EXPECT_EQ(short_json_reason("[json.exception.out_of_range.406] number overflow parsing '1e400'"),
            "number overflow parsing '1e400'");
  EXPECT_EQ(short_json_reason("plain text"), "plain text");
}

}  // namespace
}  // namespace metron
