// The checker's entry point: parse the text, apply the rules on the top-level object, then hand
// traceEvents to the Checker (event_checker.h).

#include "metron/traces/trace_checker.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "event_checker.h"
#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "metron/base/json_limits.h"
#include "trace_text.h"
#include "trace_values.h"

// The rules are docs/TRACES.md §4.4; each check cites the importer behaviour (§1.6, §2.8) that
// makes the rule necessary. Every check collects: one broken event never hides another.

namespace metron::traces {
namespace {

using detail::Checker;
using detail::integer;
using detail::Json;
using detail::member;
using detail::RawFacts;
using detail::scan_raw_text;

/// "line L, column C" of the 1-based `byte` in `text`.
std::string line_and_column_text(std::string_view text, std::size_t byte) {
  const auto [line, column] = line_and_column(text, byte);
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

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

std::vector<std::string> check_chrome_trace(std::string_view text,
                                            const TraceCheckOptions& options) {
  // Before anything recursive (Note [JSON nesting limit] in base/src/json_limits.cc).
  if (const std::optional<std::size_t> at = find_json_too_deep(text)) {
    return {"JSON nested too deeply at " + line_and_column_text(text, *at) + "; expected at most " +
            std::to_string(kMaxJsonDepth) + " nested arrays and objects"};
  }
  if (const std::optional<std::size_t> nul = find_json_nul(text)) {
    return {"malformed JSON at " + line_and_column_text(text, *nul) + ": " +
            std::string(kJsonNulReason)};
  }
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return {"malformed JSON at " + line_and_column_text(text, e.byte) + ": " +
            short_json_reason(e.what())};
  } catch (const Json::exception& e) {
    // A number too large for a double ("1e400") is an out_of_range error without a position.
    const std::optional<std::size_t> at = find_json_number_overflow(text);
    return {"malformed JSON" + (at ? " at " + line_and_column_text(text, *at) : std::string()) +
            ": " + short_json_reason(e.what()) + (at ? std::string(kJsonNumberRange) : "")};
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
