// The writer of Note [chakra export] (metron/chakra/chakra_export.h).

#include "metron/chakra/chakra_export.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <queue>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "et_def.pb.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_trace.h"

namespace metron::chakra {
namespace {

namespace pb = ::ChakraProtoMsg;

void add_bool(pb::Node& node, std::string_view name, bool value) {
  pb::AttributeProto* a = node.add_attr();
  a->set_name(std::string(name));
  a->set_bool_val(value);
}
void add_int32(pb::Node& node, std::string_view name, std::int32_t value) {
  pb::AttributeProto* a = node.add_attr();
  a->set_name(std::string(name));
  a->set_int32_val(value);
}
void add_int64(pb::AttributeProto* a, std::string_view name, std::int64_t value) {
  a->set_name(std::string(name));
  a->set_int64_val(value);
}
void add_int64(pb::Node& node, std::string_view name, std::int64_t value) {
  add_int64(node.add_attr(), name, value);
}
void add_uint64(pb::Node& node, std::string_view name, std::uint64_t value) {
  pb::AttributeProto* a = node.add_attr();
  a->set_name(std::string(name));
  a->set_uint64_val(value);
}
void add_string(pb::AttributeProto* a, std::string_view name, std::string value) {
  a->set_name(std::string(name));
  a->set_string_val(std::move(value));
}

/// Whole microseconds, rounded half up, without overflowing near INT64_MAX.
std::uint64_t to_micros(std::int64_t ns) {
  return static_cast<std::uint64_t>(ns / 1000 + (ns % 1000 >= 500 ? 1 : 0));
}

/// A compute amount (flops, bytes) as an integer attribute; refused when it does not fit.
std::int64_t whole_amount(double value, const ir::Graph& graph, ir::TaskId id, const char* what) {
  // 2^63 is exactly representable; anything at or above it does not fit an int64.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(value >= 0 && value < kLimit)) {
    throw InvalidConfig("chakra export: " + graph.describe(id) + ": " + what + " " +
                        std::to_string(value) + " does not fit a 64-bit attribute");
  }
  return std::llround(value);
}

CommType comm_type_of(ir::CollectiveOp op) {
  switch (op) {
    case ir::CollectiveOp::kAllReduce:
      return CommType::kAllReduce;
    case ir::CollectiveOp::kReduceScatter:
      return CommType::kReduceScatter;
    case ir::CollectiveOp::kAllGather:
      return CommType::kAllGather;
    case ir::CollectiveOp::kReduce:
      return CommType::kReduce;
    case ir::CollectiveOp::kBroadcast:
      return CommType::kBroadcast;
    case ir::CollectiveOp::kAllToAll:
      return CommType::kAllToAll;
  }
  throw InternalError(__FILE__, __LINE__, "chakra export: unknown collective op");
}

/// The data_deps of Note [chakra export] for one task; `last_wait` is the rank's last HostWait
/// issued before it (none if there is none).
std::vector<std::uint64_t> dependencies(const ir::Graph& graph, ir::TaskId id,
                                        ir::TaskId last_wait) {
  const ir::Task& task = graph.task(id);
  std::vector<std::uint64_t> deps;
  for (ir::TaskId d : task.deps) deps.push_back(static_cast<std::uint64_t>(d.value()));
  if (const auto* wait = std::get_if<ir::HostWait>(&task.op)) {
    deps.push_back(static_cast<std::uint64_t>(wait->target.value()));
  }
  if (const ir::TaskId before = graph.stream_predecessor(id); before.valid()) {
    deps.push_back(static_cast<std::uint64_t>(before.value()));
  }
  if (last_wait.valid()) deps.push_back(static_cast<std::uint64_t>(last_wait.value()));
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  return deps;
}

/// The node of one task, without its dependencies.
pb::Node make_node(const ir::Graph& graph, ir::TaskId id, std::int64_t duration_ns) {
  const ir::Task& task = graph.task(id);
  pb::Node node;
  node.set_id(static_cast<std::uint64_t>(id.value()));
  node.set_duration_micros(to_micros(duration_ns));
  const std::int32_t rank = task.rank.value();
  // Graph::comm_instance is an int32, so every tag fits comm_tag's int32_val as it is.
  static_assert(std::is_same_v<decltype(graph.comm_instance(id)), std::int32_t>);
  std::visit(
      [&](const auto& op) {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, ir::Compute>) {
          node.set_name(graph.describe(id));
          node.set_type(pb::COMP_NODE);
          add_int64(node, "num_ops", whole_amount(op.flops, graph, id, "flops"));
          add_uint64(
              node, "tensor_size",
              static_cast<std::uint64_t>(whole_amount(op.bytes_moved, graph, id, "bytes moved")));
        } else if constexpr (std::is_same_v<Op, ir::Collective>) {
          node.set_name(graph.describe(id));
          node.set_type(pb::COMM_COLL_NODE);
          add_int64(node, "comm_type", static_cast<std::int64_t>(comm_type_of(op.op)));
          add_int64(node, "comm_size", op.bytes);
          // Groups from 1: ASTRA-sim reads "" and "0" as every rank (docs/TRACES.md §3.4).
          add_string(node.add_attr(), "pg_name", std::to_string(op.group.value() + 1));
        } else if constexpr (std::is_same_v<Op, ir::Send> || std::is_same_v<Op, ir::Recv>) {
          constexpr bool kIsSend = std::is_same_v<Op, ir::Send>;
          node.set_name(graph.describe(id));
          node.set_type(kIsSend ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE);
          add_int32(node, "comm_src", kIsSend ? rank : op.peer.value());
          add_int32(node, "comm_dst", kIsSend ? op.peer.value() : rank);
          add_int32(node, "comm_tag", graph.comm_instance(id));
          add_int64(node, "comm_size", op.bytes);
        } else {
          // A host wait has no Chakra type; a zero-work compute node keeps its place in the
          // order (Note [chakra export]).
          node.set_name("host wait: " + graph.describe(id));
          node.set_type(pb::COMP_NODE);
          add_int64(node, "num_ops", 0);
          add_uint64(node, "tensor_size", 0);
        }
      },
      task.op);
  add_bool(node, "is_cpu_op", false);
  return node;
}

/// Rank `rank`'s nodes, parents first: Kahn's order taking the smallest ready id, so id order
/// wherever id order is already topological.
std::vector<pb::Node> rank_nodes(const ir::Graph& graph, ir::RankId rank,
                                 std::span<const std::int64_t> durations_ns) {
  const std::span<const ir::TaskId> issued = graph.issue_order(rank);
  std::vector<pb::Node> nodes(issued.size());
  std::unordered_map<std::uint64_t, std::size_t> slot;  // node id -> index in nodes
  std::vector<std::int32_t> missing(issued.size(), 0);
  std::vector<std::vector<std::size_t>> children(issued.size());
  ir::TaskId last_wait;
  for (std::size_t i = 0; i < issued.size(); ++i) {
    const ir::TaskId id = issued[i];
    nodes[i] = make_node(graph, id, durations_ns[id.index()]);
    for (std::uint64_t d : dependencies(graph, id, last_wait)) nodes[i].add_data_deps(d);
    if (graph.task(id).kind() == ir::TaskKind::kHostWait) last_wait = id;
    slot.emplace(nodes[i].id(), i);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (std::uint64_t d : nodes[i].data_deps()) {
      const auto parent = slot.find(d);
      if (parent == slot.end()) {
        throw InvalidGraph({"chakra export: " + graph.describe(issued[i]) + " depends on task " +
                            std::to_string(d) + " of another rank"});
      }
      children[parent->second].push_back(i);
      ++missing[i];
    }
  }
  using Entry = std::pair<std::uint64_t, std::size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (missing[i] == 0) ready.emplace(nodes[i].id(), i);
  }
  std::vector<pb::Node> ordered;
  ordered.reserve(nodes.size());
  while (!ready.empty()) {
    const std::size_t i = ready.top().second;
    ready.pop();
    for (std::size_t c : children[i]) {
      if (--missing[c] == 0) ready.emplace(nodes[c].id(), c);
    }
    ordered.push_back(std::move(nodes[i]));
  }
  if (ordered.size() != nodes.size()) {
    throw InvalidGraph({"chakra export: rank " + std::to_string(rank.value()) +
                        ": the dependencies of Note [chakra export] form a cycle, so the graph "
                        "cannot run"});
  }
  return ordered;
}

std::string rank_file(const ir::Graph& graph, ir::RankId rank,
                      std::span<const std::int64_t> durations_ns) {
  pb::GlobalMetadata meta;
  meta.set_version(kChakraVersion);
  add_string(meta.add_attr(), "schema", "metron");
  add_int64(meta.add_attr(), "pid", rank.value());
  add_int64(meta.add_attr(), "num_ranks", graph.num_ranks());
  std::string content;
  {
    // The stream flushes into `content` when it goes out of scope.
    google::protobuf::io::StringOutputStream out(&content);
    bool ok = google::protobuf::util::SerializeDelimitedToZeroCopyStream(meta, &out);
    for (const pb::Node& node : rank_nodes(graph, rank, durations_ns)) {
      ok = ok && google::protobuf::util::SerializeDelimitedToZeroCopyStream(node, &out);
    }
    METRON_ASSERT(ok, "chakra export: a message did not serialize");
  }
  return content;
}

/// ASTRA-sim's --comm-group-configuration: {"1": [0, 1], ...}, keys GroupId + 1 in order.
std::string comm_group_json(const ir::Graph& graph) {
  std::string out = "{";
  const auto& groups = graph.data().groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    out += g == 0 ? "\n" : ",\n";
    out += "  \"" + std::to_string(g + 1) + "\": [";
    for (std::size_t i = 0; i < groups[g].ranks.size(); ++i) {
      if (i > 0) out += ", ";
      out += std::to_string(groups[g].ranks[i].value());
    }
    out += "]";
  }
  out += groups.empty() ? "}\n" : "\n}\n";
  return out;
}

void check_arguments(const ir::Graph& graph, std::span<const std::int64_t> durations_ns,
                     const std::string& directory, const std::string& prefix) {
  if (durations_ns.size() != static_cast<std::size_t>(graph.num_tasks())) {
    throw InvalidConfig("chakra export: expected one duration per task (" +
                        std::to_string(graph.num_tasks()) + "); got " +
                        std::to_string(durations_ns.size()));
  }
  for (std::size_t i = 0; i < durations_ns.size(); ++i) {
    if (durations_ns[i] < 0) {
      throw InvalidConfig(
          "chakra export: " + graph.describe(ir::TaskId{static_cast<std::int32_t>(i)}) +
          ": expected a duration >= 0 ns; got " + std::to_string(durations_ns[i]));
    }
  }
  if (directory.empty()) throw InvalidConfig("chakra export: expected a directory; got \"\"");
  if (prefix.empty() || prefix == "." || prefix == ".." ||
      prefix.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
    throw InvalidConfig("chakra export: expected a file name prefix without '/'; got \"" + prefix +
                        "\"");
  }
}

}  // namespace

std::vector<std::string> chakra_trace_paths(const std::string& directory, const std::string& prefix,
                                            std::int32_t num_ranks) {
  const std::filesystem::path dir(directory);
  std::vector<std::string> paths;
  for (std::int32_t r = 0; r < num_ranks; ++r) {
    paths.push_back((dir / (prefix + "." + std::to_string(r) + ".et")).string());
  }
  paths.push_back((dir / (prefix + ".comm_group.json")).string());
  return paths;
}

std::vector<OutputFile> chakra_trace_files(const ir::Graph& graph,
                                           std::span<const std::int64_t> durations_ns,
                                           const std::string& directory,
                                           const std::string& prefix) {
  check_arguments(graph, durations_ns, directory, prefix);
  const std::vector<std::string> paths = chakra_trace_paths(directory, prefix, graph.num_ranks());
  std::vector<OutputFile> files;
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    files.push_back(
        {paths[static_cast<std::size_t>(r)], rank_file(graph, ir::RankId{r}, durations_ns)});
  }
  files.push_back({paths.back(), comm_group_json(graph)});
  return files;
}

std::vector<std::string> write_chakra_traces(const ir::Graph& graph,
                                             std::span<const std::int64_t> durations_ns,
                                             const std::string& directory,
                                             const std::string& prefix) {
  const std::vector<OutputFile> files = chakra_trace_files(graph, durations_ns, directory, prefix);
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    throw IoError("chakra export: cannot create directory \"" + directory +
                  "\": " + error.message());
  }
  write_files_atomically(files);
  std::vector<std::string> paths;
  for (const OutputFile& file : files) paths.push_back(file.path);
  return paths;
}

}  // namespace metron::chakra
