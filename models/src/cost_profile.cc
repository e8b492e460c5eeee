// CostProfile: exact-match lookup of measured costs, and its JSON form (Note [profile JSON]).

#include "metron/models/cost_profile.h"

#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "json_reading.h"
#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "metron/base/json_layout.h"
#include "metron/models/limits.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

using detail::brief;
using detail::fail;
using detail::Json;
using detail::ObjectReader;
using detail::read_bool;
using detail::read_non_negative_number;
using detail::read_positive_integer;
using detail::read_string;

// Note [profile JSON]: milliseconds in the file, seconds in memory.
constexpr double kMsPerSecond = 1000;

constexpr Precision kPrecisions[] = {Precision::kBf16, Precision::kFp16, Precision::kFp32,
                                     Precision::kFp8};
constexpr CommOp kCommOps[] = {CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather,
                               CommOp::kReduce,    CommOp::kBroadcast,     CommOp::kAllToAll};

template <class Enum, std::size_t N>
std::string quoted(const Enum (&values)[N]) {
  std::string out;
  for (Enum value : values) {
    out += (out.empty() ? "\"" : ", \"") + std::string(to_string(value)) + "\"";
  }
  return out;
}

// The enum named by the JSON string `v`, via `parse`; fails at `path` listing the names.
template <class Enum, std::size_t N, class Parse>
Enum read_name(const Json& v, const std::string& path, const Enum (&values)[N], Parse parse) {
  const std::optional<Enum> value = v.is_string() ? parse(v.get<std::string>()) : std::nullopt;
  if (!value) fail(path, "expected one of " + quoted(values) + ", got " + brief(v));
  return *value;
}

// At most a day (Note [input limits]): a larger time is a typo, and it would overflow the
// simulator's integer nanoseconds once summed over a step.
double read_seconds(ObjectReader& in) {
  const double ms = read_non_negative_number(in.required("time_ms"), in.path_of("time_ms"));
  if (ms > kMaxTaskSeconds * kMsPerSecond) {
    fail(in.path_of("time_ms"),
         "expected at most " +
             std::to_string(static_cast<std::int64_t>(kMaxTaskSeconds * kMsPerSecond)) +
             " ms (a day, the limit of one task's time), got " + brief(in.required("time_ms")));
  }
  return ms / kMsPerSecond;
}

// The milliseconds to write for `seconds`, chosen so that reading them back (ms / 1000) gives
// `seconds` exactly. seconds·1000 nearly always does; when it does not, the file's own value is
// a neighbour of it (the division rounds by at most one ulp), so a profile read from JSON always
// writes back to itself. Some seconds have no such double at all; they keep seconds·1000.
double ms_of(double seconds) {
  const double ms = seconds * kMsPerSecond;
  if (ms / kMsPerSecond == seconds) return ms;
  constexpr int kNeighbours = 4;
  double up = ms;
  double down = ms;
  for (int i = 0; i < kNeighbours; ++i) {
    up = std::nextafter(up, std::numeric_limits<double>::infinity());
    down = std::nextafter(down, -std::numeric_limits<double>::infinity());
    if (up / kMsPerSecond == seconds) return up;
    if (down / kMsPerSecond == seconds) return down;
  }
  return ms;
}

const Json& read_list(ObjectReader& in, std::string_view key, const Json& empty) {
  const Json* v = in.find(key);
  if (v == nullptr) return empty;
  if (!v->is_array()) fail(in.path_of(key), "expected an array, got " + brief(*v));
  return *v;
}

// Remembers where each key was first listed, so that a duplicate names both places.
template <class Key>
class FirstSeen {
 public:
  void check(const Key& key, const std::string& path, const std::string& what) {
    const auto [it, fresh] = first_.emplace(key, path);
    if (!fresh) fail(path, "duplicate entry (" + what + "), first listed at " + it->second);
  }

 private:
  std::map<Key, std::string> first_;
};

void read_compute(const Json& list, CostProfile& profile, Diagnostics* diagnostics) {
  FirstSeen<std::pair<std::string, Precision>> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "compute[" + std::to_string(i) + "]";
    ObjectReader in(list[i], path, diagnostics);
    std::string key = read_string(in.required("key"), in.path_of("key"));
    if (key.empty()) fail(in.path_of("key"), "expected a non-empty string, got \"\"");
    const Precision dtype = read_name(in.required("dtype"), in.path_of("dtype"), kPrecisions,
                                      [](std::string_view name) { return parse_precision(name); });
    const double seconds = read_seconds(in);
    in.finish();
    seen.check({key, dtype}, path,
               "key \"" + key + "\", dtype \"" + std::string(to_string(dtype)) + "\"");
    profile.set_compute(std::move(key), dtype, seconds);
  }
}

void read_collectives(const Json& list, CostProfile& profile, Diagnostics* diagnostics) {
  FirstSeen<std::tuple<CommOp, std::int64_t, std::int64_t, std::int64_t>> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "collectives[" + std::to_string(i) + "]";
    ObjectReader in(list[i], path, diagnostics);
    const CommOp op = read_name(in.required("op"), in.path_of("op"), kCommOps,
                                [](std::string_view name) { return parse_comm_op(name); });
    GroupPlacement group;
    group.ranks = read_positive_integer(in.required("ranks"), in.path_of("ranks"));
    group.nodes = read_positive_integer(in.required("nodes"), in.path_of("nodes"));
    if (group.nodes > group.ranks) {
      fail(in.path_of("nodes"), "expected at most ranks (" + std::to_string(group.ranks) +
                                    "), got " + std::to_string(group.nodes));
    }
    const std::int64_t bytes =
        detail::read_non_negative_integer(in.required("bytes"), in.path_of("bytes"));
    const double seconds = read_seconds(in);
    in.finish();
    seen.check({op, group.ranks, group.nodes, bytes}, path,
               "op \"" + std::string(to_string(op)) + "\", ranks " + std::to_string(group.ranks) +
                   ", nodes " + std::to_string(group.nodes) + ", bytes " + std::to_string(bytes));
    profile.set_collective(op, group, bytes, seconds);
  }
}

void read_p2p(const Json& list, CostProfile& profile, Diagnostics* diagnostics) {
  FirstSeen<std::pair<std::int64_t, bool>> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "p2p[" + std::to_string(i) + "]";
    ObjectReader in(list[i], path, diagnostics);
    const std::int64_t bytes =
        detail::read_non_negative_integer(in.required("bytes"), in.path_of("bytes"));
    const bool same_node = read_bool(in.required("same_node"), in.path_of("same_node"));
    const double seconds = read_seconds(in);
    in.finish();
    seen.check({bytes, same_node}, path,
               "bytes " + std::to_string(bytes) + ", same_node " + (same_node ? "true" : "false"));
    profile.set_p2p(bytes, same_node, seconds);
  }
}

// Note [profile JSON]: the slow-down is a number in [0, kMaxComputeSlowdown].
std::string slowdown_range() {
  return "expected a number between 0 and " +
         std::to_string(static_cast<std::int64_t>(CostProfile::kMaxComputeSlowdown));
}

bool slowdown_ok(double slowdown) {
  return slowdown >= 0 && slowdown <= CostProfile::kMaxComputeSlowdown;
}

double read_slowdown(const Json& v, const std::string& path) {
  if (!v.is_number() || !slowdown_ok(v.get<double>()))
    fail(path, slowdown_range() + ", got " + brief(v));
  return v.get<double>();
}

CostProfile read_profile(const Json& root, Diagnostics* diagnostics) {
  ObjectReader in(root, "", diagnostics);
  CostProfile profile;
  if (const Json* v = in.find("hardware")) profile.hardware = read_string(*v, "hardware");
  if (const Json* v = in.find("compute_slowdown_during_comm")) {
    profile.compute_slowdown_during_comm = read_slowdown(*v, "compute_slowdown_during_comm");
  }
  if (const Json* v = in.find("comm_slowdown_during_compute")) {
    profile.comm_slowdown_during_compute = read_slowdown(*v, "comm_slowdown_during_compute");
  }
  const Json empty = Json::array();
  const Json& compute = read_list(in, "compute", empty);
  const Json& collectives = read_list(in, "collectives", empty);
  const Json& p2p = read_list(in, "p2p", empty);
  in.finish();  // before the entries, so that unknown keys are reported top-down
  read_compute(compute, profile, diagnostics);
  read_collectives(collectives, profile, diagnostics);
  read_p2p(p2p, profile, diagnostics);
  return profile;
}

}  // namespace

void CostProfile::set_compute(std::string key, Precision dtype, double seconds) {
  compute_[{std::move(key), dtype}] = seconds;
}

void CostProfile::set_collective(CommOp op, GroupPlacement group, std::int64_t bytes,
                                 double seconds) {
  collectives_[{op, group.ranks, group.nodes, bytes}] = seconds;
}

void CostProfile::set_p2p(std::int64_t bytes, bool same_node, double seconds) {
  p2p_[{bytes, same_node}] = seconds;
}

std::optional<double> CostProfile::compute(std::string_view key, Precision dtype) const {
  const auto it = compute_.find(std::pair<std::string, Precision>(std::string(key), dtype));
  return it == compute_.end() ? std::nullopt : std::optional<double>(it->second);
}

std::optional<double> CostProfile::collective(CommOp op, GroupPlacement group,
                                              std::int64_t bytes) const {
  const auto it = collectives_.find({op, group.ranks, group.nodes, bytes});
  return it == collectives_.end() ? std::nullopt : std::optional<double>(it->second);
}

std::optional<double> CostProfile::p2p(std::int64_t bytes, bool same_node) const {
  const auto it = p2p_.find({bytes, same_node});
  return it == p2p_.end() ? std::nullopt : std::optional<double>(it->second);
}

std::size_t CostProfile::size() const {
  return compute_.size() + collectives_.size() + p2p_.size();
}

std::string to_json(const CostProfile& profile) {
  std::vector<std::string> problems;
  const auto time_ms = [&](const std::string& path, double seconds) {
    const double ms = ms_of(seconds);
    detail::check_non_negative(problems, path + ".time_ms", ms);
    return ms;
  };
  Json compute = Json::array();
  for (const auto& [key, seconds] : profile.compute_) {
    const std::string path = "compute[" + std::to_string(compute.size()) + "]";
    compute.push_back({{"key", key.first},
                       {"dtype", to_string(key.second)},
                       {"time_ms", time_ms(path, seconds)}});
  }
  Json collectives = Json::array();
  for (const auto& [key, seconds] : profile.collectives_) {
    const auto& [op, ranks, nodes, bytes] = key;
    const std::string path = "collectives[" + std::to_string(collectives.size()) + "]";
    collectives.push_back({{"op", to_string(op)},
                           {"ranks", ranks},
                           {"nodes", nodes},
                           {"bytes", bytes},
                           {"time_ms", time_ms(path, seconds)}});
  }
  Json p2p = Json::array();
  for (const auto& [key, seconds] : profile.p2p_) {
    const std::string path = "p2p[" + std::to_string(p2p.size()) + "]";
    p2p.push_back(
        {{"bytes", key.first}, {"same_node", key.second}, {"time_ms", time_ms(path, seconds)}});
  }
  Json root = {{"hardware", profile.hardware}};
  for (const auto& [name, slowdown] :
       {std::pair{"compute_slowdown_during_comm", profile.compute_slowdown_during_comm},
        std::pair{"comm_slowdown_during_compute", profile.comm_slowdown_during_compute}}) {
    if (!slowdown) continue;
    if (!slowdown_ok(*slowdown)) {
      problems.push_back(std::string(name) + ": " + slowdown_range() + ", got " +
                         detail::number_text(*slowdown));
    }
    root[name] = *slowdown;
  }
  detail::throw_if_problems("invalid profile", problems);
  root["compute"] = std::move(compute);
  root["collectives"] = std::move(collectives);
  root["p2p"] = std::move(p2p);
  try {
    return dump_one_entry_per_line(root);
  } catch (const Json::type_error& e) {
    // Only a hardware name or compute key that is not valid UTF-8 gets here.
    throw InvalidConfig("profile: cannot write JSON: " + short_json_reason(e.what()));
  }
}

CostProfile cost_profile_from_json(std::string_view text, const std::string& source,
                                   Diagnostics* diagnostics) {
  return detail::read_document(text, source,
                               [&](const Json& root) { return read_profile(root, diagnostics); });
}

}  // namespace metron::models
