#pragma once
// Parsing a whole JSON document with metron's error: malformed text becomes a ParseError at
// `source:line:col`. One template for every module that reads JSON; metron::base itself does
// not link nlohmann_json, its callers do.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "metron/base/json_limits.h"

namespace metron {

/// `text` parsed as a `Json` (nlohmann::json or ordered_json). Throws ParseError
/// "source:line:col: malformed JSON: <reason>", and "source:line:col: JSON nested too deeply..."
/// for nesting deeper than kMaxJsonDepth, which is checked before anything recursive runs
/// (Note [JSON nesting limit] in base/src/json_limits.cc), and "source:line:col: malformed JSON:
/// a NUL byte..." for a NUL, which the parser would take for the end of the text.
template <class Json>
Json parse_json_document(std::string_view text, const std::string& source) {
  check_json_depth(text, source);
  if (const std::optional<std::size_t> nul = find_json_nul(text)) {
    const auto [line, column] = line_and_column(text, *nul);
    throw ParseError(source, line, column, "malformed JSON: " + std::string(kJsonNulReason));
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const typename Json::parse_error& e) {
    const auto [line, column] = line_and_column(text, e.byte);
    throw ParseError(source, line, column, "malformed JSON: " + short_json_reason(e.what()));
  } catch (const typename Json::exception& e) {
    // A number too large for a double ("1e400") is an out_of_range error without a position.
    const std::string what = "malformed JSON: " + short_json_reason(e.what());
    const std::optional<std::size_t> at = find_json_number_overflow(text);
    if (!at) throw ParseError(source, 0, 0, what);
    const auto [line, column] = line_and_column(text, *at);
    throw ParseError(source, line, column, what + std::string(kJsonNumberRange));
  }
}

}  // namespace metron
