// The Chakra export read back with the C++ reader and compared node by node with an expectation
// derived here from the graph (Note [chakra export] restated, not the writer's code), and its
// argument errors.

#include "metron/chakra/chakra_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "chakra/scenarios.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_trace.h"

namespace metron::chakra {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

/// A fresh directory under the system's temporary folder, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              ("metron-chakra-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

template <class T>
T attr(const Node& node, const char* name) {
  const Attribute* a = node.find(name);
  EXPECT_NE(a, nullptr) << "node " << node.id << " has no " << name;
  if (a == nullptr) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(a->value)) << "node " << node.id << " " << name;
  return std::holds_alternative<T>(a->value) ? std::get<T>(a->value) : T{};
}

/// data_deps per task, from the graph's own lists: deps, a wait's target, the previous task of
/// the stream in issue order, the last host wait issued before.
std::map<std::uint64_t, std::set<std::uint64_t>> expected_deps(const ir::Graph& g) {
  std::map<std::uint64_t, std::set<std::uint64_t>> out;
  for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
    std::map<std::int32_t, std::int32_t> last_on_stream;
    std::int32_t last_wait = -1;
    for (ir::TaskId id : g.issue_order(ir::RankId{r})) {
      const ir::Task& t = g.task(id);
      std::set<std::uint64_t>& deps = out[static_cast<std::uint64_t>(id.value())];
      for (ir::TaskId d : t.deps) deps.insert(static_cast<std::uint64_t>(d.value()));
      if (last_wait >= 0) deps.insert(static_cast<std::uint64_t>(last_wait));
      if (const auto* w = std::get_if<ir::HostWait>(&t.op)) {
        deps.insert(static_cast<std::uint64_t>(w->target.value()));
        last_wait = id.value();
        continue;
      }
      const auto prev = last_on_stream.find(t.stream.value());
      if (prev != last_on_stream.end()) deps.insert(static_cast<std::uint64_t>(prev->second));
      last_on_stream[t.stream.value()] = id.value();
    }
  }
  return out;
}

std::int64_t chakra_comm_type(ir::CollectiveOp op) {
  switch (op) {
    case ir::CollectiveOp::kAllReduce:
      return 0;
    case ir::CollectiveOp::kReduce:
      return 1;
    case ir::CollectiveOp::kAllGather:
      return 2;
    case ir::CollectiveOp::kBroadcast:
      return 5;
    case ir::CollectiveOp::kAllToAll:
      return 6;
    case ir::CollectiveOp::kReduceScatter:
      return 7;
  }
  return -1;
}

void expect_node(const ir::Graph& g, const Node& n, std::int64_t duration_ns) {
  const ir::Task& t = g.task(ir::TaskId{static_cast<std::int32_t>(n.id)});
  SCOPED_TRACE(g.describe(ir::TaskId{static_cast<std::int32_t>(n.id)}));
  EXPECT_FALSE(n.name.empty());
  EXPECT_EQ(n.duration_micros,
            static_cast<std::uint64_t>(std::llround(static_cast<double>(duration_ns) / 1000.0)));
  EXPECT_FALSE(attr<bool>(n, "is_cpu_op"));
  EXPECT_THAT(n.ctrl_deps, IsEmpty());
  if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
    EXPECT_EQ(n.type, NodeType::kComp);
    EXPECT_EQ(attr<std::int64_t>(n, "num_ops"), std::llround(c->flops));
    EXPECT_EQ(attr<std::uint64_t>(n, "tensor_size"),
              static_cast<std::uint64_t>(std::llround(c->bytes_moved)));
  } else if (const auto* k = std::get_if<ir::Collective>(&t.op)) {
    EXPECT_EQ(n.type, NodeType::kCommColl);
    EXPECT_EQ(attr<std::int64_t>(n, "comm_type"), chakra_comm_type(k->op));
    EXPECT_EQ(attr<std::int64_t>(n, "comm_size"), k->bytes);
    EXPECT_EQ(attr<std::string>(n, "pg_name"), std::to_string(k->group.value() + 1));
  } else if (const auto* s = std::get_if<ir::Send>(&t.op)) {
    EXPECT_EQ(n.type, NodeType::kCommSend);
    EXPECT_EQ(attr<std::int32_t>(n, "comm_src"), t.rank.value());
    EXPECT_EQ(attr<std::int32_t>(n, "comm_dst"), s->peer.value());
    EXPECT_EQ(attr<std::int64_t>(n, "comm_size"), s->bytes);
  } else if (const auto* r = std::get_if<ir::Recv>(&t.op)) {
    EXPECT_EQ(n.type, NodeType::kCommRecv);
    EXPECT_EQ(attr<std::int32_t>(n, "comm_src"), r->peer.value());
    EXPECT_EQ(attr<std::int32_t>(n, "comm_dst"), t.rank.value());
    EXPECT_EQ(attr<std::int64_t>(n, "comm_size"), r->bytes);
  } else {
    EXPECT_EQ(n.type, NodeType::kComp);
    EXPECT_THAT(n.name, HasSubstr("host wait"));
    EXPECT_EQ(attr<std::int64_t>(n, "num_ops"), 0);
  }
}

TEST(ChakraExport, EveryRankFileHoldsItsTasksAsNodes) {
  for (const testing::NamedStep& s : testing::chakra_steps()) {
    SCOPED_TRACE(s.name);
    const ir::Graph& g = s.step.graph;
    TempDir dir(s.name);
    const std::string out = dir.str() + "/nested/et";  // created when missing
    const std::vector<std::string> paths = write_chakra_traces(g, s.step.durations, out, "w");
    ASSERT_EQ(paths.size(), static_cast<std::size_t>(g.num_ranks()) + 1);
    EXPECT_EQ(fs::path(paths.back()).filename(), "w.comm_group.json");
    const auto deps = expected_deps(g);
    // Send/recv tags seen, by (src, dst, tag): the two ends must agree.
    std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::vector<std::int64_t>>
        transfers;
    for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
      EXPECT_EQ(fs::path(paths[static_cast<std::size_t>(r)]).filename(),
                "w." + std::to_string(r) + ".et");
      const Trace trace = read_chakra_trace(paths[static_cast<std::size_t>(r)]);
      EXPECT_EQ(trace.version, "0.0.4");
      ASSERT_EQ(trace.metadata.size(), 3U);
      EXPECT_EQ(trace.metadata[0].name, "schema");
      EXPECT_EQ(std::get<std::string>(trace.metadata[0].value), "metron");
      EXPECT_EQ(trace.metadata[1].name, "pid");
      EXPECT_EQ(std::get<std::int64_t>(trace.metadata[1].value), r);
      ASSERT_EQ(trace.nodes.size(), g.issue_order(ir::RankId{r}).size());
      std::set<std::uint64_t> seen;
      for (const Node& n : trace.nodes) {
        ASSERT_LT(n.id, static_cast<std::uint64_t>(g.num_tasks()));
        EXPECT_EQ(g.task(ir::TaskId{static_cast<std::int32_t>(n.id)}).rank.value(), r);
        const std::set<std::uint64_t> got(n.data_deps.begin(), n.data_deps.end());
        EXPECT_EQ(got, deps.at(n.id)) << "node " << n.id;
        EXPECT_TRUE(std::is_sorted(n.data_deps.begin(), n.data_deps.end()));
        EXPECT_EQ(got.size(), n.data_deps.size()) << "repeated deps in node " << n.id;
        for (std::uint64_t d : got) EXPECT_TRUE(seen.contains(d)) << d << " after " << n.id;
        EXPECT_TRUE(seen.insert(n.id).second);
        expect_node(g, n, s.step.durations[n.id]);
        if (n.type == NodeType::kCommSend || n.type == NodeType::kCommRecv) {
          transfers[{attr<std::int32_t>(n, "comm_src"), attr<std::int32_t>(n, "comm_dst"),
                     attr<std::int32_t>(n, "comm_tag")}]
              .push_back(attr<std::int64_t>(n, "comm_size"));
        }
      }
    }
    for (const auto& [key, sizes] : transfers) {
      ASSERT_EQ(sizes.size(), 2U) << "tag " << std::get<2>(key);
      EXPECT_EQ(sizes[0], sizes[1]);
    }
    const nlohmann::json groups = nlohmann::json::parse(read_file(paths.back()));
    ASSERT_EQ(groups.size(), g.data().groups.size());
    for (std::size_t i = 0; i < g.data().groups.size(); ++i) {
      std::vector<std::int32_t> ranks;
      for (ir::RankId rank : g.data().groups[i].ranks) ranks.push_back(rank.value());
      EXPECT_EQ(groups.at(std::to_string(i + 1)).get<std::vector<std::int32_t>>(), ranks);
    }
    EXPECT_THAT(check_chakra_directory(out), IsEmpty());
  }
}

TEST(ChakraExport, TheStepsCoverEveryKindOfNode) {
  // So that the test above checks each mapping: p2p, collectives of tp and dp, host waits.
  std::set<ir::TaskKind> kinds;
  std::set<ir::CollectiveOp> ops;
  for (const testing::NamedStep& s : testing::chakra_steps()) {
    for (const ir::Task& t : s.step.graph.tasks()) {
      kinds.insert(t.kind());
      if (const auto* c = std::get_if<ir::Collective>(&t.op)) ops.insert(c->op);
    }
  }
  EXPECT_EQ(kinds.size(), 5U);
  EXPECT_GE(ops.size(), 2U);
}

TEST(ChakraExport, DurationsRoundToWholeMicroseconds) {
  const testing::NamedStep s{"round",
                             scenario::build_step(testing::explicit_costs("1f1b", 2, 1, 2))};
  std::vector<std::int64_t> durations(s.step.durations.size(), 0);
  const std::vector<std::int64_t> samples = {0, 1, 499, 500, 1'499, 1'500, 2'000'000};
  for (std::size_t i = 0; i < durations.size(); ++i) durations[i] = samples[i % samples.size()];
  TempDir dir("round");
  write_chakra_traces(s.step.graph, durations, dir.str());
  const std::map<std::int64_t, std::uint64_t> micros = {
      {0, 0}, {1, 0}, {499, 0}, {500, 1}, {1'499, 1}, {1'500, 2}, {2'000'000, 2'000}};
  for (std::int32_t r = 0; r < s.step.graph.num_ranks(); ++r) {
    for (const Node& n :
         read_chakra_trace(dir.str() + "/metron." + std::to_string(r) + ".et").nodes) {
      EXPECT_EQ(n.duration_micros, micros.at(durations[n.id])) << durations[n.id];
    }
  }
}

TEST(ChakraExport, RefusesBadArguments) {
  const scenario::Step step = scenario::build_step(testing::explicit_costs("1f1b", 2, 1, 2));
  TempDir dir("bad");
  const std::vector<std::int64_t> few(3, 1);
  EXPECT_THAT([&] { (void)write_chakra_traces(step.graph, few, dir.str()); },
              ThrowsMessage<InvalidConfig>("chakra export: expected one duration per task (" +
                                           std::to_string(step.graph.num_tasks()) + "); got 3"));
  std::vector<std::int64_t> negative = step.durations;
  negative[1] = -5;
  EXPECT_THAT([&] { (void)write_chakra_traces(step.graph, negative, dir.str()); },
              ThrowsMessage<InvalidConfig>("chakra export: " + step.graph.describe(ir::TaskId{1}) +
                                           ": expected a duration >= 0 ns; got -5"));
  EXPECT_THAT([&] { (void)write_chakra_traces(step.graph, step.durations, dir.str(), "a/b"); },
              ThrowsMessage<InvalidConfig>(
                  "chakra export: expected a file name prefix without '/'; got \"a/b\""));
  EXPECT_THAT([&] { (void)write_chakra_traces(step.graph, step.durations, ""); },
              ThrowsMessage<InvalidConfig>("chakra export: expected a directory; got \"\""));
  EXPECT_FALSE(fs::exists(dir.str()));  // nothing written
}

TEST(ChakraExport, WritesNothingWhenTheDirectoryCannotBeMade) {
  const scenario::Step step = scenario::build_step(testing::explicit_costs("1f1b", 2, 1, 2));
  TempDir dir("blocked");
  fs::create_directories(dir.str());
  write_file_atomically(dir.str() + "/file", "x");
  EXPECT_THROW((void)write_chakra_traces(step.graph, step.durations, dir.str() + "/file/et"),
               IoError);
}

TEST(ChakraExport, NamesTheTypes) {
  EXPECT_EQ(to_string(NodeType::kCommColl), "COMM_COLL_NODE");
  EXPECT_EQ(to_string(static_cast<NodeType>(42)), "UNKNOWN(42)");
  EXPECT_EQ(to_string(CommType::kReduceScatter), "REDUCE_SCATTER");
}

}  // namespace
}  // namespace metron::chakra
