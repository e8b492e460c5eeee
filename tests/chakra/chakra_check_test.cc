// The Chakra rules (docs/TRACES.md §4.4) against files with planted defects. The files are
// encoded here by hand, varint by varint (the protobuf wire format), so the checker is also
// tested against bytes our writer did not produce.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_export.h"
#include "metron/chakra/chakra_trace.h"

namespace metron::chakra {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// --- a minimal protobuf encoder --------------------------------------------------------------

void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string& out, int field, int wire) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire));
}
void field_varint(std::string& out, int field, std::uint64_t v) {
  key(out, field, 0);
  varint(out, v);
}
void field_bytes(std::string& out, int field, const std::string& bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

/// An AttributeProto with a varint oneof case (7 int32, 9 int64, 13 uint64, 17 sint64, 27 bool).
std::string attr_varint(const std::string& name, int field, std::uint64_t v) {
  std::string a;
  field_bytes(a, 1, name);
  field_varint(a, field, v);
  return a;
}
std::string attr_string(const std::string& name, const std::string& v) {
  std::string a;
  field_bytes(a, 1, name);
  field_bytes(a, 29, v);
  return a;
}

struct TestNode {
  std::uint64_t id = 0;
  int type = 4;  // COMP_NODE
  std::vector<std::uint64_t> deps;
  std::vector<std::string> attrs;
};

std::string encode(const TestNode& n) {
  std::string m;
  field_varint(m, 1, n.id);
  field_bytes(m, 2, "node " + std::to_string(n.id));
  field_varint(m, 3, static_cast<std::uint64_t>(n.type));
  for (std::uint64_t d : n.deps) field_varint(m, 5, d);
  field_varint(m, 7, 3);  // duration_micros
  for (const std::string& a : n.attrs) field_bytes(m, 10, a);
  return m;
}

std::string metadata(const std::string& version = "0.0.4") {
  std::string m;
  field_bytes(m, 1, version);
  field_bytes(m, 2, attr_string("schema", "test"));
  return m;
}

/// Messages, each preceded by its varint32 length (docs/TRACES.md §3.2).
std::string stream(const std::vector<std::string>& messages) {
  std::string out;
  for (const std::string& m : messages) {
    varint(out, m.size());
    out += m;
  }
  return out;
}

std::string file_of(const std::vector<TestNode>& nodes) {
  std::vector<std::string> messages = {metadata()};
  for (const TestNode& n : nodes) messages.push_back(encode(n));
  return stream(messages);
}

TestNode comp(std::uint64_t id, std::vector<std::uint64_t> deps = {}) {
  return {.id = id,
          .type = 4,
          .deps = std::move(deps),
          .attrs = {attr_varint("num_ops", 9, 100), attr_varint("tensor_size", 13, 10),
                    attr_varint("is_cpu_op", 27, 0)}};
}
TestNode p2p(std::uint64_t id, bool send, int src, int dst, int tag, std::uint64_t size) {
  return {.id = id,
          .type = send ? 5 : 6,
          .deps = {},
          .attrs = {attr_varint("comm_src", 7, static_cast<std::uint64_t>(src)),
                    attr_varint("comm_dst", 7, static_cast<std::uint64_t>(dst)),
                    attr_varint("comm_tag", 7, static_cast<std::uint64_t>(tag)),
                    attr_varint("comm_size", 9, size), attr_varint("is_cpu_op", 27, 0)}};
}
TestNode coll(std::uint64_t id, const std::string& pg) {
  return {.id = id,
          .type = 7,
          .deps = {},
          .attrs = {attr_varint("comm_type", 9, 0), attr_varint("comm_size", 9, 64),
                    attr_string("pg_name", pg), attr_varint("is_cpu_op", 27, 0)}};
}

class Dir {
 public:
  Dir() : path_(fs::temp_directory_path() / ("metron-chakra-check-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Dir() { fs::remove_all(path_); }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  void write(const std::string& name, const std::string& content) const {
    write_file_atomically((path_ / name).string(), content);
  }
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

/// A sound two-rank workload: rank 0 computes, sends to rank 1 and all-reduces in group 1.
void write_sound(const Dir& d) {
  d.write("w.0.et", file_of({comp(0), p2p(1, true, 0, 1, 7, 256), coll(2, "1")}));
  d.write("w.1.et", file_of({p2p(3, false, 0, 1, 7, 256), comp(4, {3}), coll(5, "1")}));
  d.write("w.comm_group.json", R"({"1": [0, 1]})");
}

std::vector<std::string> check(const Dir& d) { return check_chakra_directory(d.str()); }

TEST(ChakraCheck, ASoundWorkloadPassesAndReadsBack) {
  const Dir d;
  write_sound(d);
  EXPECT_THAT(check(d), IsEmpty());
  const Trace t = read_chakra_trace(d.str() + "/w.0.et");
  EXPECT_EQ(t.version, "0.0.4");
  ASSERT_EQ(t.nodes.size(), 3U);
  EXPECT_EQ(t.nodes[1].id, 1U);
  EXPECT_EQ(t.nodes[1].type, NodeType::kCommSend);
  EXPECT_EQ(t.nodes[1].duration_micros, 3U);
  const Attribute* tag = t.nodes[1].find("comm_tag");
  ASSERT_NE(tag, nullptr);
  EXPECT_EQ(tag->value_field, 7);
  EXPECT_EQ(std::get<std::int32_t>(tag->value), 7);
  EXPECT_EQ(std::get<std::string>(t.nodes[2].find("pg_name")->value), "1");
}

TEST(ChakraCheck, FindsATruncatedFile) {
  const Dir d;
  write_sound(d);
  std::string bytes = read_file(d.str() + "/w.1.et");
  bytes.resize(bytes.size() - 3);
  d.write("w.1.et", bytes);
  EXPECT_THAT(check(d), Contains(HasSubstr("w.1.et: message 3 at byte ")));
  EXPECT_THAT(check(d), Contains(HasSubstr("does not decode")));
  EXPECT_THROW((void)read_chakra_trace(d.str() + "/w.1.et"), ParseError);
}

TEST(ChakraCheck, FindsDanglingAndCyclicDependencies) {
  const Dir d;
  write_sound(d);
  d.write("w.1.et", file_of({p2p(3, false, 0, 1, 7, 256), comp(4, {99}), coll(5, "1"),
                             comp(10, {11}), comp(11, {10}), comp(11)}));
  EXPECT_THAT(check(d),
              ElementsAre("w.1.et: node 11: the id is used by more than one node",
                          "w.1.et: node 4: data_deps names node 99, which is not in the file",
                          "w.1.et: the dependencies form a cycle (through node 10 or a node it "
                          "waits for)"));
}

TEST(ChakraCheck, FindsMismatchedSendsAndReceives) {
  const Dir d;
  write_sound(d);
  d.write("w.1.et",
          file_of({p2p(3, false, 0, 1, 7, 512), p2p(6, false, 0, 1, 8, 16), coll(5, "1")}));
  EXPECT_THAT(check(d), ElementsAre("w.0.et: node 1: transfer (src 0, dst 1, tag 7) sends 256 "
                                    "bytes but w.1.et: node 3 receives 512",
                                    "w.1.et: node 6: transfer (src 0, dst 1, tag 8) has 0 "
                                    "send(s) and 1 recv(s); expected one of each"));
}

TEST(ChakraCheck, FindsASendThatIsNotItsRanksOwn) {
  const Dir d;
  write_sound(d);
  d.write("w.0.et", file_of({comp(0), p2p(1, true, 2, 1, 7, 256), coll(2, "1")}));
  EXPECT_THAT(check(d), Contains("w.0.et: node 1: comm_src 2 is not the file's rank 0"));
}

TEST(ChakraCheck, FindsAWrongOneofCase) {
  const Dir d;
  write_sound(d);
  TestNode send = p2p(1, true, 0, 1, 7, 256);
  send.attrs[3] = attr_varint("comm_size", 13, 256);  // uint64_val: the legacy feeder reads 0
  TestNode all_reduce = coll(2, "1");
  all_reduce.attrs[1] = attr_varint("comm_size", 17, 128);  // sint64_val: not in our schema
  all_reduce.attrs.push_back(attr_varint("is_cpu_op", 9, 0));
  d.write("w.0.et", file_of({comp(0), send, all_reduce}));
  const std::vector<std::string> v = check(d);
  EXPECT_THAT(v, Contains("w.0.et: node 1: attribute comm_size holds uint64_val; expected "
                          "int64_val (the simulators read no other case; docs/TRACES.md §3.3)"));
  EXPECT_THAT(v, Contains("w.0.et: node 2: attribute comm_size holds sint64_val; expected "
                          "int64_val (the simulators read no other case; docs/TRACES.md §3.3)"));
  EXPECT_THAT(v, Contains(HasSubstr("w.0.et: node 2: attribute is_cpu_op holds int64_val")));
}

TEST(ChakraCheck, FindsCpuCommunicationAndMissingAttributes) {
  const Dir d;
  write_sound(d);
  TestNode all_reduce = coll(2, "1");
  all_reduce.attrs = {attr_varint("comm_size", 9, 64), attr_varint("is_cpu_op", 27, 1)};
  d.write("w.0.et", file_of({comp(0), p2p(1, true, 0, 1, 7, 256), all_reduce}));
  EXPECT_THAT(check(d), ElementsAre("w.0.et: node 2: COMM_COLL_NODE has no comm_type",
                                    "w.0.et: node 2: is_cpu_op is true; ASTRA-sim rejects CPU "
                                    "communication nodes"));
}

TEST(ChakraCheck, FindsProcessGroupsMissingFromTheCommGroupFile) {
  const Dir d;
  write_sound(d);
  d.write("w.comm_group.json", R"({"1": [0], "x": [1]})");
  d.write("w.1.et", file_of({p2p(3, false, 0, 1, 7, 256), coll(5, "1"), coll(6, "2")}));
  EXPECT_THAT(check(d), ElementsAre("w.comm_group.json: group key \"x\" is not an integer string",
                                    "w.1.et: node 5: group \"1\" of w.comm_group.json does not "
                                    "hold rank 1",
                                    "w.1.et: node 6: pg_name \"2\" is not a group of "
                                    "w.comm_group.json"));
  fs::remove(d.str() + "/w.comm_group.json");
  EXPECT_THAT(check(d), Contains("w.0.et: node 2: pg_name \"1\" but there is no "
                                 "w.comm_group.json"));
}

TEST(ChakraCheck, FindsStreamsThatChakraReadersMisread) {
  const Dir d;
  write_sound(d);
  // A zero-length message ends Chakra's Python reader early (docs/TRACES.md §3.2).
  d.write("w.1.et",
          stream({metadata(), encode(p2p(3, false, 0, 1, 7, 256)), "", encode(coll(5, "1"))}));
  EXPECT_THAT(check(d), ElementsAre("w.1.et: message 2 at byte 114 is empty; Chakra's Python "
                                    "reader stops at a zero length",
                                    "w.1.et: node 0: type INVALID_NODE is not a node type to "
                                    "replay"));
  // A Node where the GlobalMetadata belongs: its fields clash with GlobalMetadata's.
  d.write("w.1.et", stream({encode(p2p(3, false, 0, 1, 7, 256)), encode(coll(5, "1"))}));
  EXPECT_THAT(check(d), Contains("w.1.et: the first message does not decode as a GlobalMetadata "
                                 "(the file is truncated or corrupt, or starts with another "
                                 "message)"));
  // One whose fields happen to fit is caught by the fields GlobalMetadata does not have.
  std::string node_like;
  field_bytes(node_like, 1, "0.0.4");
  field_varint(node_like, 3, 4);
  d.write("w.1.et", stream({node_like, encode(p2p(3, false, 0, 1, 7, 256)), encode(coll(5, "1"))}));
  EXPECT_THAT(check(d), ElementsAre("w.1.et: the first message is not a GlobalMetadata"));
  d.write("w.1.et",
          stream({metadata(""), encode(p2p(3, false, 0, 1, 7, 256)), encode(coll(5, "1"))}));
  EXPECT_THAT(check(d), ElementsAre("w.1.et: the GlobalMetadata has no version"));
  d.write("w.1.et", "");
  EXPECT_THAT(check(d), Contains("w.1.et: the file is empty; expected a GlobalMetadata"));
}

TEST(ChakraCheck, FindsMissingRankFilesAndUnknownNodeTypes) {
  const Dir d;
  TestNode odd = comp(1);
  odd.type = 0;
  d.write("w.0.et", file_of({comp(0), odd}));
  d.write("w.2.et", file_of({comp(2)}));
  EXPECT_THAT(check(d),
              ElementsAre("w.1.et: missing; ASTRA-sim opens one file for each rank up to the "
                          "highest",
                          "w.0.et: node 1: type INVALID_NODE is not a node type to replay"));
}

TEST(ChakraCheck, ReportsADirectoryWithoutTraces) {
  const Dir d;
  EXPECT_THAT(check(d), ElementsAre(d.str() + ": no Chakra trace files (<prefix>.<rank>.et)"));
  EXPECT_THROW((void)check_chakra_directory(d.str() + "/missing"), IoError);
}

}  // namespace
}  // namespace metron::chakra
