// The Checker's driver, how it names events in violations, and its rules on each event alone
// (fields, phase, ids, times); the rules that need several events are in their own files.

#include "event_checker.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace_text.h"
#include "trace_values.h"

namespace metron::traces::detail {

std::vector<std::string> Checker::run(const RawFacts& raw) {
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

/// `traceEvents[12] (X "F3 mb=3", pid 1 tid 7)`.
std::string Checker::describe(std::size_t i) const {
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
std::string Checker::short_name(std::size_t i) const {
  return "traceEvents[" + std::to_string(i) + "] (" + info_[i].ph +
         (info_[i].has_name ? " \"" + info_[i].name + "\"" : std::string()) + ")";
}

void Checker::add(std::size_t i, const std::string& rule) {
  violations_.push_back(describe(i) + ": " + rule);
}

bool Checker::on_thread_row(const std::string& ph, const Json& e) {
  if (ph == "X" || ph == "B" || ph == "E" || ph == "s" || ph == "t" || ph == "f") return true;
  if (ph == "i" || ph == "I" || ph == "R") {
    const std::string scope = string_member(e, "s");
    return scope.empty() || scope == "t";
  }
  return ph == "M" && string_member(e, "name").starts_with("thread_");
}

void Checker::check_event(std::size_t i) {
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

void Checker::check_strings(std::size_t i, const Json& e, Event& info) {
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

void Checker::check_ids(std::size_t i, const Json& e, Event& info) {
  const bool global_instant =
      (info.ph == "i" || info.ph == "I" || info.ph == "R") && string_member(e, "s") == "g";
  info.pid = check_id(i, e, "pid", !global_instant);
  info.tid = check_id(i, e, "tid", on_thread_row(info.ph, e));
  if (info.tid && *info.tid == 0 && on_thread_row(info.ph, e)) {
    add(i, "tid 0: Perfetto replaces it by the pid and merges the row with the pid's own");
    info.tid.reset();
  }
}

std::optional<std::int64_t> Checker::check_id(std::size_t i, const Json& e, const char* key,
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

void Checker::check_time(std::size_t i, const Json& e, const char* key,
                         std::optional<std::int64_t>& out) {
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

void Checker::check_flow_fields(std::size_t i, const Json& e, const Event& info) {
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

void Checker::check_counter(std::size_t i, const Json& e) {
  const Json* args = member(e, "args");
  const bool numeric =
      args != nullptr && args->is_object() &&
      std::any_of(args->begin(), args->end(), [](const Json& v) { return v.is_number(); });
  if (!numeric) add(i, "C event has no numeric arg; Perfetto drops it");
}

void Checker::check_metadata_event(std::size_t i, const Json& e, const Event& info) {
  static const std::set<std::string> kNames = {"process_name", "process_sort_index", "thread_name",
                                               "thread_sort_index", "process_labels"};
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

}  // namespace metron::traces::detail
