// Predicted against measured from two merged traces (Note [trace comparison]): the figures read
// back from a small hand-written trace equal the hand computation, the report's numbers are the
// hand-computed errors, and the side-by-side trace passes the Perfetto rules.

#include "metron/traces/trace_comparison.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "metron/base/error.h"
#include "metron/traces/trace_checker.h"

namespace metron::traces {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

/// Rank 0: F0 [0, 10) µs and B0 [30, 50) µs compute, RECV_B0 [12, 30) µs comm, a bubble [10, 30)
/// "wait_recv", HBM peaking at 2,000 bytes. Rank 1: F0 [5, 15) µs, SEND_B0 [25, 35) µs.
/// `scale` stretches every duration (a "measured" trace slower than its prediction).
std::string trace(double scale) {
  const auto x = [scale](int pid, int tid, const char* name, const char* cat, double ts, double dur,
                         int task) {
    return "{\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
           ",\"name\":\"" + name + "\",\"cat\":\"" + cat +
           "\",\"ts\":" + std::to_string(ts * scale) + ",\"dur\":" + std::to_string(dur * scale) +
           ",\"args\":{\"task\":" + std::to_string(task) + "}},";
  };
  std::string events;
  events +=
      "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
      "\"rank 0\"}},";
  events +=
      "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
      "\"rank 1\"}},";
  events += x(0, 7, "F0 mb=0 chunk=0", "compute", 0, 10, 0);
  events += x(0, 23, "RECV_B0 mb=0 <-r1", "comm", 12, 18, 1);
  events += x(0, 7, "B0 mb=0 chunk=0", "compute", 30, 20, 2);
  events += x(1, 7, "F0 mb=0 chunk=0", "compute", 5, 10, 3);
  events += x(1, 22, "SEND_B0 mb=0 ->r0", "comm", 25, 10, 4);
  events += "{\"ph\":\"X\",\"pid\":0,\"tid\":90,\"name\":\"bubble\",\"cat\":\"bubble\",\"ts\":" +
            std::to_string(10 * scale) + ",\"dur\":" + std::to_string(20 * scale) +
            ",\"args\":{\"reason\":\"wait_recv\"}},";
  events +=
      "{\"ph\":\"C\",\"pid\":0,\"tid\":1,\"name\":\"HBM\",\"ts\":0,\"args\":"
      "{\"allocated_bytes\":1000}},";
  events +=
      "{\"ph\":\"C\",\"pid\":0,\"tid\":1,\"name\":\"HBM\",\"ts\":5,\"args\":"
      "{\"allocated_bytes\":2000}}";
  return "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[" + events + "]}";
}

TEST(TraceComparison, ReadsTheFiguresOfAMergedTrace) {
  const TraceStep step = read_trace_step(trace(1.0), "t.json");
  EXPECT_EQ(step.iteration_ns, 50'000);  // B0 ends at 50 µs
  ASSERT_EQ(step.ranks.size(), 2U);
  const TraceRank& r0 = step.ranks.at(0);
  EXPECT_EQ(r0.compute_ns, 30'000);
  EXPECT_EQ(r0.idle_ns, 20'000);
  EXPECT_EQ(r0.comm_ns, 18'000);
  EXPECT_EQ(r0.comm_overlapped_ns, 0);
  EXPECT_EQ(r0.comm_exposed_ns, 18'000);
  EXPECT_EQ(r0.bubble_ns.at("wait_recv"), 20'000);
  EXPECT_EQ(r0.peak_memory_bytes, 2000);
  const TraceRank& r1 = step.ranks.at(1);
  EXPECT_EQ(r1.compute_ns, 10'000);
  EXPECT_EQ(r1.comm_exposed_ns, 10'000);
  ASSERT_EQ(step.tasks.size(), 5U);
  EXPECT_EQ(step.tasks[1].kind, "recv");
}

// Note [trace comparison]: with args.comm_instance, the receive posted at 12 µs counts from its
// send's start at 25 µs: 5 µs of communication, and 13 µs less of it exposed on rank 0.
TEST(TraceComparison, CountsCommunicationFromTheRendezvous) {
  std::string text = trace(1.0);
  for (const char* name : {"RECV_B0 mb=0 <-r1", "SEND_B0 mb=0 ->r0"}) {
    const std::size_t at = text.find("{\"task\":", text.find(name));
    ASSERT_NE(at, std::string::npos);
    text.insert(at + 1, "\"comm_instance\":0,");
  }
  const TraceStep step = read_trace_step(text, "t.json");
  EXPECT_EQ(step.ranks.at(0).comm_ns, 5'000);
  EXPECT_EQ(step.ranks.at(0).comm_exposed_ns, 5'000);
  EXPECT_EQ(step.ranks.at(1).comm_ns, 10'000);
  EXPECT_EQ(step.tasks[1].start_ns, 25'000);
  EXPECT_EQ(step.tasks[1].duration_ns, 5'000);
  EXPECT_EQ(step.tasks[4].duration_ns, 10'000);
}

TEST(TraceComparison, NamesTheKindOfEveryTaskSlice) {
  EXPECT_EQ(task_kind("F12 mb=12 chunk=1"), "F");
  EXPECT_EQ(task_kind("W3 mb=3 chunk=0"), "W");
  EXPECT_EQ(task_kind("OPT step=0"), "OPT");
  EXPECT_EQ(task_kind("SEND_F1 mb=1 ->r2"), "send");
  EXPECT_EQ(task_kind("RECV_B1 mb=1 <-r2"), "recv");
  EXPECT_EQ(task_kind("all-reduce dp0 bytes=4096"), "all-reduce");
  EXPECT_EQ(task_kind("bubble"), "other");
}

TEST(TraceComparison, ReportsTheErrorsOfEveryFigureAndTask) {
  // Measured = predicted × 2: every time is predicted 50 % too short (error −50 %).
  const std::string report = compare_trace_steps(read_trace_step(trace(1.0), "p.json"),
                                                 read_trace_step(trace(2.0), "m.json"), 3);
  using ::testing::ContainsRegex;
  EXPECT_THAT(report, ContainsRegex("iteration time +0\\.050 ms +0\\.100 ms +-50\\.0%"));
  EXPECT_THAT(report, ContainsRegex("  compute +0\\.030 ms +0\\.060 ms +-50\\.0%"));
  EXPECT_THAT(report, ContainsRegex("bubble wait_recv +0\\.020 ms +0\\.040 ms +-50\\.0%"));
  // The peak memory does not scale with time: 0 % error.
  EXPECT_THAT(report, ContainsRegex("peak memory +0\\.002 MB +0\\.002 MB +\\+0\\.0%"));
  // Per kind: F has two tasks, all at −50 %.
  EXPECT_THAT(report, ContainsRegex("  F +2 +-50\\.0% +-50\\.0% +-50\\.0%"));
  // The three that differ most: B0 (20 µs more), then RECV_B0 (18 µs), then a 10 µs one.
  EXPECT_THAT(report, HasSubstr("the 3 tasks that differ most"));
  const std::size_t b0 = report.find("task 2 ");
  const std::size_t recv = report.find("task 1 ");
  ASSERT_NE(b0, std::string::npos);
  ASSERT_NE(recv, std::string::npos);
  EXPECT_LT(b0, recv);
}

TEST(TraceComparison, RefusesTracesOfDifferentGraphsAndTracesWithoutTasks) {
  EXPECT_THROW(static_cast<void>(read_trace_step("{\"traceEvents\":[]}", "empty.json")),
               InvalidConfig);
  EXPECT_THROW(static_cast<void>(read_trace_step("[1, 2", "bad.json")), ParseError);
  TraceStep other = read_trace_step(trace(1.0), "o.json");
  for (TraceTask& t : other.tasks) t.task += 100;
  EXPECT_THROW(
      static_cast<void>(compare_trace_steps(read_trace_step(trace(1.0), "p.json"), other, 3)),
      InvalidConfig);
}

// A slice whose start or duration no step can have is refused, naming the event, instead of
// overflowing when durations are compared (fuzz/findings/trace_json: a dur of -9.2e18 us).
TEST(TraceComparison, RefusesSlicesOfImpossibleTimes) {
  const auto one_slice = [](const std::string& ts, const std::string& dur) {
    return "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":7,\"name\":\"F0 mb=0\","
           "\"cat\":\"compute\",\"ts\":" +
           ts + ",\"dur\":" + dur + ",\"args\":{\"task\":0}}]}";
  };
  EXPECT_EQ(read_trace_step(one_slice("5", "86400000000"), "day.json").tasks.at(0).duration_ns,
            86'400'000'000'000);  // a day is the longest a task may take
  for (const auto& [ts, dur] :
       {std::pair{"0", "-1"}, std::pair{"0", "-9223372036854775808"}, std::pair{"0", "86400000001"},
        std::pair{"0", "1e300"}, std::pair{"2e15", "1"}, std::pair{"-2e15", "1"}}) {
    try {
      static_cast<void>(read_trace_step(one_slice(ts, dur), "bad.json"));
      ADD_FAILURE() << "accepted ts " << ts << " dur " << dur;
    } catch (const InvalidConfig& e) {
      EXPECT_THAT(e.what(), HasSubstr("bad.json: traceEvents[0] (\"F0 mb=0\")")) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("out of range")) << e.what();
    }
  }
}

TEST(TraceComparison, SideBySideTracePassesThePerfettoRules) {
  const std::string both = side_by_side_trace(trace(1.0), trace(2.0));
  EXPECT_THAT(check_chrome_trace(both), IsEmpty());
  EXPECT_THAT(both, HasSubstr("\"rank 0 predicted\""));
  EXPECT_THAT(both, HasSubstr("\"rank 1 measured\""));
  // Measured rank 1 is process 3.
  EXPECT_THAT(both, HasSubstr("\"pid\":3"));
}

// Found by fuzzing (trace_json, fuzz/findings/trace_json/): a process's metadata event whose
// args is a number ended `metron compare --trace` in "unexpected failure" (nlohmann's type_error);
// it is bad input naming the event. Absent args are made, as before.
TEST(TraceComparison, SideBySideTraceRefusesMetadataArgsThatAreNoObject) {
  const std::string good = trace(1.0);
  for (const char* args : {"1", "\"rank 0\"", "[1]"}) {
    const std::string bad =
        R"({"traceEvents":[{"ph":"M","name":"process_sort_index","pid":0,"args":)" +
        std::string(args) + "}]}";
    try {
      static_cast<void>(side_by_side_trace(good, bad));
      ADD_FAILURE() << "accepted args " << args;
    } catch (const InvalidConfig& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("the measured trace: traceEvents[0] (M \"process_sort_index\", "
                            "pid 0): args is of type "))
          << e.what();
      EXPECT_THAT(e.what(), HasSubstr("expected an object")) << e.what();
    }
  }
  const std::string no_args = R"({"traceEvents":[{"ph":"M","name":"process_name","pid":0}]})";
  EXPECT_THAT(side_by_side_trace(no_args, good), HasSubstr("\"rank 0 predicted\""));
}

}  // namespace
}  // namespace metron::traces
