// The Chrome trace writer: the exact bytes of docs/TRACES.md §6.1, exact microseconds, sanitised
// strings, deterministic output, v2 flows, gzip, and traces the checker accepts.

#include "metron/traces/chrome_trace_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/traces/trace_checker.h"

namespace metron::traces {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

/// One rank with a compute slice, a send whose arrow ends on rank 4, an HBM counter and a step
/// boundary, given out of time order so that the writer has to sort.
TraceDocument small_document() {
  TraceDocument d;
  d.metadata = {{"tool", std::string("metron")}, {"microbatches", std::int64_t{4}}};
  d.rank = 3;
  d.world_size = 8;
  d.processes = {{3, "Rank 3", 3}};
  d.threads = {{3, 7, "stream 7 compute", 7}};
  Slice recv{.pid = 4,
             .tid = 23,
             .name = "RECV_F0 mb=0 <-r3",
             .cat = "comm",
             .start_ns = 1500,
             .duration_ns = 2500};
  recv.flow_in = 1;
  Slice send{.pid = 3,
             .tid = 22,
             .name = "SEND_F0 mb=0 ->r4",
             .cat = "comm",
             .start_ns = 1500,
             .duration_ns = 2000};
  send.flow_out = 1;
  Slice forward{.pid = 3,
                .tid = 7,
                .name = "F0 mb=0 chunk=0",
                .cat = "compute",
                .start_ns = 500,
                .duration_ns = 1000,
                .args = {{"microbatch", std::int64_t{0}}}};
  d.slices = {recv, send, forward};
  d.counters = {{.pid = 3, .name = "HBM", .ts_ns = 0, .series = {{"allocated_bytes", 0.25}}}};
  d.instants = {{.pid = 3, .tid = 1, .name = "step 0", .ts_ns = 4000, .global = true}};
  return d;
}

Slice slice_at(std::int64_t start_ns, std::string name = "s") {
  return {.pid = 1,
          .tid = 7,
          .name = std::move(name),
          .cat = "compute",
          .start_ns = start_ns,
          .duration_ns = 0};
}

/// The event line of the (only) slice in `json`.
std::string slice_line(const std::string& json) {
  const std::size_t at = json.find("{\"ph\": \"X\"");
  return json.substr(at, json.find('\n', at) - at);
}

std::string gunzip_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr);
  std::string out;
  char buffer[4096];
  int n = 0;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<std::size_t>(n));
  gzclose(file);
  return out;
}

class WriterFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("metron-traces-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST(ChromeTraceWriter, WritesTheHeaderThenMetadataThenSortedEvents) {
  // Sorted by (ts, pid, tid): the counter at 0 (pid 3, tid 0), F0 at 500 ns, then at 1500 ns
  // the send (pid 3) before the receive (pid 4) although given after it, then the step at
  // 4000 ns. 1500 ns = 1.500 µs, 2500 ns = 2.500 µs.
  const std::string expected =
      "{\n"
      "  \"schemaVersion\": 1,\n"
      "  \"deviceProperties\": [],\n"
      "  \"distributedInfo\": {\"rank\": 3, \"world_size\": 8},\n"
      "  \"baseTimeNanoseconds\": 0,\n"
      "  \"displayTimeUnit\": \"ns\",\n"
      "  \"otherData\": {\"tool\": \"metron\", \"microbatches\": 4},\n"
      "  \"metadata\": {\"tool\": \"metron\", \"microbatches\": 4},\n"
      "  \"traceEvents\": [\n"
      "    {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 3, \"ts\": 0.000, \"args\": "
      "{\"name\": \"Rank 3\"}},\n"
      "    {\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 3, \"ts\": 0.000, \"args\": "
      "{\"sort_index\": 3}},\n"
      "    {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 3, \"tid\": 7, \"ts\": 0.000, "
      "\"args\": {\"name\": \"stream 7 compute\"}},\n"
      "    {\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": 3, \"tid\": 7, \"ts\": 0.000, "
      "\"args\": {\"sort_index\": 7}},\n"
      "    {\"ph\": \"C\", \"name\": \"HBM\", \"pid\": 3, \"tid\": 1, \"ts\": 0.000, "
      "\"args\": "
      "{\"allocated_bytes\": 0.25}},\n"
      "    {\"ph\": \"X\", \"cat\": \"compute\", \"name\": \"F0 mb=0 chunk=0\", \"pid\": 3, "
      "\"tid\": 7, \"ts\": 0.500, \"dur\": 1.000, \"args\": {\"microbatch\": 0}},\n"
      "    {\"ph\": \"X\", \"cat\": \"comm\", \"name\": \"SEND_F0 mb=0 ->r4\", \"pid\": 3, "
      "\"tid\": 22, \"ts\": 1.500, \"dur\": 2.000, \"bind_id\": 1, \"flow_out\": true, "
      "\"args\": {}},\n"
      "    {\"ph\": \"X\", \"cat\": \"comm\", \"name\": \"RECV_F0 mb=0 <-r3\", \"pid\": 4, "
      "\"tid\": 23, \"ts\": 1.500, \"dur\": 2.500, \"bind_id\": 1, \"flow_in\": true, "
      "\"args\": {}},\n"
      "    {\"ph\": \"i\", \"name\": \"step 0\", \"pid\": 3, \"tid\": 1, \"ts\": 4.000, \"s\": "
      "\"g\", \"args\": {}}\n"
      "  ]\n"
      "}\n";
  EXPECT_EQ(to_chrome_json(small_document()), expected);
}

TEST(ChromeTraceWriter, LeavesOutDistributedInfoWithoutARank) {
  TraceDocument d;
  const std::string json = to_chrome_json(d);
  EXPECT_EQ(json,
            "{\n"
            "  \"schemaVersion\": 1,\n"
            "  \"deviceProperties\": [],\n"
            "  \"baseTimeNanoseconds\": 0,\n"
            "  \"displayTimeUnit\": \"ns\",\n"
            "  \"otherData\": {},\n"
            "  \"metadata\": {},\n"
            "  \"traceEvents\": [\n"
            "  ]\n"
            "}\n");
}

TEST(ChromeTraceWriter, WritesMicrosecondsWithThreeExactDecimals) {
  // ns / 1000 before the point, ns % 1000 in three digits after it.
  const std::pair<std::int64_t, std::string> cases[] = {
      {0, "0.000"},
      {1, "0.001"},
      {999, "0.999"},
      {1000, "1.000"},
      {1234567, "1234.567"},
      // 2^53 + 1 ns: a double holds 2^53 + 1 µs·1e-3 only approximately; integers keep it.
      {9007199254740993, "9007199254740.993"},
  };
  for (const auto& [ns, text] : cases) {
    TraceDocument d;
    d.slices = {slice_at(ns)};
    d.slices[0].duration_ns = ns;
    EXPECT_THAT(slice_line(to_chrome_json(d)),
                HasSubstr("\"ts\": " + text + ", \"dur\": " + text + ","))
        << ns;
  }
}

TEST(ChromeTraceWriter, SanitisesNamesKeysAndValues) {
  TraceDocument d;
  Slice s = slice_at(0,
                     "a\"b\\c\nd\te\x01"
                     "f\x7F");
  s.cat = "caf\xC3\xA9";  // é as raw UTF-8 stays raw
  s.args = {{"k\"ey", std::string("bad \xFF byte, cut \xC3")},
            {"c1", std::string("x\xC2\x85y")},
            {"surrogate", std::string("\xED\xA0\x80")}};
  d.slices = {s};
  const std::string line = slice_line(to_chrome_json(d));
  // Quotes and backslashes escaped, newline, tab, U+0001 and DEL dropped.
  EXPECT_THAT(line, HasSubstr("\"name\": \"a\\\"b\\\\cdef\""));
  EXPECT_THAT(line, HasSubstr("\"cat\": \"caf\xC3\xA9\""));
  // 0xFF is never UTF-8; a lead byte C3 at the end lacks its continuation: U+FFFD each.
  EXPECT_THAT(line, HasSubstr("\"k\\\"ey\": \"bad \xEF\xBF\xBD byte, cut \xEF\xBF\xBD\""));
  // U+0085 (NEL, C2 85) is a C1 control character: dropped.
  EXPECT_THAT(line, HasSubstr("\"c1\": \"xy\""));
  // ED A0 80 would encode the surrogate U+D800, which UTF-8 forbids: three bad bytes.
  EXPECT_THAT(line, HasSubstr("\"surrogate\": \"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""));
  EXPECT_THAT(line, Not(HasSubstr("\\u")));
}

TEST(ChromeTraceWriter, KeepsIntegersAndLeavesOutNonFiniteNumbers) {
  TraceDocument d;
  Slice s = slice_at(0);
  s.args = {{"bytes", std::int64_t{1} << 40},
            {"nan", std::numeric_limits<double>::quiet_NaN()},
            {"ratio", 0.5},
            {"inf", std::numeric_limits<double>::infinity()}};
  d.slices = {s};
  d.counters = {{.pid = 1,
                 .name = "empty",
                 .ts_ns = 0,
                 .series = {{"x", std::numeric_limits<double>::quiet_NaN()}}}};
  const std::string json = to_chrome_json(d);
  // 2^40 = 1099511627776.
  EXPECT_THAT(slice_line(json), HasSubstr("\"args\": {\"bytes\": 1099511627776, \"ratio\": 0.5}"));
  EXPECT_THAT(json, Not(HasSubstr("\"C\"")));  // no finite series left: no counter event
  EXPECT_THAT(json, Not(HasSubstr("nan")));
}

TEST(ChromeTraceWriter, KeepsInputOrderForEqualTimesOnOneRow) {
  TraceDocument d;
  d.slices = {slice_at(10, "second"), slice_at(0, "first"), slice_at(10, "third")};
  const std::string json = to_chrome_json(d);
  const std::size_t first = json.find("\"first\"");
  const std::size_t second = json.find("\"second\"");
  const std::size_t third = json.find("\"third\"");
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
}

TEST(ChromeTraceWriter, IsDeterministic) {
  const TraceDocument a = small_document();
  const TraceDocument b = small_document();
  EXPECT_EQ(to_chrome_json(a), to_chrome_json(b));
}

TEST(ChromeTraceWriter, WritesV2FlowEndsAndRejectsASliceWithTwo) {
  const std::string json = to_chrome_json(small_document());
  EXPECT_THAT(json, HasSubstr("\"bind_id\": 1, \"flow_out\": true"));
  EXPECT_THAT(json, HasSubstr("\"bind_id\": 1, \"flow_in\": true"));
  TraceDocument d;
  Slice s = slice_at(0, "relay");
  s.flow_in = 1;
  s.flow_out = 2;
  d.slices = {s};
  EXPECT_THAT([&] { (void)to_chrome_json(d); },
              ::testing::ThrowsMessage<InvalidConfig>(
                  HasSubstr("trace slice \"relay\" (pid 1 tid 7): has both flow_in 1 and "
                            "flow_out 2")));
}

TEST(ChromeTraceWriter, WritesAFlowStartBeforeItsEndAtTheSameTime) {
  // The receiver has the lower pid: sorting by pid alone would put the end first, and Perfetto
  // would drop the arrow (flow_end_without_start).
  TraceDocument d;
  Slice recv = slice_at(1000, "RECV");
  recv.pid = 0;
  recv.duration_ns = 10;
  recv.flow_in = 9;
  Slice send = slice_at(1000, "SEND");
  send.pid = 5;
  send.duration_ns = 10;
  send.flow_out = 9;
  Slice other = slice_at(1000, "F0");
  other.pid = 7;
  d.slices = {recv, send, other};
  const std::string json = to_chrome_json(d);
  const std::size_t send_at = json.find("\"SEND\"");
  const std::size_t recv_at = json.find("\"RECV\"");
  const std::size_t other_at = json.find("\"F0\"");
  ASSERT_NE(send_at, std::string::npos);
  EXPECT_LT(send_at, recv_at);
  EXPECT_LT(other_at, recv_at);  // flow ends after every other event of their time
  EXPECT_LT(send_at, other_at);  // the rest stays in (pid, tid) order
  EXPECT_THAT(check_chrome_trace(json), IsEmpty());
}

TEST(ChromeTraceWriter, WrittenTraceSatisfiesTheChecker) {
  const std::string json = to_chrome_json(small_document());
  EXPECT_THAT(check_chrome_trace(json), IsEmpty());
  EXPECT_THAT(check_chrome_trace(json, {.hta = true}), IsEmpty());
}

TEST_F(WriterFiles, WritesPlainJsonAtomically) {
  const std::string written = write_chrome_trace(path("t.json"), small_document());
  EXPECT_EQ(written, path("t.json"));
  EXPECT_EQ(read_file(written), to_chrome_json(small_document()));
  // Only the file itself: the temporary file was renamed away.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 1);
}

TEST_F(WriterFiles, GzipsByNameAndRoundTrips) {
  const std::string written = write_chrome_trace(path("t.json.gz"), small_document());
  EXPECT_EQ(written, path("t.json.gz"));
  const std::string bytes = read_file(written);
  ASSERT_GE(bytes.size(), 2U);
  // gzip magic 1f 8b (RFC 1952 §2.3.1).
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1F);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8B);
  EXPECT_EQ(gunzip_file(written), to_chrome_json(small_document()));
  EXPECT_THAT(check_chrome_trace_file(written), IsEmpty());
  // The same document compresses to the same bytes.
  write_chrome_trace(path("again.json.gz"), small_document());
  EXPECT_EQ(read_file(path("again.json.gz")), bytes);
}

TEST_F(WriterFiles, GzipsAboveTheSizeLimitAndAppendsGz) {
  const std::size_t size = to_chrome_json(small_document()).size();
  const auto limit = static_cast<std::int64_t>(size);
  // Exactly at the limit: not larger, so plain.
  EXPECT_EQ(write_chrome_trace(path("at.json"), small_document(), limit), path("at.json"));
  EXPECT_EQ(write_chrome_trace(path("over.json"), small_document(), limit - 1),
            path("over.json.gz"));
  EXPECT_EQ(gunzip_file(path("over.json.gz")), to_chrome_json(small_document()));
  EXPECT_FALSE(fs::exists(path("over.json")));
  // 0 turns the size rule off.
  EXPECT_EQ(write_chrome_trace(path("never.json"), small_document(), 0), path("never.json"));
}

TEST_F(WriterFiles, UnwritablePathThrowsIoError) {
  EXPECT_THAT(
      [&] { write_chrome_trace(path("missing/t.json"), small_document()); },
      ::testing::ThrowsMessage<IoError>(HasSubstr("cannot write '" + path("missing/t.json"))));
}

TEST(ChromeTraceWriter, WritesDistributedInfoAsPyTorchDoes) {
  // docs/TRACES.md §2.7: backend first, then rank with a space after the colon for HTA's regex.
  TraceDocument d;
  d.rank = 4;
  d.world_size = 8;
  d.backend = "nccl";
  d.pg_config = {{.pg_name = "0", .pg_desc = "default_pg", .ranks = {0, 1}},
                 {.pg_name = "1", .pg_desc = "tp", .backend_config = "cuda:nccl", .ranks = {4}}};
  d.nccl_version = "2.21.5";
  d.base_time_ns = 17;
  const std::string json = to_chrome_json(d);
  EXPECT_THAT(json,
              HasSubstr("  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 4, "
                        "\"world_size\": 8, \"pg_count\": 2, \"pg_config\": [{\"pg_name\": "
                        "\"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", "
                        "\"pg_size\": 2, \"ranks\": [0, 1]}, {\"pg_name\": \"1\", \"pg_desc\": "
                        "\"tp\", \"backend_config\": \"cuda:nccl\", \"pg_size\": 1, \"ranks\": "
                        "[4]}], \"nccl_version\": \"2.21.5\"},\n  \"baseTimeNanoseconds\": 17,\n"));
  EXPECT_THAT(check_chrome_trace(json, {.hta = true}), IsEmpty());
}

TEST(ChromeTraceWriter, WritesV1FlowEventsAfterTheirSlices) {
  // Kineto's launch → kernel arrow (docs/TRACES.md §1.6, "Flow v1"): each flow event after the
  // slice it lies in, even when given first and at the slice's own start.
  TraceDocument d;
  d.flows = {{.pid = 0, .tid = 7, .ts_ns = 5000, .id = 3, .start = false},
             {.pid = 9, .tid = 9, .ts_ns = 1000, .id = 3, .start = true}};
  Slice launch = slice_at(1000, "cudaLaunchKernel");
  launch.pid = 9;
  launch.tid = 9;
  launch.duration_ns = 10;
  Slice kernel = slice_at(5000, "gemm");
  kernel.pid = 0;
  kernel.duration_ns = 10;
  d.slices = {kernel, launch};
  const std::string json = to_chrome_json(d);
  EXPECT_THAT(json, HasSubstr("{\"ph\": \"s\", \"id\": 3, \"cat\": \"ac2g\", \"name\": "
                              "\"ac2g\", \"pid\": 9, \"tid\": 9, \"ts\": 1.000}"));
  EXPECT_THAT(json, HasSubstr("{\"ph\": \"f\", \"id\": 3, \"cat\": \"ac2g\", \"name\": "
                              "\"ac2g\", \"pid\": 0, \"tid\": 7, \"ts\": 5.000, \"bp\": \"e\"}"));
  EXPECT_LT(json.find("\"cudaLaunchKernel\""), json.find("\"ph\": \"s\""));
  EXPECT_LT(json.find("\"gemm\""), json.find("\"ph\": \"f\""));
  EXPECT_THAT(check_chrome_trace(json), IsEmpty());
}

}  // namespace
}  // namespace metron::traces
