#include "metron/base/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/diagnostics.h"

namespace metron {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(Errors, InputErrorsAreDistinguishedFromRuntimeFailures) {
  EXPECT_TRUE(InvalidConfig("x").is_input_error());
  EXPECT_TRUE(InvalidGraph({"x"}).is_input_error());
  EXPECT_TRUE(ParseError("f", 1, 1, "x").is_input_error());
  EXPECT_TRUE(Deadlock({"x"}).is_input_error());
  EXPECT_FALSE(BackendError("x").is_input_error());
  // A path the user named that cannot be written is theirs to fix (issue 14); zlib failing is not.
  EXPECT_TRUE(IoError("x").is_input_error());
  EXPECT_FALSE(IoError("x", IoError::Cause::kRuntime).is_input_error());
  EXPECT_FALSE(InternalError("f.cc", 3, "x").is_input_error());
}

TEST(Errors, InvalidGraphListsEveryProblemUnderACount) {
  const InvalidGraph error({"first problem", "second problem"});
  EXPECT_STREQ(error.what(), "invalid graph: 2 problems\n  - first problem\n  - second problem");
  EXPECT_THAT(error.problems(), ElementsAre("first problem", "second problem"));
  EXPECT_STREQ(InvalidGraph({"only"}).what(), "invalid graph: 1 problem\n  - only");
}

TEST(Errors, ParseErrorStartsWithSourceLineAndColumn) {
  const ParseError error("graph.json", 3, 14, "expected ','");
  EXPECT_STREQ(error.what(), "graph.json:3:14: expected ','");
  EXPECT_EQ(error.line(), 3U);
  EXPECT_EQ(error.column(), 14U);
}

TEST(Errors, ParseErrorWithoutPositionNamesOnlyTheSource) {
  EXPECT_STREQ(ParseError("graph.json", 0, 0, "tasks[2].rank: expected an integer").what(),
               "graph.json: tasks[2].rank: expected an integer");
}

TEST(Errors, DeadlockNamesEveryBlockedTask) {
  const Deadlock error({"rank 0: a", "rank 1: b"});
  EXPECT_STREQ(
      error.what(),
      "deadlock: no task can make progress; 2 blocked tasks\n  - rank 0: a\n  - rank 1: b");
}

TEST(Errors, AssertThrowsInternalErrorWithFileAndLine) {
  EXPECT_THAT(
      [] { METRON_ASSERT(1 + 1 == 3, "arithmetic"); },
      ThrowsMessage<InternalError>(::testing::AllOf(
          HasSubstr("error_test.cc:"), HasSubstr("assertion `1 + 1 == 3` failed: arithmetic"))));
  EXPECT_NO_THROW(METRON_ASSERT(true, "never"));
}

TEST(Diagnostics, CountsEveryOccurrenceButKeepsOnlyTheFirstMessages) {
  Diagnostics d;
  EXPECT_TRUE(d.empty());
  for (std::size_t i = 0; i < Diagnostics::kMaxMessages + 5; ++i) {
    d.add("unknown_key", "key " + std::to_string(i));
  }
  d.add("clamped", "value");
  EXPECT_EQ(d.count("unknown_key"), Diagnostics::kMaxMessages + 5);
  EXPECT_EQ(d.count("clamped"), 1U);
  EXPECT_EQ(d.count("never"), 0U);
  EXPECT_EQ(d.messages().size(), Diagnostics::kMaxMessages + 1);
  EXPECT_EQ(d.messages().front(), "key 0");
  EXPECT_EQ(d.messages().back(), "value");
}

}  // namespace
}  // namespace metron
