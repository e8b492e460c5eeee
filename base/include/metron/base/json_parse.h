#pragma once
// Parsing a whole JSON document with metron's error: malformed text becomes a ParseError at
// `source:line:col` (or `source` alone when the library gives no position, as for a number too
// large for a double). One template for every module that reads JSON; metron::base itself does
// not link nlohmann_json, its callers do.

#include <string>
#include <string_view>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"

namespace metron {

/// `text` parsed as a `Json` (nlohmann::json or ordered_json). Throws ParseError
/// "source:line:col: malformed JSON: <reason>".
template <class Json>
Json parse_json_document(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const typename Json::parse_error& e) {
    const auto [line, column] = line_and_column(text, e.byte);
    throw ParseError(source, line, column, "malformed JSON: " + short_json_reason(e.what()));
  } catch (const typename Json::exception& e) {
    // A number too large for a double ("1e400") is an out_of_range error without a position.
    throw ParseError(source, 0, 0, "malformed JSON: " + short_json_reason(e.what()));
  }
}

}  // namespace metron
