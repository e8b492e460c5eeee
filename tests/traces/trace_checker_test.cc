// The trace checker (docs/TRACES.md §4.4): a clean trace passes, and each deliberately broken trace
// fails with exactly the violation it was built to have.

#include "metron/traces/trace_checker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"

namespace metron::traces {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// A per-rank header written as docs/TRACES.md §6.1 asks: metadata first, "rank": with a space.
const std::string kHeader =
    "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"rank\": 2, \"world_size\": 4},\n"
    "  \"displayTimeUnit\": \"ns\",\n  \"otherData\": {},\n  \"traceEvents\": [\n";

std::string trace(const std::vector<std::string>& events, const std::string& header = kHeader,
                  const std::string& footer = "\n  ]\n}\n") {
  std::string out = header;
  for (std::size_t i = 0; i < events.size(); ++i) out += (i == 0 ? "    " : ",\n    ") + events[i];
  return out + footer;
}

/// An X slice on pid 1, tid 7 from `ts` for `dur` µs.
std::string x(const std::string& name, const std::string& ts, const std::string& dur,
              const std::string& extra = "") {
  return R"({"ph": "X", "cat": "compute", "name": ")" + name + R"(", "pid": 1, "tid": 7, "ts": )" +
         ts + R"(, "dur": )" + dur + extra + "}";
}

/// The one violation a trace has, or a failure listing all of them.
std::string only_violation(const std::string& text, TraceCheckOptions options = {}) {
  const std::vector<std::string> violations = check_chrome_trace(text, options);
  EXPECT_EQ(violations.size(), 1U) << ::testing::PrintToString(violations);
  return violations.empty() ? std::string() : violations.front();
}

// fuzz/findings/trace_json/nul-then-unbalanced-brackets.json: JSON that is valid up to a NUL byte,
// then closes more brackets than it opened. nlohmann stops at the NUL and accepted the prefix; the
// raw-text scan then popped an empty stack (a heap overflow under ASan, an abort in the release
// build). Now the NUL is the violation, at its place.
TEST(TraceChecker, ANulByteIsMalformedJsonAtItsPlace) {
  const std::string finding =
      read_file(std::string(METRON_SOURCE_DIR) +
                "/fuzz/findings/trace_json/nul-then-unbalanced-brackets.json");
  EXPECT_THAT(only_violation(finding),
              AllOf(HasSubstr("malformed JSON at line 3"), HasSubstr("NUL")));
  EXPECT_THAT(only_violation(trace({}) + std::string(1, '\0') + "]]"), HasSubstr("NUL byte"));
}

TEST(TraceChecker, CleanTraceWithEveryKindOfEventPasses) {
  const std::string text = trace({
      R"({"ph": "M", "name": "process_name", "pid": 1, "ts": 0, "args": {"name": "Rank 1"}})",
      R"({"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 1}})",
      R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}})",
      R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}})",
      R"({"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "GPU 0"}})",
      // Proper nesting: [0, 10] holds [2, 5] and [5, 10], which touch but do not overlap; two
      // slices with the same start nest longest first.
      x("step", "0.000", "10.000"),
      x("F0 mb=0", "2.000", "3.000", R"(, "bind_id": 1, "flow_out": true)"),
      x("F1 mb=1", "5.000", "5.000"),
      x("inner", "5.000", "1.000"),
      R"({"ph": "X", "cat": "comm", "name": "RECV", "pid": 2, "tid": 23, "ts": 3, "dur": 1, "bind_id": 1, "flow_in": true})",
      R"({"ph": "B", "cat": "a", "name": "open", "pid": 1, "tid": 8, "ts": 1.0})",
      R"({"ph": "B", "cat": "a", "name": "nested", "pid": 1, "tid": 8, "ts": 2.0})",
      R"({"ph": "E", "pid": 1, "tid": 8, "ts": 3.0})",
      R"({"ph": "E", "cat": "a", "name": "open", "pid": 1, "tid": 8, "ts": 4.0})",
      R"({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 7, "ts": 2.5})",
      R"({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 8, "ts": 3.5, "bp": "e"})",
      R"({"ph": "C", "name": "HBM", "pid": 1, "ts": 0.5, "args": {"allocated_bytes": 1.5e9}})",
      R"({"ph": "i", "name": "step", "pid": 1, "tid": 7, "ts": 10, "s": "g"})",
      R"({"ph": "b", "cat": "x", "name": "span", "id": 3, "pid": 1, "ts": 1})",
      R"({"ph": "e", "cat": "x", "name": "span", "id": 3, "pid": 1, "ts": 2})",
      // Raw UTF-8 (é as C3 A9) is what names should hold.
      std::string(R"({"ph": "X", "cat": "compute", "name": "caf)") + "\xC3\xA9" +
          R"(", "pid": 1, "tid": 9, "ts": 0, "dur": 0})",
  });
  EXPECT_THAT(check_chrome_trace(text), IsEmpty());
}

TEST(TraceChecker, CleanPerRankTracePassesHtaRules) {
  const std::string text = trace({
      R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 100, "tid": 101, "ts": 0, "dur": 20})",
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 1, "dur": 1, "args": {"correlation": 5}})",
      R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20, "ts": 3, "dur": 4, "args": {"stream": 20, "device": 0, "correlation": 5, "Collective name": "allreduce"}})",
      R"({"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 21, "ts": 2, "dur": 6})",
      R"({"ph": "M", "name": "thread_name", "pid": 0, "tid": 20, "args": {"name": "stream 20 nccl"}})",
  });
  EXPECT_THAT(check_chrome_trace(text, {.hta = true}), IsEmpty());
}

TEST(TraceChecker, ReportsAPartialOverlapOnARow) {
  // [0, 10] and [5, 15]: the second starts inside the first and ends after it.
  EXPECT_EQ(
      only_violation(trace({x("F2 mb=2", "0.000", "10.000"), x("F3 mb=3", "5.000", "10.000")})),
      "traceEvents[1] (X \"F3 mb=3\", pid 1 tid 7): overlaps traceEvents[0] (X \"F2 mb=2\") "
      "on the same row without nesting ([5.000, 15.000] µs against [0.000, 10.000] µs)");
}

TEST(TraceChecker, OverlapOnDifferentRowsIsFine) {
  EXPECT_THAT(
      check_chrome_trace(trace(
          {x("a", "0", "10"),
           R"({"ph": "X", "cat": "c", "name": "b", "pid": 1, "tid": 8, "ts": 5, "dur": 10})"})),
      IsEmpty());
}

TEST(TraceChecker, ReportsTidZero) {
  EXPECT_THAT(
      only_violation(trace(
          {R"({"ph": "X", "cat": "c", "name": "a", "pid": 1, "tid": 0, "ts": 0, "dur": 1})"})),
      StartsWith("traceEvents[0] (X \"a\", pid 1 tid 0): tid 0: Perfetto replaces it"));
}

TEST(TraceChecker, ReportsAFlowOutWithoutFlowIn) {
  EXPECT_EQ(only_violation(trace({x("SEND", "0", "1", R"(, "bind_id": 4, "flow_out": true)")})),
            "traceEvents[0] (X \"SEND\", pid 1 tid 7): flow bind_id 4 has flow_out but no flow_in");
}

TEST(TraceChecker, ReportsAFlowWhoseSourceStartsAfterItsDestination) {
  const std::string recv =
      R"({"ph": "X", "cat": "c", "name": "RECV", "pid": 2, "tid": 23, "ts": 1, "dur": 1, "bind_id": 4, "flow_in": true})";
  EXPECT_EQ(
      only_violation(trace({x("SEND", "2.000", "1", R"(, "bind_id": 4, "flow_out": true)"), recv})),
      "traceEvents[0] (X \"SEND\", pid 1 tid 7): flow bind_id 4: the source starts at "
      "2.000 µs, after its destination traceEvents[1] (X \"RECV\") at 1.000 µs");
}

TEST(TraceChecker, ReportsAFlowEndWrittenBeforeItsStartAtTheSameTime) {
  // What Perfetto dropped as flow_end_without_start: the receive (lower pid) written first.
  const std::string recv =
      R"({"ph": "X", "cat": "c", "name": "RECV", "pid": 0, "tid": 23, "ts": 2, "dur": 1, "bind_id": 4, "flow_in": true})";
  EXPECT_EQ(
      only_violation(trace({recv, x("SEND", "2.000", "1", R"(, "bind_id": 4, "flow_out": true)")})),
      "traceEvents[0] (X \"RECV\", pid 0 tid 23): flow bind_id 4: the destination comes before "
      "its source traceEvents[1] (X \"SEND\") in the file; Perfetto drops an end it sees before "
      "the start (flow_end_without_start)");
}

TEST(TraceChecker, ReportsADuplicateFlowId) {
  const std::string recv =
      R"({"ph": "X", "cat": "c", "name": "RECV", "pid": 2, "tid": 23, "ts": 5, "dur": 1, "bind_id": 4, "flow_in": true})";
  EXPECT_THAT(
      only_violation(trace({x("SEND", "0", "1", R"(, "bind_id": 4, "flow_out": true)"),
                            x("SEND2", "2", "1", R"(, "bind_id": 4, "flow_out": true)"), recv})),
      HasSubstr("traceEvents[1] (X \"SEND2\", pid 1 tid 7): flow bind_id 4 already "
                "starts at traceEvents[0] (X \"SEND\")"));
}

TEST(TraceChecker, ReportsAnUnendedB) {
  EXPECT_EQ(only_violation(trace({R"({"ph": "B", "name": "a", "pid": 1, "tid": 7, "ts": 0})"})),
            "traceEvents[0] (B \"a\", pid 1 tid 7): B is never ended by an E on its row");
}

TEST(TraceChecker, ReportsAnEWithoutB) {
  EXPECT_EQ(only_violation(trace({R"({"ph": "E", "pid": 1, "tid": 7, "ts": 0})"})),
            "traceEvents[0] (E, pid 1 tid 7): E without an open B on its row");
}

TEST(TraceChecker, ReportsAnEWithADifferentName) {
  EXPECT_EQ(only_violation(trace({R"({"ph": "B", "name": "a", "pid": 1, "tid": 7, "ts": 0})",
                                  R"({"ph": "E", "name": "b", "pid": 1, "tid": 7, "ts": 1})"})),
            "traceEvents[1] (E \"b\", pid 1 tid 7): E does not match the open traceEvents[0] "
            "(B \"a\") (name or cat differ); Perfetto leaves that B unterminated");
}

TEST(TraceChecker, ReportsAMissingDur) {
  EXPECT_EQ(only_violation(trace({R"({"ph": "X", "name": "a", "pid": 1, "tid": 7, "ts": 0})"})),
            "traceEvents[0] (X \"a\", pid 1 tid 7): X event has no dur; Perfetto drops it");
}

TEST(TraceChecker, ReportsANegativeTs) {
  EXPECT_EQ(only_violation(trace({x("a", "-1", "1")})),
            "traceEvents[0] (X \"a\", pid 1 tid 7): ts -1.000 µs is negative");
}

TEST(TraceChecker, ReportsAPidThatIsNotAnInteger) {
  EXPECT_EQ(only_violation(
                trace({R"({"ph": "X", "name": "a", "pid": "1", "tid": 7, "ts": 0, "dur": 1})"})),
            "traceEvents[0] (X \"a\", pid \"1\" tid 7): pid \"1\" is not an integer");
}

TEST(TraceChecker, ReportsATidBeyond32Bits) {
  // 2^32 = 4294967296, the first value Perfetto's uint32 cannot hold.
  EXPECT_THAT(only_violation(trace(
                  {R"({"ph": "X", "name": "a", "pid": 1, "tid": 4294967296, "ts": 0, "dur": 1})"})),
              HasSubstr("tid 4294967296 is outside [0, 2^32)"));
}

TEST(TraceChecker, ReportsALegacyAsyncPhase) {
  EXPECT_THAT(
      only_violation(trace({R"({"ph": "S", "name": "a", "id": 1, "pid": 1, "tid": 7, "ts": 0})"})),
      HasSubstr("legacy async phase 'S' is not imported by Perfetto"));
}

TEST(TraceChecker, ReportsAUnicodeEscapeInAName) {
  EXPECT_EQ(only_violation(trace({x(R"(caf\u00e9)", "0", "1")})),
            "traceEvents[0] (X \"caf\xC3\xA9\", pid 1 tid 7): contains a \\u escape; Perfetto "
            "shows it literally, write raw UTF-8");
}

TEST(TraceChecker, AnEscapedBackslashBeforeUIsNoUnicodeEscape) {
  EXPECT_THAT(check_chrome_trace(trace({x(R"(a\\u)", "0", "1")})), IsEmpty());
}

TEST(TraceChecker, ReportsAnUnsupportedMetadataName) {
  EXPECT_THAT(
      only_violation(trace({R"({"ph": "M", "name": "process_uptime", "pid": 1, "args": {}})"})),
      HasSubstr("traceEvents[0] (M \"process_uptime\", pid 1): M name \"process_uptime\" is not "
                "imported by Perfetto"));
}

TEST(TraceChecker, ReportsANameSetToTwoValues) {
  EXPECT_EQ(
      only_violation(trace(
          {R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "a"}})",
           R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "b"}})"})),
      "traceEvents[1] (M \"thread_name\", pid 1 tid 7): sets thread_name to {\"name\":\"b\"}, "
      "already {\"name\":\"a\"} at traceEvents[0] (M \"thread_name\")");
}

TEST(TraceChecker, ReportsACounterWithoutNumericArgs) {
  EXPECT_THAT(only_violation(trace(
                  {R"({"ph": "C", "name": "HBM", "pid": 1, "ts": 0, "args": {"x": "lots"}})"})),
              HasSubstr("C event has no numeric arg"));
}

TEST(TraceChecker, ReportsMetadataAfterTraceEvents) {
  EXPECT_EQ(only_violation(trace({x("a", "0", "1")}, "{\"schemaVersion\": 1, \"traceEvents\": [",
                                 "], \"otherData\": {}}")),
            "top-level key \"otherData\" comes after traceEvents; write every metadata key before "
            "it (HTA's streaming parser stops at traceEvents)");
}

TEST(TraceChecker, ReportsAFlowV1EndWithoutBindingPoint) {
  EXPECT_THAT(
      only_violation(trace(
          {x("launch", "0", "5"),
           R"({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 7, "ts": 1})",
           R"({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 7, "ts": 2})"})),
      HasSubstr("traceEvents[2] (f \"ac2g\", pid 1 tid 7): flow end f has no \"bp\": \"e\""));
}

TEST(TraceChecker, ReportsAFlowV1EventOutsideAnySlice) {
  EXPECT_THAT(
      only_violation(trace(
          {x("launch", "0", "5"),
           R"({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 7, "ts": 1})",
           R"({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 7, "ts": 6, "bp": "e"})"})),
      HasSubstr("traceEvents[2] (f \"ac2g\", pid 1 tid 7): flow event at 6.000 µs is not inside a "
                "slice of its row"));
}

TEST(TraceChecker, ReportsEveryViolationNotJustTheFirst) {
  const std::vector<std::string> violations = check_chrome_trace(
      trace({x("a", "-1", "1"), x("b", "0", "1", R"(, "bind_id": 1, "flow_in": true)"),
             R"({"ph": "F", "pid": 1, "tid": 7, "ts": 0})"}));
  EXPECT_THAT(violations,
              ElementsAre(HasSubstr("traceEvents[0]"), HasSubstr("traceEvents[2]"),
                          HasSubstr("traceEvents[1] (X \"b\", pid 1 tid 7): flow bind_id 1 has "
                                    "flow_in but no flow_out")));
}

TEST(TraceChecker, MalformedJsonIsOneViolationWithItsPlace) {
  // Line 2 ends the object early: the comma after "b": 1 is missing.
  EXPECT_THAT(check_chrome_trace("{\"traceEvents\": [\n{\"a\": 1 \"b\": 2}]}"),
              ElementsAre(StartsWith("malformed JSON at line 2, column")));
  EXPECT_THAT(check_chrome_trace("{\"traceEvents\": [], \"x\": NaN}"),
              ElementsAre(StartsWith("malformed JSON at line 1")));
}

// Issue 14: 1e400 escaped as "unexpected failure" (exit 1); it is malformed JSON with a place.
TEST(TraceChecker, ANumberBeyondADoubleIsOneViolationWithItsPlace) {
  EXPECT_THAT(check_chrome_trace("{\"traceEvents\": [\n{\"ph\": \"X\", \"ts\": 1e400}]}"),
              ElementsAre("malformed JSON at line 2, column 19: number overflow parsing '1e400'; "
                          "expected a number a double can hold (magnitude at most about 1.8e308)"));
}

TEST(TraceChecker, NestingDeeperThanTheLimitIsOneViolationWithItsPlace) {
  const std::string text = "{\"traceEvents\": [], \"x\": " + std::string(100'000, '[');
  EXPECT_THAT(check_chrome_trace(text),
              ElementsAre("JSON nested too deeply at line 1, column 537; expected at most 512 "
                          "nested arrays and objects"));
}

TEST(TraceChecker, ReportsTheArrayFormAndAMissingEventList) {
  EXPECT_THAT(check_chrome_trace("[{\"ph\": \"X\"}]"),
              ElementsAre(StartsWith("the top level is an array")));
  EXPECT_THAT(check_chrome_trace("{\"otherData\": {}}"),
              ElementsAre("the top-level object has no traceEvents"));
  EXPECT_THAT(check_chrome_trace("{}"), ElementsAre(StartsWith("the file does not start with {\""),
                                                    "the top-level object has no traceEvents"));
}

TEST(TraceCheckerHta, ReportsAMissingRank) {
  EXPECT_EQ(
      only_violation(trace({}, "{\"distributedInfo\": {\"world_size\": 2}, \"traceEvents\": ["),
                     {.hta = true}),
      "distributedInfo has no integer rank >= 0; HTA gives the file rank 0");
  EXPECT_EQ(only_violation(trace({}, "{\"traceEvents\": ["), {.hta = true}),
            "distributedInfo is missing; HTA gives the file rank 0");
  // Without --hta the same file is fine.
  EXPECT_THAT(check_chrome_trace(trace({}, "{\"traceEvents\": [")), IsEmpty());
}

TEST(TraceCheckerHta, ReportsARankWrittenWithoutASpace) {
  EXPECT_THAT(only_violation(trace({}, "{\"distributedInfo\": {\"rank\":3}, \"traceEvents\": ["),
                             {.hta = true}),
              StartsWith("distributedInfo.rank is written without whitespace after \"rank\":"));
}

TEST(TraceCheckerHta, ReportsAnEarlierRankThatHtaWouldRead) {
  EXPECT_EQ(only_violation(trace({},
                                 "{\"otherData\": {\"rank\": 5}, \"distributedInfo\": "
                                 "{\"rank\": 3}, \"traceEvents\": ["),
                           {.hta = true}),
            "HTA reads rank 5 from an earlier \"rank\": 5, not distributedInfo.rank 3");
}

TEST(TraceCheckerHta, ReportsAGpuEventWithoutStream) {
  EXPECT_EQ(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"device": 0, "correlation": 1}})"}),
          {.hta = true}),
      "traceEvents[0] (X \"gemm\", pid 0 tid 7): GPU event has no args.stream; HTA does not "
      "see it as GPU work");
}

TEST(TraceCheckerHta, ReportsANegativeStreamButTakesStreamZero) {
  // HTA keys GPU work by args.stream != -1; stream 0 is GPU work to it like any other.
  EXPECT_EQ(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": -2, "device": 0, "correlation": 1}})"}),
          {.hta = true}),
      "traceEvents[0] (X \"gemm\", pid 0 tid 7): GPU event's args.stream -2 is not an integer "
      ">= 0; HTA keys streams by integer and -1 marks CPU events");
  EXPECT_THAT(
      check_chrome_trace(
          trace(
              {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 0, "correlation": 1}})"}),
          {.hta = true}),
      IsEmpty());
}

TEST(TraceCheckerHta, ReportsAKernelWithoutLaunchWhenStepsArePresent) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 100, "tid": 101, "ts": 0, "dur": 20})",
               R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 101, "ts": 20, "dur": 20})",
               R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 7, "device": 0, "correlation": 1}})"}),
          {.hta = true}),
      HasSubstr("correlation 1 has no cuda_runtime launch"));
}

TEST(TraceCheckerHta, ReportsACollectiveKernelNotNamedNccl) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "kernel", "name": "allreduce", "pid": 0, "tid": 20, "ts": 0, "dur": 1, "args": {"stream": 20, "device": 0, "correlation": 1, "Collective name": "allreduce"}})"}),
          {.hta = true}),
      HasSubstr("collective kernel is not named nccl"));
}

TEST(TraceCheckerHta, ReportsStreamOnACpuEventAndMissingCat) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 101, "ts": 0, "dur": 1, "args": {"stream": 7}})"}),
          {.hta = true}),
      HasSubstr("CPU event carries args.stream"));
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "name": "a", "pid": 1, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 7, "correlation": 1}})"}),
          {.hta = true}),
      HasSubstr("has no cat; HTA drops it"));
}

TEST(TraceCheckerHta, ReportsGpuWorkInACategoryTheIdleBreakdownDrops) {
  // metron's old merged categories: HTA counted them as GPU time but found no kernel to break
  // idle time down by ("No objects to concatenate").
  EXPECT_EQ(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "compute", "name": "F0", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 7, "correlation": 1}})"}),
          {.hta = true}),
      "traceEvents[0] (X \"F0\", pid 0 tid 7): GPU event's cat \"compute\" is none of kernel, "
      "gpu_memcpy, gpu_memset: HTA counts it as GPU time but its idle-time breakdown drops it "
      "(\"No objects to concatenate\" when no kernel is left)");
  // Kineto's sync events are GPU events too, and fine.
  EXPECT_THAT(
      check_chrome_trace(
          trace(
              {R"({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 1007, "ts": 0, "dur": 0, "args": {"stream": 7, "correlation": 1, "wait_on_stream": 20}})"}),
          {.hta = true}),
      IsEmpty());
}

TEST(TraceCheckerHta, ReportsAGpuEventWithoutCorrelationButNotWithoutDevice) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 7, "device": 0}})"}),
          {.hta = true}),
      HasSubstr("GPU event has no integer args.correlation; HTA joins it to its launch by it"));
}

TEST(TraceCheckerHta, ReportsAKernelThatStartsBeforeItsLaunch) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 5, "dur": 1, "args": {"correlation": 3}})",
               R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 4, "dur": 1, "args": {"stream": 7, "correlation": 3}})"}),
          {.hta = true}),
      HasSubstr("starts before its launch traceEvents[0] (X \"cudaLaunchKernel\"); HTA's queue "
                "length and critical path see the kernel run before it was launched"));
}

TEST(TraceCheckerHta, ReportsTwoLaunchesWithOneCorrelation) {
  EXPECT_THAT(
      only_violation(
          trace(
              {R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 1, "dur": 1, "args": {"correlation": 3}})",
               R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 2, "dur": 1, "args": {"correlation": 3}})",
               R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 4, "dur": 1, "args": {"stream": 7, "correlation": 3}})"}),
          {.hta = true}),
      HasSubstr("cuda_runtime correlation 3 already belongs to traceEvents[0] (X "
                "\"cudaLaunchKernel\"); HTA's queue length needs one launch per kernel"));
}

TEST(TraceCheckerHta, TakesAKernelWithoutLaunchUnderOneStepAndWhatHtaDropsHarmlessly) {
  // One ProfilerStep#: HTA keeps every kernel. A CPU event without cat, B/E pairs and instants
  // are dropped by HTA without harm to any analysis.
  EXPECT_THAT(
      check_chrome_trace(
          trace(
              {R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 100, "tid": 101, "ts": 0, "dur": 20})",
               R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {"stream": 7, "correlation": 1}})",
               R"({"ph": "X", "name": "no cat", "pid": 100, "tid": 102, "ts": 0, "dur": 1})",
               R"({"ph": "B", "cat": "a", "name": "open", "pid": 100, "tid": 103, "ts": 1.0})",
               R"({"ph": "E", "pid": 100, "tid": 103, "ts": 3.0})"}),
          {.hta = true}),
      IsEmpty());
}

TEST(TraceCheckerHta, ReportsGpuWorkAsBeginEnd) {
  EXPECT_THAT(
      check_chrome_trace(
          trace(
              {R"({"ph": "B", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1.0, "args": {"stream": 7, "correlation": 1}})",
               R"({"ph": "E", "pid": 0, "tid": 7, "ts": 3.0})"}),
          {.hta = true}),
      ElementsAre(HasSubstr("GPU event (args.stream) is not an X event; HTA drops events "
                            "without dur")));
}

class TraceCheckerFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("metron-checker-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

TEST_F(TraceCheckerFile, ReadsAFileAndRejectsAMissingOneAsBadInput) {
  const std::string path = (dir_ / "t.json").string();
  write_file_atomically(path, trace({x("a", "0", "1")}));
  EXPECT_THAT(check_chrome_trace_file(path), IsEmpty());
  const std::string missing = (dir_ / "missing.json").string();
  EXPECT_THAT([&] { check_chrome_trace_file(missing); },
              ::testing::ThrowsMessage<InvalidConfig>(HasSubstr("cannot read '" + missing + "'")));
}

TEST_F(TraceCheckerFile, ReportsABrokenGzipFile) {
  const std::string path = (dir_ / "t.json.gz").string();
  write_file_atomically(path, std::string("\x1F\x8B\x08\x00garbage", 11));
  EXPECT_THAT(check_chrome_trace_file(path),
              ElementsAre("the file starts like gzip but does not decompress"));
}

TEST_F(TraceCheckerFile, DirectoryReportsTwoFilesWithTheSameRank) {
  // rank0 and rank1 are fine; "compact" writes "rank":1 without a space, so HTA finds no rank
  // there and gives it rank 0, which rank0.json has already.
  write_file_atomically((dir_ / "rank0.json").string(),
                        trace({}, "{\"distributedInfo\": {\"rank\": 0}, \"traceEvents\": ["));
  write_file_atomically((dir_ / "rank1.json").string(),
                        trace({}, "{\"distributedInfo\": {\"rank\": 1}, \"traceEvents\": ["));
  write_file_atomically((dir_ / "notes.txt").string(), "not a trace");
  EXPECT_THAT(check_chrome_trace_directory(dir_.string(), {.hta = true}), IsEmpty());
  write_file_atomically((dir_ / "z-compact.json").string(),
                        trace({}, "{\"distributedInfo\": {\"rank\":1}, \"traceEvents\": ["));
  EXPECT_THAT(check_chrome_trace_directory(dir_.string(), {.hta = true}),
              ElementsAre(StartsWith("z-compact.json: distributedInfo.rank is written without"),
                          "z-compact.json: HTA reads rank 0, as in rank0.json; HTA keeps one "
                          "file per rank"));
}

}  // namespace
}  // namespace metron::traces
