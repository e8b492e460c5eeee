// The fuzz replayer's mutator (fuzz/mutator.h): libFuzzer's dictionary format read as libFuzzer
// reads it, every shipped dictionary readable, and inputs that one seed makes alike, within the
// length bound, different from the seeds and reaching the dictionary's tokens.

#include "mutator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace metron::fuzz {
namespace {

Bytes bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(FuzzDictionary, ReadsTokensEscapesAndNamedEntriesAndSkipsComments) {
  const std::vector<Bytes> tokens = parse_dictionary(
      "# a comment\n"
      "\n"
      "\"{\"\n"
      "  \"traceEvents\"  \r\n"
      "kw1=\"if\"\n"
      "\"\\\"\\\\\"\n"
      "\"\\x00\\xff\"\n");
  EXPECT_EQ(tokens, (std::vector<Bytes>{bytes("{"), bytes("traceEvents"), bytes("if"),
                                        bytes("\"\\"), Bytes{0x00, 0xff}}));
}

TEST(FuzzDictionary, RefusesALineThatIsNoTokenNamingIt) {
  // The second line of each: a bare word, an unclosed quote, an unknown escape, a short \x, and
  // an empty token.
  for (const char* bad : {"word", "\"unclosed", "\"\\q\"", "\"\\x4\"", "\"\""}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT([&] { (void)parse_dictionary(std::string("\"{\"\n") + bad + "\n"); },
                ::testing::ThrowsMessage<std::runtime_error>(
                    ::testing::HasSubstr("dictionary line 2: expected \"token\"")));
  }
}

TEST(FuzzDictionary, EveryShippedDictionaryReads) {
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(METRON_SOURCE_DIR) + "/fuzz/dict")) {
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    const std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
    EXPECT_GT(parse_dictionary(text).size(), 10U);
  }
}

TEST(FuzzMutator, OneSeedMakesTheSameInputsWithinTheBound) {
  const std::vector<Bytes> seeds = {bytes("{\"a\": [1, 2, 3]}"), bytes("rank 0: 0F0 0B0")};
  const std::vector<Bytes> dictionary = {bytes("TOKEN")};
  Mutator a(seeds, dictionary, 7, 32);
  Mutator b(seeds, dictionary, 7, 32);
  Mutator c(seeds, dictionary, 8, 32);
  std::unordered_set<std::string>
      made;  // (a std::set of vectors trips GCC 12's -Wstringop-overread)
  bool token_seen = false;
  bool differs_from_c = false;
  for (int i = 0; i < 2000; ++i) {
    const Bytes x = a.next();
    EXPECT_EQ(x, b.next());
    differs_from_c = differs_from_c || x != c.next();
    EXPECT_LE(x.size(), 32U);
    token_seen = token_seen || std::search(x.begin(), x.end(), dictionary[0].begin(),
                                           dictionary[0].end()) != x.end();
    made.emplace(x.begin(), x.end());
  }
  EXPECT_TRUE(differs_from_c);
  EXPECT_TRUE(token_seen);
  // Edits make new inputs, not the seeds again and again.
  EXPECT_GT(made.size(), 1000U);
}

}  // namespace
}  // namespace metron::fuzz
