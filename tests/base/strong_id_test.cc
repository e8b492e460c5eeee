#include "metron/base/strong_id.h"

#include <gtest/gtest.h>

#include <type_traits>
#include <unordered_set>

namespace metron {
namespace {

struct AppleTag {};
struct PearTag {};
using AppleId = StrongId<AppleTag>;
using PearId = StrongId<PearTag>;

TEST(StrongId, DefaultIsNoneAndExplicitValuesAreValid) {
  EXPECT_FALSE(AppleId{}.valid());
  EXPECT_EQ(AppleId{}.value(), -1);
  EXPECT_TRUE(AppleId{0}.valid());
  EXPECT_EQ(AppleId{7}.index(), 7U);
}

TEST(StrongId, DistinctTagsAreDistinctTypesWithoutImplicitConversion) {
  static_assert(!std::is_convertible_v<AppleId, PearId>);
  static_assert(!std::is_convertible_v<int, AppleId>);
  static_assert(std::is_trivially_copyable_v<AppleId>);
}

TEST(StrongId, OrdersAndHashesByValue) {
  EXPECT_LT(AppleId{1}, AppleId{2});
  EXPECT_EQ(AppleId{3}, AppleId{3});
  std::unordered_set<AppleId> set{AppleId{1}, AppleId{1}, AppleId{2}};
  EXPECT_EQ(set.size(), 2U);
}

}  // namespace
}  // namespace metron
