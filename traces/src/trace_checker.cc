#include "metron/traces/trace_checker.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "trace_text.h"

// The rules are TRACES.md §4.4; each check cites the importer behaviour (§1.6, §2.8) that makes
// the rule necessary. Every check collects: one broken event never hides another.

namespace metron::traces {
namespace {

using Json = nlohmann::ordered_json;

// Perfetto coerces pid and tid to uint32 (CoerceToUint32, TRACES.md §1.5).
constexpr std::int64_t kIdLimit = std::int64_t{1} << 32;

std::string microseconds(std::int64_t ns) {
  const std::string sign = ns < 0 ? "-" : "";
  const std::int64_t magnitude = ns < 0 ? -ns : ns;
  std::string fraction = std::to_string(magnitude % 1000);
  fraction.insert(0, 3 - fraction.size(), '0');
  return sign + std::to_string(magnitude / 1000) + "." + fraction;
}

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string string_member(const Json& object, const char* key) {
  const Json* value = member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

std::optional<std::int64_t> integer(const Json* value) {
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned()) {
    const auto u = value->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  return value->get<std::int64_t>();
}

/// A JSON number of microseconds in nanoseconds, as Perfetto's CoerceToTs reads it (§1.5),
/// clamped to ±kMaxMicroseconds so that absurd values cannot overflow.
std::optional<std::int64_t> nanoseconds(const Json* value) {
  // About 285 years: far beyond any trace, far below the int64 limit in nanoseconds.
  constexpr std::int64_t kMaxMicroseconds = 9'000'000'000'000'000;
  constexpr auto kMaxDouble = static_cast<double>(kMaxMicroseconds);
  if (value == nullptr || !value->is_number()) return std::nullopt;
  if (auto i = integer(value)) return std::clamp(*i, -kMaxMicroseconds, kMaxMicroseconds) * 1000;
  const double us = std::clamp(value->get<double>(), -kMaxDouble, kMaxDouble);
  return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

bool is_true(const Json* value) {
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

bool has_control_character(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

/// What one event is, as far as the cross-event rules need it; unset fields were invalid (and
/// already reported) or absent.
struct Event {
  std::string ph;
  std::string name;
  bool has_name = false;
  std::string cat;
  bool has_cat = false;
  std::optional<std::int64_t> pid;
  std::optional<std::int64_t> tid;
  std::optional<std::int64_t> ts;
  std::optional<std::int64_t> dur;
};

/// A slice on a row: an X event or a matched B/E pair, in nanoseconds.
struct Interval {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::size_t index = 0;              ///< the X or B event
  std::optional<std::size_t> parent;  ///< enclosing interval (position in the sorted row)
};

using Row = std::pair<std::int64_t, std::int64_t>;

/// Facts only the raw text shows, from a pass over text already known to be valid JSON.
struct RawFacts {
  std::set<std::size_t> escaped_events;  ///< events holding a \u escape
  std::set<std::string> escaped_keys;    ///< top-level keys (outside traceEvents) holding one
  std::optional<bool> rank_spaced;       ///< distributedInfo's "rank": followed by a space
};

bool is_line_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

/// Whether `text[i]` (just after the quote closing a "rank" key) continues as HTA's regex
/// `"rank":\s+(\d+)` wants within one line (HTA scans line by line, §2.8).
bool rank_followed_by_space(std::string_view text, std::size_t i) {
  if (i >= text.size() || text[i] != ':') return false;
  std::size_t k = i + 1;
  while (k < text.size() && is_line_space(text[k])) ++k;
  return k > i + 1 && k < text.size() && text[k] >= '0' && text[k] <= '9';
}

RawFacts scan_raw_text(std::string_view text) {
  struct Level {
    bool object = false;
    bool expect_key = false;
  };
  RawFacts facts;
  std::vector<Level> stack;
  std::string top_key;
  std::size_t event = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '"') {
      if (c == '{' || c == '[') {
        stack.push_back({c == '{', c == '{'});
      } else if (c == '}' || c == ']') {
        stack.pop_back();
      } else if (c == ',' && !stack.empty()) {
        if (stack.back().object) stack.back().expect_key = true;
        if (stack.size() == 2 && !stack.back().object && top_key == "traceEvents") ++event;
      }
      ++i;
      continue;
    }
    const std::size_t start = ++i;
    bool escaped_u = false;
    while (text[i] != '"') {
      if (text[i] == '\\') {
        escaped_u = escaped_u || text[i + 1] == 'u';
        i += 2;
      } else {
        ++i;
      }
    }
    const std::string_view content = text.substr(start, i - start);
    ++i;
    if (!stack.empty() && stack.back().object && stack.back().expect_key) {
      stack.back().expect_key = false;
      if (stack.size() == 1) top_key = std::string(content);
      if (stack.size() == 2 && top_key == "distributedInfo" && content == "rank") {
        facts.rank_spaced = rank_followed_by_space(text, i);
      }
    }
    if (escaped_u) {
      if (stack.size() >= 2 && top_key == "traceEvents") {
        facts.escaped_events.insert(event);
      } else if (stack.size() >= 1) {
        facts.escaped_keys.insert(top_key);
      }
    }
  }
  return facts;
}

class Checker {
 public:
  Checker(const Json& events, const TraceCheckOptions& options)
      : events_(events), options_(options) {}

  std::vector<std::string> run(const RawFacts& raw) {
    info_.resize(events_.size());
    for (std::size_t i = 0; i < events_.size(); ++i) check_event(i);
    for (std::size_t i : raw.escaped_events) {
      if (i < events_.size()) {
        add(i, "contains a \\u escape; Perfetto shows it literally, write raw UTF-8");
      }
    }
    check_begin_end();
    check_nesting();
    check_flows_v2();
    check_flows_v1();
    check_metadata_values();
    if (options_.hta) check_hta_events();
    return std::move(violations_);
  }

 private:
  /// `traceEvents[12] (X "F3 mb=3", pid 1 tid 7)`.
  std::string describe(std::size_t i) const {
    const Json& e = events_[i];
    std::string out = "traceEvents[" + std::to_string(i) + "] (";
    if (!e.is_object()) return out + "not an object)";
    const Json* ph = member(e, "ph");
    out += ph == nullptr ? "no ph" : ph->is_string() ? ph->get<std::string>() : ph->dump();
    if (const Json* name = member(e, "name")) {
      out += " " + (name->is_string() ? "\"" + name->get<std::string>() + "\"" : name->dump());
    }
    if (const Json* pid = member(e, "pid")) out += ", pid " + pid->dump();
    if (const Json* tid = member(e, "tid"))
      out += (member(e, "pid") ? " tid " : ", tid ") + tid->dump();
    return out + ")";
  }

  /// `traceEvents[9] (X "F2 mb=2")`, for the other event of a pair.
  std::string short_name(std::size_t i) const {
    return "traceEvents[" + std::to_string(i) + "] (" + info_[i].ph +
           (info_[i].has_name ? " \"" + info_[i].name + "\"" : std::string()) + ")";
  }

  void add(std::size_t i, const std::string& rule) {
    violations_.push_back(describe(i) + ": " + rule);
  }

  static bool on_thread_row(const std::string& ph, const Json& e) {
    if (ph == "X" || ph == "B" || ph == "E" || ph == "s" || ph == "t" || ph == "f") return true;
    if (ph == "i" || ph == "I" || ph == "R") {
      const std::string scope = string_member(e, "s");
      return scope.empty() || scope == "t";
    }
    return ph == "M" && string_member(e, "name").starts_with("thread_");
  }

  void check_event(std::size_t i) {
    const Json& e = events_[i];
    Event& info = info_[i];
    if (!e.is_object()) {
      add(i, "is not an object");
      return;
    }
    const Json* ph = member(e, "ph");
    if (ph == nullptr || !ph->is_string()) {
      add(i, "has no string ph; Perfetto counts it as a tokenizer error");
      return;
    }
    info.ph = ph->get<std::string>();
    check_strings(i, e, info);
    check_ids(i, e, info);
    static const std::set<std::string> kLegacy = {"S", "T", "p", "F"};
    static const std::set<std::string> kSupported = {"X", "B", "E", "i", "I", "R", "C",
                                                     "b", "n", "e", "s", "t", "f", "M"};
    if (kLegacy.contains(info.ph)) {
      add(i, "legacy async phase '" + info.ph +
                 "' is not imported by Perfetto; use X, or b/e for spans that do not nest");
      return;
    }
    if (!kSupported.contains(info.ph)) {
      add(i, "phase '" + info.ph + "' is not one Perfetto imports");
      return;
    }
    if (info.ph != "M") check_time(i, e, "ts", info.ts);
    check_flow_fields(i, e, info);
    if (info.ph == "X") {
      if (member(e, "dur") == nullptr) {
        add(i, "X event has no dur; Perfetto drops it");
      } else {
        check_time(i, e, "dur", info.dur);
      }
    } else if (info.ph == "C") {
      check_counter(i, e);
    } else if (info.ph == "i" || info.ph == "I" || info.ph == "R") {
      const Json* scope = member(e, "s");
      if (scope != nullptr &&
          !(scope->is_string() && (*scope == "t" || *scope == "p" || *scope == "g"))) {
        add(i, "instant scope s is " + scope->dump() + "; expected \"t\", \"p\" or \"g\"");
      }
    } else if (info.ph == "s" || info.ph == "t" || info.ph == "f") {
      const Json* id = member(e, "id");
      if (id == nullptr || !(id->is_number_integer() || id->is_string())) {
        add(i, "flow event has no integer or string id");
      }
      if (info.ph == "f" && string_member(e, "bp") != "e") {
        add(i, "flow end f has no \"bp\": \"e\"; Perfetto binds it to the next slice instead");
      }
    } else if (info.ph == "b" || info.ph == "n" || info.ph == "e") {
      if (member(e, "id") == nullptr && member(e, "id2") == nullptr) {
        add(i, "async event has no id or id2; Perfetto drops it");
      }
    } else if (info.ph == "M") {
      check_metadata_event(i, e, info);
    }
  }

  void check_strings(std::size_t i, const Json& e, Event& info) {
    if (const Json* name = member(e, "name")) {
      if (name->is_string()) {
        info.name = name->get<std::string>();
        info.has_name = true;
        if (has_control_character(info.name)) add(i, "name contains a control character");
      } else {
        add(i, "name is not a string");
      }
    }
    if (const Json* cat = member(e, "cat")) {
      if (cat->is_string()) {
        info.cat = cat->get<std::string>();
        info.has_cat = true;
        if (has_control_character(info.cat)) add(i, "cat contains a control character");
      } else {
        add(i, "cat is not a string");
      }
    }
  }

  void check_ids(std::size_t i, const Json& e, Event& info) {
    const bool global_instant =
        (info.ph == "i" || info.ph == "I" || info.ph == "R") && string_member(e, "s") == "g";
    info.pid = check_id(i, e, "pid", !global_instant);
    info.tid = check_id(i, e, "tid", on_thread_row(info.ph, e));
    if (info.tid && *info.tid == 0 && on_thread_row(info.ph, e)) {
      add(i, "tid 0: Perfetto replaces it by the pid and merges the row with the pid's own");
      info.tid.reset();
    }
  }

  std::optional<std::int64_t> check_id(std::size_t i, const Json& e, const char* key,
                                       bool required) {
    const Json* value = member(e, key);
    if (value == nullptr) {
      if (required) add(i, std::string("has no ") + key);
      return std::nullopt;
    }
    const std::optional<std::int64_t> id = integer(value);
    if (!id) {
      add(i, std::string(key) + " " + value->dump() + " is not an integer");
    } else if (*id < 0 || *id >= kIdLimit) {
      add(i, std::string(key) + " " + value->dump() + " is outside [0, 2^32)");
      return std::nullopt;
    }
    return id;
  }

  void check_time(std::size_t i, const Json& e, const char* key, std::optional<std::int64_t>& out) {
    const Json* value = member(e, key);
    if (value == nullptr) {
      add(i, std::string("has no ") + key);
      return;
    }
    const std::optional<std::int64_t> ns = nanoseconds(value);
    if (!ns) {
      add(i, std::string(key) + " " + value->dump() + " is not a number");
    } else if (*ns < 0) {
      add(i, std::string(key) + " " + microseconds(*ns) + " µs is negative");
    } else {
      out = ns;
    }
  }

  void check_flow_fields(std::size_t i, const Json& e, const Event& info) {
    const Json* bind = member(e, "bind_id");
    const Json* in = member(e, "flow_in");
    const Json* out = member(e, "flow_out");
    if (bind == nullptr && in == nullptr && out == nullptr) return;
    if (info.ph != "X" && info.ph != "B") {
      add(i, "bind_id/flow_in/flow_out on a '" + info.ph +
                 "' event; v2 flows attach to X and B events only");
      return;
    }
    for (const auto& [flag, key] : {std::pair{in, "flow_in"}, std::pair{out, "flow_out"}}) {
      if (flag != nullptr && !flag->is_boolean()) add(i, std::string(key) + " is not a boolean");
    }
    const bool flagged = is_true(in) || is_true(out);
    if (bind == nullptr) {
      if (flagged) add(i, "flow_in/flow_out without bind_id");
    } else if (!integer(bind)) {
      add(i, "bind_id " + bind->dump() + " is not an integer");
    } else if (!flagged) {
      add(i, "bind_id without flow_in or flow_out: true; it draws no arrow");
    }
  }

  void check_counter(std::size_t i, const Json& e) {
    const Json* args = member(e, "args");
    const bool numeric =
        args != nullptr && args->is_object() &&
        std::any_of(args->begin(), args->end(), [](const Json& v) { return v.is_number(); });
    if (!numeric) add(i, "C event has no numeric arg; Perfetto drops it");
  }

  void check_metadata_event(std::size_t i, const Json& e, const Event& info) {
    static const std::set<std::string> kNames = {
        "process_name", "process_sort_index", "thread_name", "thread_sort_index", "process_labels"};
    if (!kNames.contains(info.name)) {
      add(i, "M name \"" + info.name +
                 "\" is not imported by Perfetto; only process_name, process_sort_index, "
                 "thread_name and thread_sort_index are");
      return;
    }
    const Json* args = member(e, "args");
    if (info.name.ends_with("_name")) {
      const Json* name = args == nullptr ? nullptr : member(*args, "name");
      if (name == nullptr || !name->is_string()) add(i, "has no string args.name");
    } else if (info.name.ends_with("_sort_index")) {
      if (!integer(args == nullptr ? nullptr : member(*args, "sort_index"))) {
        add(i, "has no integer args.sort_index");
      }
    }
  }

  /// E closes the innermost open B of its row; a different name or cat would leave the B open
  /// in Perfetto ("Did not end", §1.6). The matched pair joins the row's slices.
  void check_begin_end() {
    std::map<Row, std::vector<std::size_t>> open;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const Event& e = info_[i];
      if ((e.ph != "B" && e.ph != "E") || !e.pid || !e.tid || !e.ts) continue;
      std::vector<std::size_t>& stack = open[{*e.pid, *e.tid}];
      if (e.ph == "B") {
        stack.push_back(i);
        continue;
      }
      if (stack.empty()) {
        add(i, "E without an open B on its row");
        continue;
      }
      const std::size_t b = stack.back();
      stack.pop_back();
      const Event& begin = info_[b];
      if ((e.has_name && begin.has_name && e.name != begin.name) ||
          (e.has_cat && begin.has_cat && e.cat != begin.cat)) {
        add(i, "E does not match the open " + short_name(b) +
                   " (name or cat differ); Perfetto leaves that B unterminated");
      } else if (*e.ts < *begin.ts) {
        add(i, "E at " + microseconds(*e.ts) + " µs ends before its " + short_name(b) +
                   " begins at " + microseconds(*begin.ts) + " µs");
      } else {
        rows_[{*begin.pid, *begin.tid}].push_back({*begin.ts, *e.ts, b, std::nullopt});
      }
    }
    for (const auto& [row, stack] : open) {
      for (std::size_t b : stack) add(b, "B is never ended by an E on its row");
    }
  }

  /// Proper nesting on each row: sorted by start, longest first (Perfetto's order for equal ts),
  /// a slice must end within every slice still open at its start (§1.6, X events).
  void check_nesting() {
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const Event& e = info_[i];
      if (e.ph == "X" && e.pid && e.tid && e.ts && e.dur) {
        rows_[{*e.pid, *e.tid}].push_back({*e.ts, *e.ts + *e.dur, i, std::nullopt});
      }
    }
    for (auto& [row, slices] : rows_) {
      std::sort(slices.begin(), slices.end(), [](const Interval& a, const Interval& b) {
        if (a.start != b.start) return a.start < b.start;
        if (a.end != b.end) return a.end > b.end;
        return a.index < b.index;
      });
      std::vector<std::size_t> stack;
      for (std::size_t k = 0; k < slices.size(); ++k) {
        Interval& s = slices[k];
        while (!stack.empty() && slices[stack.back()].end <= s.start) stack.pop_back();
        if (!stack.empty() && slices[stack.back()].end < s.end) {
          const Interval& other = slices[stack.back()];
          add(s.index, "overlaps " + short_name(other.index) +
                           " on the same row without nesting ([" + microseconds(s.start) + ", " +
                           microseconds(s.end) + "] µs against [" + microseconds(other.start) +
                           ", " + microseconds(other.end) + "] µs)");
          continue;  // Perfetto spills it to another track; the rest nest without it.
        }
        if (!stack.empty()) s.parent = stack.back();
        stack.push_back(k);
      }
    }
  }

  /// Each bind_id starts one arrow and ends it once (Perfetto rejects reuse as
  /// flow_duplicate_id), and an arrow does not point back in time.
  void check_flows_v2() {
    struct Ends {
      std::vector<std::size_t> out;
      std::vector<std::size_t> in;
    };
    std::map<std::int64_t, Ends> flows;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      if (info_[i].ph != "X" && info_[i].ph != "B") continue;
      const std::optional<std::int64_t> id = integer(member(events_[i], "bind_id"));
      if (!id) continue;
      if (is_true(member(events_[i], "flow_out"))) flows[*id].out.push_back(i);
      if (is_true(member(events_[i], "flow_in"))) flows[*id].in.push_back(i);
    }
    for (const auto& [id, ends] : flows) {
      const std::string flow = "flow bind_id " + std::to_string(id);
      if (ends.in.empty()) {
        for (std::size_t i : ends.out) add(i, flow + " has flow_out but no flow_in");
      }
      if (ends.out.empty()) {
        for (std::size_t i : ends.in) add(i, flow + " has flow_in but no flow_out");
      }
      for (std::size_t k = 1; k < ends.out.size(); ++k) {
        add(ends.out[k], flow + " already starts at " + short_name(ends.out[0]) +
                             "; Perfetto ignores a second start (flow_duplicate_id)");
      }
      for (std::size_t k = 1; k < ends.in.size(); ++k) {
        add(ends.in[k],
            flow + " already ends at " + short_name(ends.in[0]) + "; use one unique id per arrow");
      }
      if (ends.out.size() == 1 && ends.in.size() == 1) {
        const Event& source = info_[ends.out[0]];
        const Event& target = info_[ends.in[0]];
        if (source.ts && target.ts && *source.ts > *target.ts) {
          add(ends.out[0], flow + ": the source starts at " + microseconds(*source.ts) +
                               " µs, after its destination " + short_name(ends.in[0]) + " at " +
                               microseconds(*target.ts) + " µs");
        }
      }
    }
  }

  /// The innermost slice on `row` that contains `ts`, or none.
  std::optional<std::size_t> enclosing_slice(const Row& row, std::int64_t ts) const {
    const auto found = rows_.find(row);
    if (found == rows_.end()) return std::nullopt;
    const std::vector<Interval>& slices = found->second;
    auto after = std::upper_bound(slices.begin(), slices.end(), ts,
                                  [](std::int64_t t, const Interval& s) { return t < s.start; });
    if (after == slices.begin()) return std::nullopt;
    // Walk up the nesting first (the usual case), then fall back to a scan for slices that
    // were spilled or closed exactly at ts.
    std::optional<std::size_t> k = static_cast<std::size_t>(after - slices.begin()) - 1;
    while (k && slices[*k].end < ts) k = slices[*k].parent;
    if (k) return slices[*k].index;
    for (auto it = after; it != slices.begin();) {
      --it;
      if (it->end >= ts) return it->index;
    }
    return std::nullopt;
  }

  /// v1 flows (s/t/f), keyed by id: one s and one f sharing cat and name, each inside a slice
  /// of its row written before it (Perfetto's FlowTracker, §1.6).
  void check_flows_v1() {
    std::map<std::string, std::vector<std::size_t>> flows;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const std::string& ph = info_[i].ph;
      if (ph != "s" && ph != "t" && ph != "f") continue;
      const Json* id = member(events_[i], "id");
      if (id == nullptr || !(id->is_number_integer() || id->is_string())) continue;
      flows[id->dump()].push_back(i);
      check_flow_binding(i);
    }
    for (const auto& [id, members] : flows) {
      const std::size_t first = members.front();
      std::vector<std::size_t> starts;
      std::vector<std::size_t> ends;
      for (std::size_t i : members) {
        if (info_[i].ph == "s") starts.push_back(i);
        if (info_[i].ph == "f") ends.push_back(i);
        if (i != first &&
            (info_[i].cat != info_[first].cat || info_[i].name != info_[first].name)) {
          add(i, "flow id " + id + " has a different cat or name than " + short_name(first) +
                     "; Perfetto keys flows by (id, cat, name)");
        }
      }
      if (ends.empty()) {
        for (std::size_t i : starts) add(i, "flow id " + id + " starts but never ends (no f)");
      }
      if (starts.empty()) {
        for (std::size_t i : ends) add(i, "flow id " + id + " ends but never starts (no s)");
      }
      for (std::size_t k = 1; k < starts.size(); ++k) {
        add(starts[k], "flow id " + id + " already starts at " + short_name(starts[0]) +
                           "; flow ids must be unique in the file");
      }
      for (std::size_t k = 1; k < ends.size(); ++k) {
        add(ends[k], "flow id " + id + " already ends at " + short_name(ends[0]) +
                         "; flow ids must be unique in the file");
      }
    }
  }

  void check_flow_binding(std::size_t i) {
    const Event& e = info_[i];
    if (!e.pid || !e.tid || !e.ts) return;
    const std::optional<std::size_t> slice = enclosing_slice({*e.pid, *e.tid}, *e.ts);
    if (!slice) {
      add(i, "flow event at " + microseconds(*e.ts) + " µs is not inside a slice of its row");
    } else if (*slice > i) {
      add(i, "flow event comes before its slice " + short_name(*slice) +
                 " in the file; Perfetto may lose it");
    }
  }

  /// A process or thread gets one name and one sort index.
  void check_metadata_values() {
    std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::size_t> first;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const Event& e = info_[i];
      if (e.ph != "M" || e.name == "process_labels" || !e.pid) continue;
      const bool thread = e.name.starts_with("thread_");
      if (thread && !e.tid) continue;
      const Json* args = member(events_[i], "args");
      if (args == nullptr) continue;
      const auto key = std::make_tuple(e.name, *e.pid, thread ? *e.tid : 0);
      const auto [it, inserted] = first.emplace(key, i);
      if (inserted) continue;
      const Json* before = member(events_[it->second], "args");
      if (*before != *args) {
        add(i, "sets " + e.name + " to " + args->dump() + ", already " + before->dump() + " at " +
                   short_name(it->second));
      }
    }
  }

  static bool is_gpu_work_category(const std::string& cat) {
    // HTA's kernel categories (kernel)|(gpu_mem.+) (§2.8).
    return cat.find("kernel") != std::string::npos ||
           (cat.starts_with("gpu_mem") && cat.size() > 7);
  }

  static bool is_cpu_category(const std::string& cat) {
    return cat.starts_with("cpu_op") || cat == "user_annotation" ||
           (cat.size() > 8 && cat.ends_with("_runtime"));
  }

  void check_hta_events() {
    bool has_steps = false;
    std::set<std::int64_t> launches;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const Event& e = info_[i];
      if (e.ph == "B" || e.ph == "E") add(i, "HTA drops B/E events (no dur); write X events");
      if (e.ph != "X") continue;
      if (e.name.starts_with("ProfilerStep#")) has_steps = true;
      if (!e.has_cat) add(i, "has no cat; HTA drops it");
      const Json* args = member(events_[i], "args");
      const Json* stream = args == nullptr ? nullptr : member(*args, "stream");
      if (is_cpu_category(e.cat)) {
        if (stream != nullptr) add(i, "CPU event carries args.stream; HTA takes it for GPU work");
        if (e.cat.ends_with("_runtime")) {
          if (auto c = integer(args == nullptr ? nullptr : member(*args, "correlation"))) {
            launches.insert(*c);
          }
        }
      } else if (e.cat == "gpu_user_annotation") {
        if (stream != nullptr) {
          add(i, "gpu_user_annotation carries args.stream; HTA would count it as a kernel");
        }
      } else if (stream != nullptr || is_gpu_work_category(e.cat)) {
        check_gpu_event(i, args, stream);
      }
    }
    if (!has_steps) return;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      if (info_[i].ph != "X" || !is_gpu_work_category(info_[i].cat)) continue;
      const Json* args = member(events_[i], "args");
      const auto c = integer(args == nullptr ? nullptr : member(*args, "correlation"));
      if (c && !launches.contains(*c)) {
        add(i, "correlation " + std::to_string(*c) +
                   " has no cuda_runtime launch; with ProfilerStep# markers HTA drops the kernel");
      }
    }
  }

  void check_gpu_event(std::size_t i, const Json* args, const Json* stream) {
    const std::optional<std::int64_t> s = integer(stream);
    if (stream == nullptr) {
      add(i, "GPU event has no args.stream; HTA does not see it as GPU work");
    } else if (!s || *s < 1) {
      add(i, "GPU event's args.stream " + stream->dump() + " is not an integer >= 1");
    }
    for (const char* key : {"device", "correlation"}) {
      if (!integer(args == nullptr ? nullptr : member(*args, key))) {
        add(i, std::string("GPU event has no integer args.") + key);
      }
    }
    const Event& e = info_[i];
    const bool collective = args != nullptr && member(*args, "Collective name") != nullptr;
    if (collective && !e.name.starts_with("nccl") &&
        e.name.find("ncclKernel") == std::string::npos) {
      add(i, "collective kernel is not named nccl...; HTA counts it as computation");
    }
  }

  const Json& events_;
  const TraceCheckOptions& options_;
  std::vector<Event> info_;
  std::map<Row, std::vector<Interval>> rows_;
  std::vector<std::string> violations_;
};

/// Perfetto detects JSON by the first bytes: `{"` after whitespace (§1.6, Detection).
bool starts_like_json_object(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i >= text.size() || text[i] != '{') return false;
  ++i;
  while (i < text.size() && is_space(text[i])) ++i;
  return i < text.size() && text[i] == '"';
}

/// The rules on the top-level object; false when there is no traceEvents list to check.
bool check_top_level(const Json& root, std::string_view text, const TraceCheckOptions& options,
                     const RawFacts& raw, std::vector<std::string>& violations) {
  if (!starts_like_json_object(text)) {
    violations.push_back(
        "the file does not start with {\" (after whitespace); Perfetto does not "
        "recognise it as a JSON trace");
  }
  bool seen_events = false;
  for (const auto& [key, value] : root.items()) {
    if (key == "traceEvents") {
      seen_events = true;
    } else if (seen_events) {
      violations.push_back("top-level key \"" + key +
                           "\" comes after traceEvents; write every metadata key before it "
                           "(HTA's streaming parser stops at traceEvents)");
    }
  }
  for (const std::string& key : raw.escaped_keys) {
    violations.push_back("top-level key \"" + key +
                         "\" contains a \\u escape; Perfetto shows it literally, write raw UTF-8");
  }
  if (options.hta) {
    const Json* info = member(root, "distributedInfo");
    const std::optional<std::int64_t> rank =
        info == nullptr ? std::nullopt : integer(member(*info, "rank"));
    if (info == nullptr) {
      violations.push_back("distributedInfo is missing; HTA gives the file rank 0");
    } else if (!rank || *rank < 0) {
      violations.push_back("distributedInfo has no integer rank >= 0; HTA gives the file rank 0");
    } else if (raw.rank_spaced != true) {
      violations.push_back(
          "distributedInfo.rank is written without whitespace after \"rank\":; "
          "HTA's regex \"rank\":\\s+(\\d+) needs it, write \"rank\": " +
          std::to_string(*rank));
    } else if (const auto read = detail::rank_hta_reads(text); read && *read != *rank) {
      violations.push_back("HTA reads rank " + std::to_string(*read) +
                           " from an earlier \"rank\": " + std::to_string(*read) +
                           ", not distributedInfo.rank " + std::to_string(*rank));
    }
  }
  const Json* events = member(root, "traceEvents");
  if (events == nullptr) {
    violations.push_back("the top-level object has no traceEvents");
    return false;
  }
  if (!events->is_array()) {
    violations.push_back("traceEvents is not an array");
    return false;
  }
  return true;
}

}  // namespace

namespace detail {

std::optional<std::int64_t> rank_hta_reads(std::string_view text) {
  constexpr std::string_view kKey = "\"rank\":";
  for (std::size_t at = text.find(kKey); at != std::string_view::npos;
       at = text.find(kKey, at + 1)) {
    const std::size_t colon = at + kKey.size() - 1;
    if (!rank_followed_by_space(text, colon)) continue;
    std::size_t k = colon + 1;
    while (is_line_space(text[k])) ++k;
    std::int64_t value = 0;
    while (k < text.size() && text[k] >= '0' && text[k] <= '9' && value < kIdLimit) {
      value = value * 10 + (text[k++] - '0');
    }
    return value;
  }
  return std::nullopt;
}

}  // namespace detail

std::vector<std::string> check_chrome_trace(std::string_view text,
                                            const TraceCheckOptions& options) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    const auto [line, column] = line_and_column(text, e.byte);
    return {"malformed JSON at line " + std::to_string(line) + ", column " +
            std::to_string(column) + ": " + short_json_reason(e.what())};
  }
  if (!root.is_object()) {
    return {std::string("the top level is ") + (root.is_array() ? "an array" : "not an object") +
            "; write the object form {\"traceEvents\": [...]} with the metadata first"};
  }
  std::vector<std::string> violations;
  const RawFacts raw = scan_raw_text(text);
  if (!check_top_level(root, text, options, raw, violations)) return violations;
  std::vector<std::string> events = Checker(root["traceEvents"], options).run(raw);
  violations.insert(violations.end(), events.begin(), events.end());
  return violations;
}

}  // namespace metron::traces
