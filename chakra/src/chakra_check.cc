// The Chakra rules of docs/TRACES.md §4.4 over a directory of per-rank files: what ASTRA-sim and
// Chakra's feeders need to replay a workload (docs/TRACES.md §3.2-§3.4).

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <regex>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "attribute_cases.h"
#include "decode.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/base/json_limits.h"
#include "metron/chakra/chakra_trace.h"

namespace metron::chakra {
namespace {

/// One end of a point-to-point transfer, as its node states it.
struct P2PEnd {
  std::string where;  ///< "<file>: node <id>"
  std::int64_t size = 0;
};

/// What one workload (one prefix) gathers across its files.
struct Workload {
  std::map<std::int64_t, std::string> files;  ///< rank -> path
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::vector<P2PEnd>> sends;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::vector<P2PEnd>> recvs;
  /// (where, rank, pg_name) of every collective naming a group other than "" or "0".
  std::vector<std::tuple<std::string, std::int64_t, std::string>> groups_used;
};

template <class T>
std::optional<T> value_of(const Node& node, std::string_view name) {
  const Attribute* a = node.find(name);
  if (a == nullptr) return std::nullopt;
  if (const T* v = std::get_if<T>(&a->value)) return *v;
  return std::nullopt;
}

/// Ids unique, every dep present, no cycle.
void check_dependencies(const Trace& trace, const std::string& file,
                        std::vector<std::string>& out) {
  std::unordered_map<std::uint64_t, std::size_t> index;
  for (std::size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!index.emplace(trace.nodes[i].id, i).second) {
      out.push_back(file + ": node " + std::to_string(trace.nodes[i].id) +
                    ": the id is used by more than one node");
    }
  }
  std::vector<std::int32_t> missing(trace.nodes.size(), 0);
  std::vector<std::vector<std::size_t>> children(trace.nodes.size());
  for (std::size_t i = 0; i < trace.nodes.size(); ++i) {
    const Node& n = trace.nodes[i];
    for (const auto* deps : {&n.data_deps, &n.ctrl_deps}) {
      const char* kind = deps == &n.data_deps ? "data_deps" : "ctrl_deps";
      for (std::uint64_t d : *deps) {
        const auto parent = index.find(d);
        if (parent == index.end()) {
          out.push_back(file + ": node " + std::to_string(n.id) + ": " + kind + " names node " +
                        std::to_string(d) + ", which is not in the file");
          continue;
        }
        children[parent->second].push_back(i);
        ++missing[i];
      }
    }
  }
  std::queue<std::size_t> ready;
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (missing[i] == 0) ready.push(i);
  }
  std::size_t done = 0;
  for (; !ready.empty(); ready.pop(), ++done) {
    for (std::size_t c : children[ready.front()]) {
      if (--missing[c] == 0) ready.push(c);
    }
  }
  if (done != trace.nodes.size()) {
    std::uint64_t first = UINT64_MAX;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      if (missing[i] > 0) first = std::min(first, trace.nodes[i].id);
    }
    out.push_back(file + ": the dependencies form a cycle (through node " + std::to_string(first) +
                  " or a node it waits for)");
  }
}

/// The oneof cases of docs/TRACES.md §3.3.
void check_attribute_cases(const Node& node, const std::string& where,
                           std::vector<std::string>& out) {
  for (const Attribute& a : node.attrs) {
    const detail::AttributeCase* expected = detail::find_attribute_case(a.name);
    if (expected == nullptr || a.value_field == expected->field) continue;
    out.push_back(
        where + ": attribute " + a.name + " holds " +
        (a.value_field == 0 ? std::string("no value") : detail::case_name(a.value_field)) +
        "; expected " + std::string(expected->case_name) +
        " (the simulators read no other case; docs/TRACES.md §3.3)");
  }
}

/// What ASTRA-sim needs of a communication node (docs/TRACES.md §3.4), and the p2p ends and
/// groups for the checks across files.
void check_comm_node(const Node& node, std::int64_t rank, const std::string& where,
                     Workload& workload, std::vector<std::string>& out) {
  const bool coll = node.type == NodeType::kCommColl;
  const bool send = node.type == NodeType::kCommSend;
  std::vector<std::string_view> required = {"comm_size"};
  if (coll) required.emplace_back("comm_type");
  if (!coll) required.insert(required.end(), {"comm_src", "comm_dst", "comm_tag"});
  bool complete = true;
  for (std::string_view name : required) {
    if (node.find(name) == nullptr) {
      out.push_back(where + ": " + to_string(node.type) + " has no " + std::string(name));
      complete = false;
    }
  }
  if (value_of<bool>(node, "is_cpu_op").value_or(false)) {
    out.push_back(where + ": is_cpu_op is true; ASTRA-sim rejects CPU communication nodes");
  }
  if (coll) {
    const auto type = value_of<std::int64_t>(node, "comm_type");
    if (type && (*type < 0 || *type > static_cast<std::int64_t>(CommType::kBarrier))) {
      out.push_back(where + ": comm_type " + std::to_string(*type) +
                    " is not a CollectiveCommType");
    }
    const auto pg = value_of<std::string>(node, "pg_name");
    if (pg && !pg->empty() && *pg != "0") workload.groups_used.emplace_back(where, rank, *pg);
    return;
  }
  const auto src = value_of<std::int32_t>(node, "comm_src");
  const auto dst = value_of<std::int32_t>(node, "comm_dst");
  const auto tag = value_of<std::int32_t>(node, "comm_tag");
  const auto size = value_of<std::int64_t>(node, "comm_size");
  if (!complete || !src || !dst || !tag || !size) return;  // reported above or as a wrong case
  const std::int32_t own = send ? *src : *dst;
  if (own != rank) {
    out.push_back(where + ": " + (send ? "comm_src " : "comm_dst ") + std::to_string(own) +
                  " is not the file's rank " + std::to_string(rank));
  }
  (send ? workload.sends : workload.recvs)[{*src, *dst, *tag}].push_back({where, *size});
}

void check_file(const std::string& path, std::int64_t rank, Workload& workload,
                std::vector<std::string>& out) {
  const std::string file = std::filesystem::path(path).filename().string();
  detail::Decoded decoded = detail::decode_stream(read_file(path));
  for (const std::string& p : decoded.problems) out.push_back(file + ": " + p);
  if (decoded.error) out.push_back(file + ": " + *decoded.error);
  check_dependencies(decoded.trace, file, out);
  for (const Node& node : decoded.trace.nodes) {
    const std::string where = file + ": node " + std::to_string(node.id);
    const auto type = static_cast<std::int32_t>(node.type);
    if (type <= static_cast<std::int32_t>(NodeType::kInvalid) ||
        type > static_cast<std::int32_t>(NodeType::kCommColl)) {
      out.push_back(where + ": type " + to_string(node.type) + " is not a node type to replay");
    }
    check_attribute_cases(node, where, out);
    if (node.type == NodeType::kCommColl || node.type == NodeType::kCommSend ||
        node.type == NodeType::kCommRecv) {
      check_comm_node(node, rank, where, workload, out);
    }
  }
}

std::string describe_key(const std::tuple<std::int32_t, std::int32_t, std::int32_t>& key) {
  return "(src " + std::to_string(std::get<0>(key)) + ", dst " + std::to_string(std::get<1>(key)) +
         ", tag " + std::to_string(std::get<2>(key)) + ")";
}

/// Sends and recvs pair one to one on (src, dst, tag), with equal sizes.
void check_pairs(const Workload& w, std::vector<std::string>& out) {
  static const std::vector<P2PEnd> kNone;
  std::set<std::tuple<std::int32_t, std::int32_t, std::int32_t>> keys;
  for (const auto& [key, ends] : w.sends) keys.insert(key);
  for (const auto& [key, ends] : w.recvs) keys.insert(key);
  for (const auto& key : keys) {
    const auto s = w.sends.find(key);
    const auto r = w.recvs.find(key);
    const std::vector<P2PEnd>& sends = s == w.sends.end() ? kNone : s->second;
    const std::vector<P2PEnd>& recvs = r == w.recvs.end() ? kNone : r->second;
    if (sends.size() != 1 || recvs.size() != 1) {
      const std::string first = sends.empty() ? recvs.front().where : sends.front().where;
      out.push_back(first + ": transfer " + describe_key(key) + " has " +
                    std::to_string(sends.size()) + " send(s) and " + std::to_string(recvs.size()) +
                    " recv(s); expected one of each");
      continue;
    }
    if (sends.front().size != recvs.front().size) {
      out.push_back(sends.front().where + ": transfer " + describe_key(key) + " sends " +
                    std::to_string(sends.front().size) + " bytes but " + recvs.front().where +
                    " receives " + std::to_string(recvs.front().size));
    }
  }
}

/// ASTRA-sim's comm-group JSON: {"<integer>": [ranks...], ...} (docs/TRACES.md §3.4).
std::map<std::string, std::set<std::int64_t>> read_groups(const std::string& path,
                                                          std::vector<std::string>& out) {
  const std::string file = std::filesystem::path(path).filename().string();
  std::map<std::string, std::set<std::int64_t>> groups;
  const std::string text = read_file(path);
  // A NUL would end the parse early and pass what precedes it (base/json_limits.h).
  const nlohmann::json doc =
      find_json_nul(text) ? nlohmann::json(nullptr) : nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) {
    out.push_back(file + ": expected a JSON object {\"1\": [ranks...], ...}");
    return groups;
  }
  for (const auto& [key, ranks] : doc.items()) {
    const bool integer = !key.empty() && std::all_of(key.begin(), key.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    if (!integer) out.push_back(file + ": group key \"" + key + "\" is not an integer string");
    std::set<std::int64_t>& members = groups[key];
    if (!ranks.is_array()) {
      out.push_back(file + ": group \"" + key + "\": expected an array of ranks");
      continue;
    }
    for (const nlohmann::json& r : ranks) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0) {
        out.push_back(file + ": group \"" + key + "\": " + r.dump() + " is not a rank");
      } else {
        members.insert(r.get<std::int64_t>());
      }
    }
  }
  return groups;
}

void check_groups(const std::string& directory, const std::string& prefix, const Workload& w,
                  std::vector<std::string>& out) {
  const std::filesystem::path path =
      std::filesystem::path(directory) / (prefix + ".comm_group.json");
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (!w.groups_used.empty()) {
      out.push_back(std::get<0>(w.groups_used.front()) + ": pg_name \"" +
                    std::get<2>(w.groups_used.front()) + "\" but there is no " +
                    path.filename().string());
    }
    return;
  }
  const auto groups = read_groups(path.string(), out);
  for (const auto& [where, rank, name] : w.groups_used) {
    const auto g = groups.find(name);
    if (g == groups.end()) {
      out.push_back(where + ": pg_name \"" + name + "\" is not a group of " +
                    path.filename().string());
    } else if (!g->second.contains(rank)) {
      out.push_back(where + ": group \"" + name + "\" of " + path.filename().string() +
                    " does not hold rank " + std::to_string(rank));
    }
  }
}

}  // namespace

std::vector<std::string> check_chakra_directory(const std::string& directory) {
  std::map<std::string, Workload> workloads;  // by prefix
  static const std::regex kRankFile(R"((.+)\.([0-9]{1,9})\.et)");
  std::error_code error;
  std::filesystem::directory_iterator it(directory, error);
  if (error) {
    throw IoError("check-trace: cannot list directory \"" + directory + "\": " + error.message());
  }
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kRankFile)) continue;
    workloads[m[1].str()].files[std::stoll(m[2].str())] = entry.path().string();
  }
  std::vector<std::string> out;
  if (workloads.empty()) {
    out.push_back(directory + ": no Chakra trace files (<prefix>.<rank>.et)");
  }
  for (auto& [prefix, w] : workloads) {
    // ASTRA-sim opens <prefix>.<i>.et for every NPU i (docs/TRACES.md §3.4).
    for (std::int64_t r = 0; r <= w.files.rbegin()->first; ++r) {
      if (!w.files.contains(r)) {
        out.push_back(prefix + "." + std::to_string(r) +
                      ".et: missing; ASTRA-sim opens one file "
                      "for each rank up to the highest");
      }
    }
    for (const auto& [rank, path] : w.files) check_file(path, rank, w, out);
    check_pairs(w, out);
    check_groups(directory, prefix, w, out);
  }
  return out;
}

}  // namespace metron::chakra
