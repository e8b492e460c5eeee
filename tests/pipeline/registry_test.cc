#include "metron/pipeline/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "metron/base/error.h"

namespace metron::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(Registry, ListsEveryScheduleTheCommandAcceptsOnce) {
  // The names of issue 3's `metron schedule --schedule NAME`.
  const std::set<std::string> expected{"none",
                                       "gpipe",
                                       "1f1b",
                                       "interleaved-1f1b",
                                       "interleaved-1f1b-legacy",
                                       "looped-bfs",
                                       "zb-h1",
                                       "zb-h2",
                                       "zb-v",
                                       "zb-auto",
                                       "dualpipe",
                                       "dualpipe-v"};
  std::set<std::string> names;
  for (const auto& s : all_schedules()) EXPECT_TRUE(names.insert(std::string(s.name)).second);
  EXPECT_EQ(names, expected);
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  EXPECT_THAT([] { (void)find_schedule("1f2b"); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("unknown schedule \"1f2b\"; expected one of none, gpipe, 1f1b, ")));
}

TEST(Registry, GenericConstraintsAreCheckedBeforeGenerating) {
  EXPECT_THAT([] { (void)generate_order({.name = "1f1b", .pp = 0, .microbatches = 4}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "schedule \"1f1b\" (pp=0, vp=1, microbatches=4): pp, vp and microbatches must "
                  "be at least 1")));
  EXPECT_THAT([] { (void)generate_order({.name = "zb-v", .pp = 4, .vp = 3, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(HasSubstr("needs exactly 2 chunks per rank; got vp=3")));
  EXPECT_THAT(
      [] {
        (void)generate_order(
            {.name = "dualpipe-v", .pp = 2, .vp = 2, .microbatches = 8, .forward_only = true});
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("has no forward-only form")));
}

}  // namespace
}  // namespace metron::pipeline
