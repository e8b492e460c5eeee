// One action token: every kind parses into the fields the grammar (Note [action syntax]) gives
// it, prints back canonically, and every malformed token is a located ParseError.

#include "metron/ir/action.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/base/error.h"

namespace metron::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Action simple(ActionType type, std::int32_t stage, std::int32_t mb) {
  return Action{.type = type, .stage = stage, .microbatch = mb};
}

Action collective(CollectiveAction c, std::int32_t stage = -1, std::int32_t mb = -1) {
  return Action{.type = ActionType::kCollective,
                .stage = stage,
                .microbatch = mb,
                .collective = std::move(c)};
}

TEST(ParseAction, ComputeTokensCarryStageAndMicrobatch) {
  EXPECT_EQ(parse_action("2F0"), simple(ActionType::kForward, 2, 0));
  EXPECT_EQ(parse_action("1I3"), simple(ActionType::kBackwardInput, 1, 3));
  EXPECT_EQ(parse_action("3W1"), simple(ActionType::kBackwardWeight, 3, 1));
  EXPECT_EQ(parse_action("1B0"), simple(ActionType::kBackward, 1, 0));
  EXPECT_EQ(parse_action("0R2"), simple(ActionType::kRecompute, 0, 2));
  EXPECT_EQ(parse_action("12F345"), simple(ActionType::kForward, 12, 345));
}

TEST(ParseAction, StepAndOtherTakeOptionalTags) {
  EXPECT_EQ(parse_action("STEP"), simple(ActionType::kOptimizerStep, -1, -1));
  EXPECT_EQ(parse_action("1STEP"), simple(ActionType::kOptimizerStep, 1, -1));
  EXPECT_EQ(parse_action("OTHER"), simple(ActionType::kOtherCompute, -1, -1));
  EXPECT_EQ(parse_action("2OTHER"), simple(ActionType::kOtherCompute, 2, -1));
  EXPECT_EQ(parse_action("OTHER4"), simple(ActionType::kOtherCompute, -1, 4));
  EXPECT_EQ(parse_action("2OTHER4"), simple(ActionType::kOtherCompute, 2, 4));
}

TEST(ParseAction, PointToPointTokensTakeAnOptionalPeer) {
  EXPECT_EQ(parse_action("0SEND_F1"), simple(ActionType::kSendForward, 0, 1));
  EXPECT_EQ(parse_action("1RECV_F0"), simple(ActionType::kRecvForward, 1, 0));
  EXPECT_EQ(parse_action("1SEND_B2"), simple(ActionType::kSendBackward, 1, 2));
  EXPECT_EQ(parse_action("0RECV_B2"), simple(ActionType::kRecvBackward, 0, 2));
  Action with_peer = simple(ActionType::kRecvForward, 1, 0);
  with_peer.peer = 3;
  EXPECT_EQ(parse_action("1RECV_F0@3"), with_peer);
}

TEST(ParseAction, PyTorchFsdpTokensHaveNoMicrobatch) {
  EXPECT_EQ(parse_action("0UNSHARD"), simple(ActionType::kUnshard, 0, -1));
  EXPECT_EQ(parse_action("1RESHARD"), simple(ActionType::kReshard, 1, -1));
  EXPECT_EQ(parse_action("2REDUCE_GRAD"), simple(ActionType::kReduceGrad, 2, -1));
}

TEST(ParseAction, OverlapHoldsTwoComputeHalves) {
  Action expected{.type = ActionType::kOverlapForwardBackward,
                  .sub = {simple(ActionType::kForward, 0, 7), simple(ActionType::kBackward, 7, 3)}};
  EXPECT_EQ(parse_action("(0F7;7B3)OVERLAP_F_B"), expected);
}

TEST(ParseAction, CollectiveReadsGroupSeqAndKeys) {
  EXPECT_EQ(parse_action("ALL_REDUCE[dp0#0,bytes=4194304,bucket=0]"),
            collective({.op = CollectiveOp::kAllReduce,
                        .group = "dp0",
                        .seq = 0,
                        .bytes = 4194304,
                        .bucket = 0}));
  EXPECT_EQ(parse_action("BROADCAST[tp-1#12,bytes=8,dtype=bf16,root=2,bucket=3,stage=1,mb=4,"
                         "stream=dp-grad]"),
            collective({.op = CollectiveOp::kBroadcast,
                        .group = "tp-1",
                        .seq = 12,
                        .bytes = 8,
                        .dtype = DType::kBf16,
                        .root = 2,
                        .bucket = 3,
                        .stream = "dp-grad"},
                       1, 4));
}

TEST(ParseAction, EveryCollectiveOpHasItsName) {
  const std::pair<const char*, CollectiveOp> ops[] = {
      {"ALL_REDUCE", CollectiveOp::kAllReduce}, {"REDUCE_SCATTER", CollectiveOp::kReduceScatter},
      {"ALL_GATHER", CollectiveOp::kAllGather}, {"REDUCE", CollectiveOp::kReduce},
      {"BROADCAST", CollectiveOp::kBroadcast},  {"ALL_TO_ALL", CollectiveOp::kAllToAll},
  };
  for (const auto& [name, op] : ops) {
    std::string token = std::string(name) + "[g#1,bytes=2]";
    EXPECT_EQ(parse_action(token), collective({.op = op, .group = "g", .seq = 1, .bytes = 2}))
        << token;
  }
}

TEST(ParseAction, DefaultsAreNormalisedAway) {
  // Keys in another order, dtype=fp32 and stream=comm all mean the defaults.
  Action a = parse_action("ALL_GATHER[g#3,stream=comm,bucket=1,dtype=fp32,bytes=16]");
  EXPECT_EQ(
      a, collective(
             {.op = CollectiveOp::kAllGather, .group = "g", .seq = 3, .bytes = 16, .bucket = 1}));
  EXPECT_EQ(to_string(a), "ALL_GATHER[g#3,bytes=16,bucket=1]");
}

TEST(ParseAction, WaitHoldsTheAwaitedAction) {
  Action expected{.type = ActionType::kHostWait, .sub = {simple(ActionType::kSendForward, 0, 1)}};
  EXPECT_EQ(parse_action("WAIT(0SEND_F1)"), expected);
  Action on_collective{.type = ActionType::kHostWait,
                       .sub = {collective({.group = "dp0", .seq = 2, .bytes = 4})}};
  EXPECT_EQ(parse_action("WAIT(ALL_REDUCE[dp0#2,bytes=4])"), on_collective);
}

TEST(ActionToString, WritesHandBuiltActionsCanonically) {
  EXPECT_EQ(to_string(simple(ActionType::kBackwardWeight, 3, 1)), "3W1");
  EXPECT_EQ(to_string(simple(ActionType::kOptimizerStep, -1, -1)), "STEP");
  Action send = simple(ActionType::kSendBackward, 2, 5);
  send.peer = 0;
  EXPECT_EQ(to_string(send), "2SEND_B5@0");
  EXPECT_EQ(to_string(collective({.op = CollectiveOp::kReduce,
                                  .group = "pp",
                                  .seq = 1,
                                  .bytes = 64,
                                  .dtype = DType::kFp16,
                                  .root = 0},
                                 -1, 2)),
            "REDUCE[pp#1,bytes=64,dtype=fp16,root=0,mb=2]");
  Action overlap{.type = ActionType::kOverlapForwardBackward,
                 .sub = {simple(ActionType::kForward, 0, 7), simple(ActionType::kBackward, 7, 3)}};
  EXPECT_EQ(to_string(overlap), "(0F7;7B3)OVERLAP_F_B");
}

TEST(ActionToString, EveryCanonicalTokenPrintsBackIdentically) {
  const char* tokens[] = {
      "0F0",
      "1I3",
      "3W1",
      "1B0",
      "0R2",
      "STEP",
      "4STEP",
      "OTHER",
      "1OTHER",
      "OTHER2",
      "1OTHER2",
      "0SEND_F1",
      "1RECV_F0",
      "1SEND_B0",
      "0RECV_B1",
      "0SEND_F1@2",
      "3RECV_B7@0",
      "0UNSHARD",
      "1RESHARD",
      "2REDUCE_GRAD",
      "(0F7;7B3)OVERLAP_F_B",
      "(1I0;2W1)OVERLAP_F_B",
      "ALL_REDUCE[dp0#0,bytes=4194304,bucket=0]",
      "REDUCE_SCATTER[dp#1,bytes=0,dtype=bf16]",
      "ALL_GATHER[fsdp.0#9,bytes=1,stage=2]",
      "REDUCE[g#0,bytes=5,root=3,mb=1]",
      "BROADCAST[g#0,bytes=5,dtype=int64,root=0,bucket=2,stage=1,mb=0,stream=dp-param]",
      "ALL_TO_ALL[ep_0#4,bytes=1024,stream=a2a]",
      "WAIT(0F0)",
      "WAIT(1SEND_B0@3)",
      "WAIT(ALL_REDUCE[dp0#0,bytes=4])",
      "WAIT((0F1;1B0)OVERLAP_F_B)",
      "2147483647F2147483647",
  };
  for (const char* token : tokens) EXPECT_EQ(to_string(parse_action(token)), token);
}

// Errors: type, location and message.

TEST(ParseActionError, UnknownTokenSaysWhatWasExpected) {
  EXPECT_THAT([] { parse_action("0X1"); },
              ThrowsMessage<ParseError>(
                  "<action>:1:2: unknown action \"0X1\"; expected <stage><F|I|W|B|R|...><mb>, a "
                  "collective such as ALL_REDUCE[group#seq,bytes=N], WAIT(<action>) or _"));
  EXPECT_THAT([] { parse_action("_"); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:1: unknown action \"_\"")));
  EXPECT_THAT([] { parse_action("FOO[x#0]"); },
              ThrowsMessage<ParseError>(HasSubstr("unknown action \"FOO[x#0]\"")));
}

TEST(ParseActionError, LocationAddsTheOffsetToTheTokenColumn) {
  try {
    parse_action("0F", "sched.txt", 3, 10);
    FAIL() << "expected a ParseError";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.source(), "sched.txt");
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.column(), 12u);
    EXPECT_THAT(e.what(), HasSubstr("sched.txt:3:12: expected a microbatch number after \"F\""));
    EXPECT_THAT(e.what(), HasSubstr("found the end of the token"));
  }
}

TEST(ParseActionError, OldPyTorchBwGetsAHint) {
  EXPECT_THAT([] { parse_action("2BW0"); },
              ThrowsMessage<ParseError>(HasSubstr("hint: BW is PyTorch's old name for full "
                                                  "backward, write B")));
}

TEST(ParseActionError, MissingStageIsNamed) {
  EXPECT_THAT([] { parse_action("F0"); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:2: action F needs a stage; expected "
                                                  "<stage>F<mb>")));
  EXPECT_THAT([] { parse_action("UNSHARD"); },
              ThrowsMessage<ParseError>(HasSubstr("action UNSHARD needs a stage; expected "
                                                  "<stage>UNSHARD")));
}

TEST(ParseActionError, TrailingTextIsRejected) {
  EXPECT_THAT([] { parse_action("0UNSHARD1"); },
              ThrowsMessage<ParseError>("<action>:1:9: unexpected \"1\" after \"0UNSHARD\"; "
                                        "expected the end of the action"));
  EXPECT_THAT([] { parse_action("0F0@1"); },
              ThrowsMessage<ParseError>(HasSubstr("unexpected \"@1\" after \"0F0\"; only SEND_F, "
                                                  "RECV_F, SEND_B and RECV_B take @<peer>")));
  EXPECT_THAT([] { parse_action("STEP3"); },
              ThrowsMessage<ParseError>(HasSubstr("unexpected \"3\" after \"STEP\"")));
}

TEST(ParseActionError, PeerNeedsARank) {
  EXPECT_THAT([] { parse_action("0SEND_F1@x"); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:10: expected a peer rank after "
                                                  "\"@\" (digits), found \"x\"")));
}

TEST(ParseActionError, NumbersBeyondInt32AreOutOfRange) {
  EXPECT_THAT([] { parse_action("2147483648F0"); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:1: a stage number \"2147483648\" is "
                                                  "out of range; expected at most 2147483647")));
}

TEST(ParseActionError, EmptyTokenIsRejected) {
  EXPECT_THAT([] { parse_action(""); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:1: empty action; expected")));
}

TEST(ParseActionError, CollectiveNeedsBytes) {
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0]"); },
              ThrowsMessage<ParseError>("<action>:1:1: collective \"ALL_REDUCE[dp0#0]\" has no "
                                        "size; expected bytes=<n>"));
}

TEST(ParseActionError, CollectiveKeysAreCheckedByName) {
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0,bytes=4,foo=1]"); },
              ThrowsMessage<ParseError>(
                  "<action>:1:26: unknown collective key \"foo\"; expected bytes, dtype, root, "
                  "bucket, count, stage, mb or stream"));
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0,bytes=4,bytes=5]"); },
              ThrowsMessage<ParseError>(HasSubstr("1:26: collective key \"bytes\" given twice")));
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0,bytes=4,dtype=f32]"); },
              ThrowsMessage<ParseError>(HasSubstr(
                  "1:32: unknown dtype \"f32\"; expected fp32|bf16|fp16|fp8|int64|int32|uint8")));
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0,bytes]"); },
              ThrowsMessage<ParseError>(HasSubstr("expected \"=\" after collective key "
                                                  "\"bytes\", found \"]\"")));
}

TEST(ParseActionError, CollectiveBracketsAndGroupAreRequired) {
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0#0,bytes=4"); },
              ThrowsMessage<ParseError>(HasSubstr("1:25: expected \"]\" to close the collective, "
                                                  "found the end of the token")));
  EXPECT_THAT([] { parse_action("ALL_REDUCE[#0,bytes=4]"); },
              ThrowsMessage<ParseError>(HasSubstr("1:12: expected a group name")));
  EXPECT_THAT([] { parse_action("ALL_REDUCE[dp0,bytes=4]"); },
              ThrowsMessage<ParseError>(HasSubstr("1:15: expected \"#\"")));
  EXPECT_THAT([] { parse_action("ALL_REDUCE"); },
              ThrowsMessage<ParseError>(HasSubstr("expected \"[\" after \"ALL_REDUCE\"")));
}

TEST(ParseActionError, WaitNeedsParentheses) {
  EXPECT_THAT([] { parse_action("WAIT(0F0"); },
              ThrowsMessage<ParseError>(HasSubstr("1:9: expected \")\" to close WAIT(")));
  EXPECT_THAT([] { parse_action("WAIT0F0"); },
              ThrowsMessage<ParseError>(HasSubstr("1:5: expected \"(\" after WAIT")));
}

TEST(ParseActionError, OverlapHoldsComputeOnly) {
  EXPECT_THAT([] { parse_action("(0F0;0SEND_F0)OVERLAP_F_B"); },
              ThrowsMessage<ParseError>(
                  HasSubstr("1:6: OVERLAP_F_B holds two compute actions; found \"0SEND_F0\"")));
  EXPECT_THAT([] { parse_action("(0F0;1B0)"); },
              ThrowsMessage<ParseError>(HasSubstr("1:10: expected \"OVERLAP_F_B\"")));
  EXPECT_THAT([] { parse_action("(0F0)OVERLAP_F_B"); },
              ThrowsMessage<ParseError>(HasSubstr("1:5: expected \";\" between the two halves")));
}

// Issue 14: the parser recurses once per level, so nesting is refused before the stack runs out.
std::string waits(std::size_t depth) {
  std::string text;
  for (std::size_t i = 0; i < depth; ++i) text += "WAIT(";
  text += "0F0";
  return text + std::string(depth, ')');
}

TEST(ParseActionError, WaitNestedFiftyThousandDeepIsRefusedAtTheLevelPastTheLimit) {
  // The 17th "(" is at offset 5 * 17 - 1 = 84 of the token, which starts at column 9.
  EXPECT_THAT([] { (void)parse_action(waits(50'000), "order.txt", 3, 9); },
              ThrowsMessage<ParseError>(
                  "order.txt:3:93: action nested too deeply; expected at most 16 levels of "
                  "WAIT(...) and (...)OVERLAP_F_B, found a deeper one here"));
}

TEST(ParseActionError, ThreeHundredThousandOpeningParenthesesAreRefused) {
  EXPECT_THAT([] { (void)parse_action(std::string(300'000, '(')); },
              ThrowsMessage<ParseError>(HasSubstr("<action>:1:17: action nested too deeply")));
}

TEST(ParseAction, NestingUpToTheLimitParsesAndRoundTrips) {
  ASSERT_EQ(kMaxActionNesting, 16U);
  const std::string text = waits(kMaxActionNesting);
  EXPECT_EQ(to_string(parse_action(text)), text);
  EXPECT_THROW((void)parse_action(waits(kMaxActionNesting + 1)), ParseError);
}

}  // namespace
}  // namespace metron::ir
