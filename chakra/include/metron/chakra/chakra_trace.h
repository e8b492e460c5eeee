#pragma once
// Reading Chakra execution-trace files (docs/TRACES.md §3.2) into plain structs, and checking a
// directory of them against the Chakra rules of docs/TRACES.md §4.4, for tests and
// `metron check-trace`. No protobuf type appears here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace metron::chakra {

/// Chakra's NodeType (docs/TRACES.md §3.1); a file may hold a number outside the list.
enum class NodeType : std::int32_t {
  kInvalid = 0,
  kMetadata = 1,
  kMemLoad = 2,
  kMemStore = 3,
  kComp = 4,
  kCommSend = 5,
  kCommRecv = 6,
  kCommColl = 7,
};

/// Chakra's CollectiveCommType (docs/TRACES.md §3.1), the value of a `comm_type` attribute.
enum class CommType : std::int32_t {
  kAllReduce = 0,
  kReduce = 1,
  kAllGather = 2,
  kGather = 3,
  kScatter = 4,
  kBroadcast = 5,
  kAllToAll = 6,
  kReduceScatter = 7,
  kReduceScatterBlock = 8,
  kBarrier = 9,
};

/// The proto names: "COMP_NODE", "ALL_REDUCE", ...; "UNKNOWN(<n>)" outside the lists.
std::string to_string(NodeType type);
std::string to_string(CommType type);

/// The value of an AttributeProto, by its oneof case: bool_val, int32_val, int64_val, uint64_val,
/// string_val, bool_list; monostate when none is set or the case is one metron does not decode.
using AttributeValue = std::variant<std::monostate, bool, std::int32_t, std::int64_t, std::uint64_t,
                                    std::string, std::vector<bool>>;

/// One AttributeProto.
struct Attribute {
  std::string name;
  /// The field number of the oneof case the file set (9 for int64_val, ...; docs/TRACES.md
  /// §3.1), also for cases outside metron's schema; 0 when none is set.
  std::int32_t value_field = 0;
  AttributeValue value;
  friend bool operator==(const Attribute&, const Attribute&) = default;
};

/// One Node message.
struct Node {
  std::uint64_t id = 0;
  std::string name;
  NodeType type = NodeType::kInvalid;
  std::vector<std::uint64_t> ctrl_deps;
  std::vector<std::uint64_t> data_deps;
  std::uint64_t start_time_micros = 0;
  std::uint64_t duration_micros = 0;
  std::vector<Attribute> attrs;

  /// The first attribute named `name`, or null.
  [[nodiscard]] const Attribute* find(std::string_view attr_name) const;
};

/// A whole file: the GlobalMetadata, then the nodes in file order.
struct Trace {
  std::string version;
  std::vector<Attribute> metadata;
  std::vector<Node> nodes;
};

/// Reads one `.et` file. Throws InvalidConfig when it cannot be read (metron/base/file_io.h
/// read_file) and ParseError naming the message and byte offset when the stream does not decode.
/// @code
///   const chakra::Trace t = chakra::read_chakra_trace("et/metron.0.et");
///   for (const chakra::Node& n : t.nodes) std::cout << n.id << " " << to_string(n.type) << "\n";
/// @endcode
Trace read_chakra_trace(const std::string& path);

/// Every violation of the Chakra rules (docs/TRACES.md §4.4) by the `<prefix>.<rank>.et` files of
/// one directory and their `<prefix>.comm_group.json`, each message prefixed with the file's name;
/// empty when all hold. Each prefix is checked as one workload:
///   - each stream decodes to its end into non-empty messages, the first a GlobalMetadata with a
///     non-empty version;
///   - node ids are unique, every data/ctrl dep names a node of the file, the deps are acyclic,
///     the node type is a known one;
///   - the attributes of docs/TRACES.md §3.3 use their oneof case; comm nodes carry the ones
///     ASTRA-sim reads, with is_cpu_op false, and a send (recv) names its own rank as comm_src
///     (comm_dst);
///   - sends and recvs pair one to one across the files on (src, dst, tag) with equal comm_size;
///   - every pg_name other than "" and "0" is a group of the comm-group JSON that holds the rank.
/// Throws IoError when the directory cannot be listed, InvalidConfig when a file cannot be read.
std::vector<std::string> check_chakra_directory(const std::string& directory);

}  // namespace metron::chakra
