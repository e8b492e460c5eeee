#include "metron/ir/json_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"

namespace metron::ir {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The canonical text of tiny_graph(), written out by hand: an expectation independent of the
// writer. One top-level key per line, one entity per line in compact form.
constexpr std::string_view kTinyText = R"({
  "format": "metron-graph",
  "version": 1,
  "ranks": [
    {"id":0},
    {"id":1,"hardware_queues":1}
  ],
  "streams": [
    {"id":0,"rank":0,"name":"compute"},
    {"id":1,"rank":1,"name":"compute"}
  ],
  "groups": [],
  "buffers": [
    {"id":0,"rank":0,"bytes":1024,"name":"act s0 mb0"}
  ],
  "tasks": [
    {"id":0,"rank":0,"stream":0,"kind":"compute","phase":"forward","flops":1000000000000,"stage":0,"microbatch":0,"label":"F0","allocates":[0]},
    {"id":1,"rank":0,"stream":0,"kind":"send","peer":1,"bytes":1024,"tag":0,"stage":0,"microbatch":0,"deps":[0],"uses":[0]},
    {"id":2,"rank":1,"stream":1,"kind":"recv","peer":0,"bytes":1024,"tag":0,"stage":1,"microbatch":0},
    {"id":3,"rank":1,"stream":1,"kind":"compute","phase":"forward","flops":0.5,"stage":1,"microbatch":0,"deps":[2]}
  ],
  "issue_order": [
    [0,1],
    [2,3]
  ]
}
)";

// The same graph as kTinyText, pretty-printed with every value on its own line (2-space indent):
// not canonical, but the reader accepts any whitespace.
constexpr std::string_view kTinyIndentedText = R"({
  "format": "metron-graph",
  "version": 1,
  "ranks": [
    {
      "id": 0
    },
    {
      "id": 1,
      "hardware_queues": 1
    }
  ],
  "streams": [
    {
      "id": 0,
      "rank": 0,
      "name": "compute"
    },
    {
      "id": 1,
      "rank": 1,
      "name": "compute"
    }
  ],
  "groups": [],
  "buffers": [
    {
      "id": 0,
      "rank": 0,
      "bytes": 1024,
      "name": "act s0 mb0"
    }
  ],
  "tasks": [
    {
      "id": 0,
      "rank": 0,
      "stream": 0,
      "kind": "compute",
      "phase": "forward",
      "flops": 1000000000000,
      "stage": 0,
      "microbatch": 0,
      "label": "F0",
      "allocates": [
        0
      ]
    },
    {
      "id": 1,
      "rank": 0,
      "stream": 0,
      "kind": "send",
      "peer": 1,
      "bytes": 1024,
      "tag": 0,
      "stage": 0,
      "microbatch": 0,
      "deps": [
        0
      ],
      "uses": [
        0
      ]
    },
    {
      "id": 2,
      "rank": 1,
      "stream": 1,
      "kind": "recv",
      "peer": 0,
      "bytes": 1024,
      "tag": 0,
      "stage": 1,
      "microbatch": 0
    },
    {
      "id": 3,
      "rank": 1,
      "stream": 1,
      "kind": "compute",
      "phase": "forward",
      "flops": 0.5,
      "stage": 1,
      "microbatch": 0,
      "deps": [
        2
      ]
    }
  ],
  "issue_order": [
    [
      0,
      1
    ],
    [
      2,
      3
    ]
  ]
}
)";

// A hand-written canonical text using the rarer fields: coords, collectives with dtype and root,
// a host wait, an overlapped compute, shapes, layers, a bucket and a huge double.
constexpr std::string_view kRichText = R"({
  "format": "metron-graph",
  "version": 1,
  "ranks": [
    {"id":0},
    {"id":1,"hardware_queues":2,"coords":{"tp":0,"pp":1,"dp":0,"cp":0,"ep":0}}
  ],
  "streams": [
    {"id":0,"rank":0,"name":"compute"},
    {"id":1,"rank":1,"name":"compute"}
  ],
  "groups": [
    {"id":0,"name":"world","ranks":[0,1]}
  ],
  "buffers": [],
  "tasks": [
    {"id":0,"rank":0,"stream":0,"kind":"compute","phase":"backward","flops":2.5,"bytes_moved":1e+20,"shapes":[[2,3],[]],"cost_key":"b0","overlapped":{"phase":"forward","stage":0,"microbatch":1,"layers":[0,2]},"stage":0,"chunk":0,"microbatch":0,"layers":[2,4],"label":"B0"},
    {"id":1,"rank":0,"stream":0,"kind":"collective","op":"reduce","group":0,"bytes":64,"dtype":"fp16","root":0,"seq":0,"deps":[0]},
    {"id":2,"rank":0,"kind":"host-wait","target":1},
    {"id":3,"rank":1,"stream":1,"kind":"collective","op":"reduce","group":0,"bytes":64,"dtype":"fp16","root":0,"seq":0,"bucket":3}
  ],
  "issue_order": [
    [0,1,2],
    [3]
  ]
}
)";

Graph tiny_graph() {
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank({.hardware_queues = 1});
  const StreamId s0 = b.add_stream(r0, "compute");
  const StreamId s1 = b.add_stream(r1, "compute");
  const BufferId act = b.add_buffer(r0, 1024, "act s0 mb0");
  const TaskId f0 = b.add({.rank = r0,
                           .stream = s0,
                           .stage = StageId{0},
                           .microbatch = MicrobatchId{0},
                           .label = "F0",
                           .allocates = {act},
                           .op = Compute{.phase = Phase::kForward, .flops = 1e12}});
  const TaskId send = b.add({.rank = r0,
                             .stream = s0,
                             .stage = StageId{0},
                             .microbatch = MicrobatchId{0},
                             .uses = {act},
                             .op = Send{.peer = r1, .bytes = 1024, .tag = 0}});
  b.precede(f0, send);
  const TaskId recv = b.add({.rank = r1,
                             .stream = s1,
                             .stage = StageId{1},
                             .microbatch = MicrobatchId{0},
                             .op = Recv{.peer = r0, .bytes = 1024, .tag = 0}});
  const TaskId f1 = b.add({.rank = r1,
                           .stream = s1,
                           .stage = StageId{1},
                           .microbatch = MicrobatchId{0},
                           .op = Compute{.phase = Phase::kForward, .flops = 0.5}});
  b.precede(recv, f1);
  return std::move(b).build();
}

// Every task kind and every optional field at a non-default value, plus doubles that are
// fractional, subnormal, huge, integral beyond 2^53 and beyond 2^63, and negative zero.
Graph every_field_graph() {
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const RankId r1 =
      b.add_rank({.hardware_queues = 1, .coords = {.tp = 1, .pp = 2, .dp = 3, .cp = 4, .ep = 5}});
  const StreamId c0 = b.add_stream(r0, "compute");
  const StreamId m0 = b.add_stream(r0, "comm");
  const StreamId c1 = b.add_stream(r1, "compute");
  const StreamId m1 = b.add_stream(r1, "comm");
  const GroupId dp = b.add_group("dp", {r0, r1});
  const BufferId act = b.add_buffer(r0, 1024, "act s0 mb0");
  const BufferId grad = b.add_buffer(r1, 4096, "");
  const TaskId f = b.add({.rank = r0,
                          .stream = c0,
                          .stage = StageId{0},
                          .chunk = ChunkId{0},
                          .microbatch = MicrobatchId{0},
                          .layers = {0, 4},
                          .label = "F0 \"quoted\" \u00fc\n",
                          .allocates = {act},
                          .op = Compute{.phase = Phase::kForward,
                                        .flops = 1e12,
                                        .bytes_moved = 0.1,
                                        .shapes = {{4, 1024}, {}, {std::int64_t{1} << 40}},
                                        .cost_key = "fwd s0"}});
  const TaskId send =
      b.add({.rank = r0,
             .stream = m0,
             .stage = StageId{0},
             .microbatch = MicrobatchId{0},
             .uses = {act},
             .op = Send{.peer = r1, .bytes = 1024, .tag = 7, .what = P2PKind::kGradient}});
  b.precede(f, send);
  const TaskId recv =
      b.add({.rank = r1,
             .stream = m1,
             .stage = StageId{1},
             .microbatch = MicrobatchId{0},
             .op = Recv{.peer = r0, .bytes = 1024, .tag = 7, .what = P2PKind::kGradient}});
  const TaskId overlap =
      b.add({.rank = r1,
             .stream = c1,
             .stage = StageId{1},
             .chunk = ChunkId{0},
             .microbatch = MicrobatchId{3},
             .allocates = {grad},
             .op = Compute{.phase = Phase::kForward,
                           .flops = 1.7976931348623157e308,
                           .bytes_moved = 5e-324,
                           .overlapped = OverlapPart{.phase = Phase::kBackwardInput,
                                                     .stage = StageId{1},
                                                     .chunk = ChunkId{1},
                                                     .microbatch = MicrobatchId{2},
                                                     .layers = {4, 8}}}});
  b.precede(recv, overlap);
  const Collective all_reduce{
      .op = CollectiveOp::kAllReduce, .group = dp, .bytes = 4096, .dtype = DType::kBf16, .seq = 0};
  const TaskId ar0 = b.add({.rank = r0, .stream = m0, .bucket = BucketId{0}, .op = all_reduce});
  b.add({.rank = r1, .stream = m1, .bucket = BucketId{0}, .uses = {grad}, .op = all_reduce});
  const TaskId wait = b.add({.rank = r0, .label = "sync", .op = HostWait{.target = ar0}});
  const Collective broadcast{.op = CollectiveOp::kBroadcast,
                             .group = dp,
                             .bytes = 8,
                             .dtype = DType::kInt64,
                             .root = r1,
                             .seq = 1};
  b.add({.rank = r0, .stream = m0, .op = broadcast});
  b.add({.rank = r1, .stream = m1, .op = broadcast});
  const TaskId opt =
      b.add({.rank = r0,
             .stream = c0,
             .op = Compute{
                 .phase = Phase::kOptimizer, .flops = 9007199254740994.0, .bytes_moved = 1e20}});
  b.precede(wait, opt);
  b.add({.rank = r1,
         .stream = c1,
         .layers = {3, 3},
         .op = Compute{.phase = Phase::kRecompute, .flops = -0.0, .bytes_moved = 123456.789}});
  return std::move(b).build();
}

// One rank runs every phase, every collective op with every dtype (on a group of its own), and
// exchanges one message of every P2PKind with a second rank.
Graph every_enum_graph() {
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const StreamId s0 = b.add_stream(r0, "compute");
  const StreamId s1 = b.add_stream(r1, "compute");
  const GroupId solo = b.add_group("solo", {r0});
  for (Phase phase : {Phase::kForward, Phase::kBackwardInput, Phase::kBackwardWeight,
                      Phase::kBackward, Phase::kRecompute, Phase::kOptimizer, Phase::kOther}) {
    b.add({.rank = r0, .stream = s0, .op = Compute{.phase = phase}});
  }
  std::int64_t seq = 0;
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
        CollectiveOp::kReduce, CollectiveOp::kBroadcast, CollectiveOp::kAllToAll}) {
    for (DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16, DType::kFp8, DType::kInt64,
                        DType::kInt32, DType::kUint8}) {
      const bool rooted = op == CollectiveOp::kReduce || op == CollectiveOp::kBroadcast;
      b.add({.rank = r0,
             .stream = s0,
             .op = Collective{.op = op,
                              .group = solo,
                              .bytes = 16,
                              .dtype = dtype,
                              .root = rooted ? r0 : RankId{},
                              .seq = seq++}});
    }
  }
  std::int64_t tag = 0;
  for (P2PKind what : {P2PKind::kActivation, P2PKind::kGradient, P2PKind::kOther}) {
    b.add({.rank = r0, .stream = s0, .op = Send{.peer = r1, .bytes = 2, .tag = tag, .what = what}});
    b.add({.rank = r1, .stream = s1, .op = Recv{.peer = r0, .bytes = 2, .tag = tag, .what = what}});
    ++tag;
  }
  return std::move(b).build();
}

// `text` with its one occurrence of `from` replaced by `to`. A pattern that is missing (stale
// after a layout change) or ambiguous fails the test and stops it, so that no test silently reads
// an unchanged or wrongly changed text.
std::string replaced(std::string_view text, std::string_view from, std::string_view to) {
  std::string out(text);
  const std::size_t at = out.find(from);
  const bool once = at != std::string::npos && out.find(from, at + 1) == std::string::npos;
  if (!once) {
    ADD_FAILURE() << "test bug: \"" << from << "\" is "
                  << (at == std::string::npos ? "not in" : "not unique in") << " the text";
    throw std::invalid_argument("replaced(): bad pattern");
  }
  out.replace(at, from.size(), to);
  return out;
}

// Reads `text` expecting a ParseError; returns it for the caller to inspect.
ParseError parse_error_of(const std::string& text, const std::string& source = "<json>") {
  try {
    graph_from_json(text, source);
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ParseError";
  return ParseError(source, 0, 0, "none thrown");
}

void expect_path_error(const std::string& text, const std::string& message) {
  const ParseError e = parse_error_of(text);
  EXPECT_EQ(e.line(), 0U);
  EXPECT_EQ(std::string(e.what()), "<json>: " + message);
}

std::vector<std::uint64_t> work_bits(const Graph& g) {
  std::vector<std::uint64_t> bits;
  for (const Task& t : g.tasks()) {
    if (const auto* c = std::get_if<Compute>(&t.op)) {
      bits.push_back(std::bit_cast<std::uint64_t>(c->flops));
      bits.push_back(std::bit_cast<std::uint64_t>(c->bytes_moved));
    }
  }
  return bits;
}

// ---------------------------------------------------------------------------------------------

TEST(JsonRoundTrip, EveryTaskKindAndFieldSurvives) {
  const Graph g = every_field_graph();
  EXPECT_EQ(graph_from_json(to_json(g)), g);
}

TEST(JsonRoundTrip, EveryEnumValueSurvives) {
  const Graph g = every_enum_graph();
  const std::string text = to_json(g);
  EXPECT_EQ(graph_from_json(text), g);
  for (std::string_view name :
       {"backward-input", "backward-weight", "recompute", "optimizer", "reduce-scatter",
        "all-gather", "all-to-all", "uint8", "fp8", "gradient"}) {
    EXPECT_THAT(text, HasSubstr("\"" + std::string(name) + "\"")) << name;
  }
}

TEST(JsonRoundTrip, DoublesAreBitExact) {
  const Graph g = every_field_graph();
  EXPECT_EQ(work_bits(graph_from_json(to_json(g))), work_bits(g));
}

TEST(JsonRoundTrip, CollectiveCountSurvivesAndOneIsLeftOut) {
  // A layer-aggregated task ("12 all-reduces") next to a plain one: the count is written only
  // when it is not the default 1, and reading restores both.
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const StreamId tp = b.add_stream(r0, "tp");
  const GroupId solo = b.add_group("tp0", {r0});
  b.add({.rank = r0, .stream = tp, .op = Collective{.group = solo, .bytes = 96, .count = 12}});
  b.add({.rank = r0, .stream = tp, .op = Collective{.group = solo, .bytes = 8, .seq = 1}});
  const Graph g = std::move(b).build();
  const std::string text = to_json(g);
  EXPECT_THAT(text, HasSubstr("\"count\":12"));
  EXPECT_EQ(text.find("\"count\""), text.rfind("\"count\""));  // only once
  const Graph back = graph_from_json(text);
  EXPECT_EQ(back, g);
  EXPECT_EQ(std::get<Collective>(back.task(TaskId{0}).op).count, 12);
  EXPECT_EQ(std::get<Collective>(back.task(TaskId{1}).op).count, 1);
}

TEST(JsonRoundTrip, ComputeOperationsSurviveAndDefaultsAreLeftOut) {
  // A GEMM, a batched GEMM repeated over 6 layers and an element-wise op: n and k are written
  // for GEMMs only, batch for batched GEMMs only, count only when it is not 1.
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const StreamId compute = b.add_stream(r0, "compute");
  Compute c{.phase = Phase::kForward};
  c.operations = {
      {.name = "qkv", .kind = OperationKind::kGemm, .m = 2048, .n = 2304, .k = 768, .bytes = 9},
      {.name = "attention-scores",
       .kind = OperationKind::kBatchedGemm,
       .m = 2048,
       .n = 2048,
       .k = 64,
       .batch = 12,
       .bytes = 7,
       .count = 6,
       .dtype = DType::kFp16},
      {.name = "softmax", .kind = OperationKind::kElementwise, .m = 50331648, .bytes = 201326592}};
  b.add({.rank = r0, .stream = compute, .op = c});
  const Graph g = std::move(b).build();
  const std::string text = to_json(g);
  EXPECT_THAT(text, HasSubstr(R"({"name":"softmax","kind":"elementwise","m":50331648,)"
                              R"("bytes":201326592,"dtype":"bf16"})"));
  EXPECT_THAT(text, HasSubstr(R"("batch":12,"bytes":7,"count":6,"dtype":"fp16")"));
  EXPECT_EQ(graph_from_json(text), g);
}

TEST(JsonErrors, BadComputeOperationsAreNamed) {
  // An unknown kind names its path; a negative size or a zero count is an invalid graph that
  // names the task and the operation.
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const StreamId compute = b.add_stream(r0, "compute");
  Compute c{.phase = Phase::kForward};
  c.operations = {{.name = "qkv", .kind = OperationKind::kGemm, .m = 4, .n = 4, .k = 4}};
  b.add({.rank = r0, .stream = compute, .op = c});
  const std::string text = to_json(std::move(b).build());
  ASSERT_THAT(text, HasSubstr(R"("kind":"gemm")"));
  expect_path_error(replaced(text, R"("kind":"gemm")", R"("kind":"matmul")"),
                    "tasks[0].operations[0].kind: expected one of gemm|batched-gemm|elementwise, "
                    "got \"matmul\"");
  EXPECT_THAT([&] { (void)graph_from_json(replaced(text, R"("m":4)", R"("m":-4)")); },
              ::testing::ThrowsMessage<InvalidGraph>(HasSubstr(
                  "operation 0 (\"qkv\"): m -4, n 4, k 4, batch 1, bytes 0, count 1; expected "
                  "sizes >= 0, batch and count >= 1")));
}

TEST(JsonRoundTrip, EmptyGraphSurvives) {
  const Graph g = GraphBuilder().build();
  EXPECT_EQ(graph_from_json(to_json(g)), g);
}

TEST(JsonCanonical, TinyGraphIsWrittenExactly) { EXPECT_EQ(to_json(tiny_graph()), kTinyText); }

TEST(JsonCanonical, HandWrittenTextReadsAndWritesBackIdentically) {
  EXPECT_EQ(to_json(graph_from_json(kTinyText)), kTinyText);
  EXPECT_EQ(to_json(graph_from_json(kRichText)), kRichText);
}

TEST(JsonCanonical, ReadingTheTinyTextGivesTheBuiltGraph) {
  EXPECT_EQ(graph_from_json(kTinyText), tiny_graph());
}

TEST(JsonCanonical, ReaderAcceptsAnyWhitespace) {
  ASSERT_NE(kTinyIndentedText, kTinyText);
  EXPECT_EQ(graph_from_json(kTinyIndentedText), tiny_graph());
  EXPECT_EQ(to_json(graph_from_json(kTinyIndentedText)), kTinyText);
}

TEST(JsonCanonical, IntegralDoublesAreWrittenAsIntegers) {
  const std::string text = to_json(every_field_graph());
  EXPECT_THAT(text, HasSubstr("\"flops\":1000000000000,"));
  EXPECT_THAT(text, HasSubstr("\"flops\":9007199254740994,"));
  EXPECT_THAT(text, HasSubstr("\"bytes_moved\":1e+20,"));
  EXPECT_THAT(text, HasSubstr("\"flops\":-0.0,"));
}

TEST(JsonCanonical, ReaderAcceptsFloatSpellingsOfIntegralWork) {
  const std::string text = replaced(kTinyText, "\"flops\":1000000000000,", "\"flops\":1e12,");
  EXPECT_EQ(to_json(graph_from_json(text)), kTinyText);
}

TEST(JsonErrors, MalformedJsonReportsLineAndColumn) {
  // Line 2 lacks its comma. Like nlohmann's own message, the position is the last character read:
  // the '"' closing the unexpected "version" on line 3.
  const std::string text = "{\n  \"format\": \"metron-graph\"\n  \"version\": 1\n}\n";
  const ParseError e = parse_error_of(text, "g.json");
  EXPECT_EQ(e.source(), "g.json");
  EXPECT_EQ(e.line(), 3U);
  EXPECT_EQ(e.column(), 11U);
  EXPECT_THAT(e.what(), AllOf(StartsWith("g.json:3:11: malformed JSON: syntax error while parsing "
                                         "object - unexpected string literal; expected '}'"),
                              Not(HasSubstr("json.exception"))));
}

TEST(JsonErrors, TruncatedJsonReportsTheEndOfInput) {
  const ParseError e = parse_error_of("{\n  \"format\": ");
  EXPECT_EQ(e.line(), 2U);
  EXPECT_EQ(e.column(), 13U);
  EXPECT_THAT(e.what(),
              StartsWith("<json>:2:13: malformed JSON: syntax error while parsing value"));
}

TEST(JsonErrors, WrongTypeNamesThePath) {
  expect_path_error(replaced(kTinyText, "{\"id\":2,\"rank\":1,", "{\"id\":2,\"rank\":\"x\","),
                    "tasks[2].rank: expected an integer, got \"x\"");
  expect_path_error(replaced(kTinyText, "\"flops\":0.5", "\"flops\":\"fast\""),
                    "tasks[3].flops: expected a number, got \"fast\"");
  expect_path_error(replaced(kTinyText, "\"label\":\"F0\"", "\"label\":7"),
                    "tasks[0].label: expected a string, got 7");
  expect_path_error(replaced(kTinyText, "\"groups\": []", "\"groups\": {}"),
                    "groups: expected an array, got {}");
  expect_path_error(replaced(kTinyText, "\"tag\":0,\"stage\":1,", "\"tag\":0,\"stage\":1.0,"),
                    "tasks[2].stage: expected an integer, got 1.0");
  expect_path_error("[1, 2]", "top level: expected an object, got [1,2]");
}

TEST(JsonErrors, WrongNestedTypeNamesTheFullPath) {
  expect_path_error(replaced(kRichText, "\"pp\":1", "\"pp\":true"),
                    "ranks[1].coords.pp: expected an integer, got true");
  expect_path_error(replaced(kRichText, "\"overlapped\":{\"phase\":\"forward\"",
                             "\"overlapped\":{\"phase\":\"sideways\""),
                    "tasks[0].overlapped.phase: expected one of forward|backward-input|"
                    "backward-weight|backward|recompute|optimizer|other, got \"sideways\"");
  expect_path_error(replaced(kRichText, "\"shapes\":[[2,3],", "\"shapes\":[[2,\"3\"],"),
                    "tasks[0].shapes[0][1]: expected an integer, got \"3\"");
  expect_path_error(replaced(kRichText, "\"layers\":[2,4]", "\"layers\":[2]"),
                    "tasks[0].layers: expected [first, last], got [2]");
  expect_path_error(replaced(kTinyText, "    [2,3]\n", "    [2,-3]\n"),
                    "issue_order[1][1]: expected an integer in [0, 2147483647], got -3");
}

TEST(JsonErrors, UnknownEnumNameListsTheAcceptedNames) {
  expect_path_error(replaced(kTinyText, "\"kind\":\"recv\"", "\"kind\":\"foo\""),
                    "tasks[2].kind: expected one of compute|collective|send|recv|host-wait, got "
                    "\"foo\"");
  expect_path_error(replaced(kRichText, "\"stream\":0,\"kind\":\"collective\",\"op\":\"reduce\"",
                             "\"stream\":0,\"kind\":\"collective\",\"op\":\"allreduce\""),
                    "tasks[1].op: expected one of all-reduce|reduce-scatter|all-gather|reduce|"
                    "broadcast|all-to-all, got \"allreduce\"");
  expect_path_error(replaced(kRichText, "\"dtype\":\"fp16\",\"root\":0,\"seq\":0,\"deps\"",
                             "\"dtype\":\"float\",\"root\":0,\"seq\":0,\"deps\""),
                    "tasks[1].dtype: expected one of fp32|bf16|fp16|fp8|int64|int32|uint8, got "
                    "\"float\"");
}

TEST(JsonErrors, IdMustEqualPosition) {
  expect_path_error(replaced(kTinyText, "{\"id\":2,", "{\"id\":5,"),
                    "tasks[2].id: expected 2 (ids are positions), got 5");
  expect_path_error(
      replaced(kTinyText, "{\"id\":1,\"hardware_queues\"", "{\"id\":0,\"hardware_queues\""),
      "ranks[1].id: expected 1 (ids are positions), got 0");
}

TEST(JsonErrors, WrongFormatOrVersionIsRejected) {
  expect_path_error(replaced(kTinyText, "\"version\": 1", "\"version\": 2"),
                    "version: expected 1, got 2");
  expect_path_error(replaced(kTinyText, "\"metron-graph\"", "\"metron-rows\""),
                    "format: expected \"metron-graph\", got \"metron-rows\"");
}

TEST(JsonErrors, MissingRequiredKeyIsNamed) {
  expect_path_error(replaced(kTinyText, "\"stream\":0,\"kind\":\"compute\",", "\"stream\":0,"),
                    "tasks[0]: missing key \"kind\"");
  expect_path_error(replaced(kTinyText, "\"tag\":0,\"stage\":1", "\"stage\":1"),
                    "tasks[2]: missing key \"tag\"");
  expect_path_error(replaced(kRichText, "\"target\":1", "\"goal\":1"),
                    "tasks[2]: missing key \"target\"");
  expect_path_error("{\"version\": 1}", "top level: missing key \"format\"");
}

TEST(JsonErrors, IntegersOutOfRangeAreRejected) {
  expect_path_error(replaced(kTinyText, "\"peer\":1,", "\"peer\":2147483648,"),
                    "tasks[1].peer: expected an integer in [0, 2147483647], got 2147483648");
  expect_path_error(replaced(kTinyText, "\"peer\":1,", "\"peer\":-1,"),
                    "tasks[1].peer: expected an integer in [0, 2147483647], got -1");
  expect_path_error(replaced(kTinyText, "\"bytes\":1024,\"tag\":0,\"stage\":0",
                             "\"bytes\":9223372036854775808,\"tag\":0,\"stage\":0"),
                    "tasks[1].bytes: expected an integer in [-9223372036854775808, "
                    "9223372036854775807], got 9223372036854775808");
  expect_path_error(replaced(kTinyText, "\"hardware_queues\":1", "\"hardware_queues\":4294967296"),
                    "ranks[1].hardware_queues: expected an integer in [-2147483648, 2147483647], "
                    "got 4294967296");
}

TEST(JsonErrors, SourceNameStartsPathErrors) {
  const ParseError e =
      parse_error_of(replaced(kTinyText, "\"version\": 1", "\"version\": 2"), "plans/g.json");
  EXPECT_EQ(e.source(), "plans/g.json");
  EXPECT_EQ(e.line(), 0U);
  EXPECT_STREQ(e.what(), "plans/g.json: version: expected 1, got 2");
}

TEST(JsonErrors, DanglingReferenceIsAnInvalidGraphNamingIt) {
  const std::string text = replaced(kTinyText, "\"deps\":[2]", "\"deps\":[999]");
  try {
    graph_from_json(text);
    ADD_FAILURE() << "expected InvalidGraph";
  } catch (const InvalidGraph& e) {
    EXPECT_THAT(e.problems(), Contains(HasSubstr("depends on task 999, which does not exist")));
    EXPECT_THAT(e.what(), StartsWith("invalid graph: "));
  }
}

TEST(JsonErrors, NumberBeyondDoubleIsMalformedAtItsPlace) {
  const std::string text = replaced(kTinyText, "\"flops\":0.5", "\"flops\":1e400");
  const std::size_t at = text.find("1e400");
  const std::size_t line_start = text.rfind('\n', at) + 1;  // npos + 1 is 0
  const auto line =
      1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const ParseError e = parse_error_of(text);
  EXPECT_EQ(std::string(e.what()),
            "<json>:" + std::to_string(line) + ":" + std::to_string(at - line_start + 1) +
                ": malformed JSON: number overflow parsing '1e400'; expected "
                "a number a double can hold (magnitude at most about 1.8e308)");
}

// Issue 14: nesting 100,000 deep overflowed the stack; the depth is checked on the raw text first.
TEST(JsonErrors, NestingDeeperThanTheLimitIsRefusedBeforeParsing) {
  const ParseError e = parse_error_of("{\"format\": " + std::string(100'000, '['), "g.json");
  EXPECT_STREQ(e.what(),
               "g.json:1:523: JSON nested too deeply; expected at most 512 nested arrays and "
               "objects, found a deeper one here");
  // Under a key the reader does not know, too: the check runs before any key is looked at.
  const std::string deep =
      replaced(kTinyText, "\"version\": 1,",
               "\"version\": 1, \"x\": " + std::string(600, '[') + std::string(600, ']') + ",");
  EXPECT_THAT(parse_error_of(deep).what(), HasSubstr(": JSON nested too deeply"));
}

TEST(JsonErrors, InvalidUtf8CannotBeWritten) {
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const StreamId s0 = b.add_stream(r0, "compute");
  b.add({.rank = r0, .stream = s0, .label = "bad \xff", .op = Compute{.phase = Phase::kForward}});
  const Graph g = std::move(b).build();
  try {
    (void)to_json(g);
    ADD_FAILURE() << "expected InvalidGraph";
  } catch (const InvalidGraph& e) {
    EXPECT_THAT(e.problems(),
                ElementsAre("cannot write JSON: invalid UTF-8 byte at index 4: 0xFF"));
  }
}

TEST(JsonDiagnostics, UnknownKeysAreCountedNotFatal) {
  std::string text =
      replaced(kTinyText, "\"version\": 1,", "\"version\": 1,\n  \"comment\": \"hi\",");
  text = replaced(text, "\"label\":\"F0\",", "\"label\":\"F0\",\"colour\":\"red\",");
  // A key of another kind is unknown here: sends have no phase.
  text = replaced(text, "\"peer\":1,", "\"peer\":1,\"phase\":\"forward\",");
  text = replaced(text, "\"hardware_queues\":1",
                  "\"hardware_queues\":1,\"coords\":{\"tp\":0,\"zz\":1}");
  Diagnostics diagnostics;
  const Graph g = graph_from_json(text, "<json>", &diagnostics);
  EXPECT_EQ(g, tiny_graph());
  EXPECT_EQ(diagnostics.count("unknown_key"), 4U);
  EXPECT_THAT(diagnostics.messages(),
              ElementsAre("ranks[1].coords.zz: unknown key", "tasks[0].colour: unknown key",
                          "tasks[1].phase: unknown key", "comment: unknown key"));
}

TEST(JsonDiagnostics, UnknownKeysWithoutDiagnosticsAreIgnored) {
  const std::string text =
      replaced(kTinyText, "\"version\": 1,", "\"version\": 1,\n  \"comment\": \"hi\",");
  EXPECT_EQ(graph_from_json(text), tiny_graph());
}

}  // namespace
}  // namespace metron::ir
