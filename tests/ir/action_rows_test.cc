// Per-rank rows: the text form (Note [rows text form]) and PyTorch's CSV form.

#include "metron/ir/action_rows.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"

namespace metron::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using Row = std::vector<std::optional<Action>>;

std::optional<Action> act(ActionType type, std::int32_t stage, std::int32_t mb) {
  return Action{.type = type, .stage = stage, .microbatch = mb};
}
std::optional<Action> fwd(std::int32_t s, std::int32_t mb) {
  return act(ActionType::kForward, s, mb);
}
std::optional<Action> inp(std::int32_t s, std::int32_t mb) {
  return act(ActionType::kBackwardInput, s, mb);
}
std::optional<Action> wgt(std::int32_t s, std::int32_t mb) {
  return act(ActionType::kBackwardWeight, s, mb);
}
std::optional<Action> bwd(std::int32_t s, std::int32_t mb) {
  return act(ActionType::kBackward, s, mb);
}
std::optional<Action> all_reduce(std::string group, std::int64_t seq, std::int64_t bytes) {
  return Action{
      .type = ActionType::kCollective,
      .collective = CollectiveAction{.group = std::move(group), .seq = seq, .bytes = bytes}};
}
const std::optional<Action> kIdle = std::nullopt;

TEST(ParseRows, ReadsGroupsRanksIdlesAndSkipsComments) {
  const char* text =
      "# a 2-rank schedule\n"
      "\n"
      "group dp0: 0 1\n"
      "  group  solo :3\n"
      "rank 0: 0F0 _ 0B0 ALL_REDUCE[dp0#0,bytes=8]\n"
      "rank 1:\t1F0   1B0\t_ ALL_REDUCE[dp0#0,bytes=8]   \n"
      "   # indented comment\n"
      "rank 2:\n";
  ActionRows expected{.groups = {{.name = "dp0", .ranks = {0, 1}}, {.name = "solo", .ranks = {3}}},
                      .rows = {Row{fwd(0, 0), kIdle, bwd(0, 0), all_reduce("dp0", 0, 8)},
                               Row{fwd(1, 0), bwd(1, 0), kIdle, all_reduce("dp0", 0, 8)}, Row{}}};
  EXPECT_EQ(parse_rows(text), expected);
}

TEST(ParseRows, AcceptsWindowsLineEndingsAndNoFinalNewline) {
  ActionRows expected{.rows = {Row{fwd(0, 0)}, Row{fwd(1, 0)}}};
  EXPECT_EQ(parse_rows("rank 0: 0F0\r\nrank 1: 1F0"), expected);
}

TEST(FormatRows, WritesGroupsThenRanksWithSingleSpaces) {
  ActionRows rows{.groups = {{.name = "dp0", .ranks = {0, 2}}, {.name = "empty"}},
                  .rows = {Row{fwd(0, 0), kIdle, inp(0, 0), wgt(0, 0)}, Row{}, Row{kIdle}}};
  EXPECT_EQ(format_rows(rows),
            "group dp0: 0 2\n"
            "group empty:\n"
            "rank 0: 0F0 _ 0I0 0W0\n"
            "rank 1:\n"
            "rank 2: _\n");
  EXPECT_EQ(parse_rows(format_rows(rows)), rows);
}

TEST(FormatRows, NoRowsIsEmptyText) {
  EXPECT_EQ(format_rows(ActionRows{}), "");
  EXPECT_EQ(parse_rows(""), ActionRows{});
}

// Issue 14: `rank 0: 0F0 WAIT(WAIT(...` 50,000 deep overflowed the stack of the action parser.
TEST(ParseRowsError, DeeplyNestedActionIsRefusedAtItsLine) {
  std::string row = "rank 1: 1F0 ";
  for (int i = 0; i < 50'000; ++i) row += "WAIT(";
  // The token starts at column 13; its 17th "(" is 84 characters in.
  EXPECT_THAT([&] { parse_rows("rank 0: 0F0\n" + row + "\n", "o.txt"); },
              ThrowsMessage<ParseError>(
                  "o.txt:2:97: action nested too deeply; expected at most 16 levels of WAIT(...) "
                  "and (...)OVERLAP_F_B, found a deeper one here"));
}

TEST(ParseRowsError, DuplicateRankIsLocated) {
  EXPECT_THAT([] { parse_rows("rank 0: 0F0\nrank 0: 0F1\n", "s.txt"); },
              ThrowsMessage<ParseError>("s.txt:2:6: rank 0 appears twice; expected \"rank 1:\""));
}

TEST(ParseRowsError, OutOfOrderRankIsLocated) {
  EXPECT_THAT([] { parse_rows("rank 0: 0F0\nrank  2: 2F0\n", "s.txt"); },
              ThrowsMessage<ParseError>("s.txt:2:7: rank 2 is out of order; expected \"rank 1:\""));
  EXPECT_THAT([] { parse_rows("rank 1: 1F0\n"); },
              ThrowsMessage<ParseError>(HasSubstr("<text>:1:6: rank 1 is out of order; expected "
                                                  "\"rank 0:\"")));
}

TEST(ParseRowsError, BadTokenIsLocatedInsideTheLine) {
  EXPECT_THAT([] { parse_rows("rank 0: 0F0\nrank 1: 1F0  1X1\n", "s.txt"); },
              ThrowsMessage<ParseError>(HasSubstr("s.txt:2:15: unknown action \"1X1\"")));
}

TEST(ParseRowsError, UnknownLineStart) {
  EXPECT_THAT([] { parse_rows("\n  ranks 0: 0F0\n"); },
              ThrowsMessage<ParseError>(
                  "<text>:2:3: unknown line start \"ranks\"; expected \"group <name>: <ranks>\", "
                  "\"rank <r>: <actions>\", a # comment or a blank line"));
}

TEST(ParseRowsError, GroupsComeBeforeRanksAndOnlyOnce) {
  EXPECT_THAT([] { parse_rows("rank 0: 0F0\ngroup dp: 0\n"); },
              ThrowsMessage<ParseError>(HasSubstr("2:7: group \"dp\" is declared after the rank "
                                                  "rows; expected every \"group\" line before "
                                                  "\"rank 0:\"")));
  EXPECT_THAT([] { parse_rows("group dp: 0\ngroup dp: 1\n"); },
              ThrowsMessage<ParseError>(HasSubstr("2:7: group \"dp\" is declared twice")));
}

TEST(ParseRowsError, ColonsAndNumbersAreRequired) {
  EXPECT_THAT([] { parse_rows("rank 0 0F0\n"); },
              ThrowsMessage<ParseError>(HasSubstr("1:8: expected \":\" after the rank number")));
  EXPECT_THAT([] { parse_rows("rank x: 0F0\n"); },
              ThrowsMessage<ParseError>(HasSubstr("1:6: expected a rank number after \"rank\", "
                                                  "found \"x\"")));
  EXPECT_THAT([] { parse_rows("group dp: 0 one\n"); },
              ThrowsMessage<ParseError>(HasSubstr("1:13: expected a rank number, found \"one\"")));
  EXPECT_THAT([] { parse_rows("group : 0\n"); },
              ThrowsMessage<ParseError>(HasSubstr("1:7: expected a group name after \"group\"")));
}

// CSV, as PyTorch's _dump_csv writes it for a 2-rank zero-bubble schedule (compute only).
TEST(ParseCsv, ReadsPyTorchRowsWithEmptyCellsAsIdle) {
  const char* csv =
      "0F0,0F1,,0I0,0W0,0I1,0W1\n"
      "1F0,,1I0,1F1,1W0,1I1,1W1\n";
  ActionRows expected{
      .rows = {Row{fwd(0, 0), fwd(0, 1), kIdle, inp(0, 0), wgt(0, 0), inp(0, 1), wgt(0, 1)},
               Row{fwd(1, 0), kIdle, inp(1, 0), fwd(1, 1), wgt(1, 0), inp(1, 1), wgt(1, 1)}}};
  EXPECT_EQ(parse_csv(csv), expected);
}

TEST(ParseCsv, StripsSpacesAndReadsPyTorchCommsAndCrLf) {
  ActionRows expected{.rows = {Row{fwd(0, 0), act(ActionType::kSendForward, 0, 0), kIdle},
                               Row{act(ActionType::kRecvForward, 1, 0), fwd(1, 0),
                                   act(ActionType::kUnshard, 1, -1)}}};
  EXPECT_EQ(parse_csv(" 0F0 , 0SEND_F0 ,  \r\n1RECV_F0,1F0,1UNSHARD\r\n"), expected);
}

TEST(ParseCsv, ReadsQuotedCellsAndUnderscoreIdles) {
  ActionRows expected{.rows = {Row{all_reduce("dp", 1, 4), fwd(0, 0), kIdle, kIdle}}};
  EXPECT_EQ(parse_csv(" \"ALL_REDUCE[dp#1,bytes=4]\" ,\"0F0\",\"\",_\n"), expected);
}

TEST(ParseCsv, BlankLineIsARankWithoutActions) {
  ActionRows expected{.rows = {Row{fwd(0, 0)}, Row{}, Row{kIdle}}};
  EXPECT_EQ(parse_csv("0F0\n\n\"\"\n"), expected);
}

TEST(FormatCsv, WritesCellsWithoutSpacesAndQuotesCommas) {
  ActionRows rows{.rows = {Row{fwd(0, 0), fwd(0, 1), kIdle, inp(0, 0), wgt(0, 0)},
                           Row{kIdle, all_reduce("dp", 0, 8), bwd(1, 0), kIdle}, Row{},
                           Row{kIdle}}};
  std::string expected =
      "0F0,0F1,,0I0,0W0\n"
      ",\"ALL_REDUCE[dp#0,bytes=8]\",1B0,\n"
      "\n"
      "\"\"\n";
  EXPECT_EQ(format_csv(rows), expected);
  EXPECT_EQ(parse_csv(expected), rows);
}

TEST(FormatCsvError, GroupsHaveNoPlaceInCsv) {
  ActionRows rows{.groups = {{.name = "dp0", .ranks = {0}}, {.name = "dp1", .ranks = {1}}},
                  .rows = {Row{}, Row{}}};
  EXPECT_THAT([&] { (void)format_csv(rows); },
              ThrowsMessage<InvalidConfig>("cannot write groups \"dp0\", \"dp1\" as CSV: the CSV "
                                           "form has no place for them; use the text form"));
}

TEST(ParseCsvError, BadCellIsLocated) {
  EXPECT_THAT([] { parse_csv("0F0\n0F1, 0X1\n", "z.csv"); },
              ThrowsMessage<ParseError>(HasSubstr("z.csv:2:7: unknown action \"0X1\"")));
  EXPECT_THAT([] { parse_csv("\"0F0\",\"1Q0\"\n", "z.csv"); },
              ThrowsMessage<ParseError>(HasSubstr("z.csv:1:9: unknown action \"1Q0\"")));
}

TEST(ParseCsvError, QuotesMustBeClosedAndFollowedByAComma) {
  EXPECT_THAT(
      [] { parse_csv("0F0,\"0F1\n"); },
      ThrowsMessage<ParseError>("<csv>:1:5: unterminated quoted cell; expected a closing \""));
  EXPECT_THAT([] { parse_csv("\"0F0\"x,0F1\n"); },
              ThrowsMessage<ParseError>("<csv>:1:6: unexpected \"x\" after a quoted cell; expected "
                                        "\",\" or the end of the line"));
}

}  // namespace
}  // namespace metron::ir
