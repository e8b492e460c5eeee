#include "metron/base/json_limits.h"

#include <cmath>
#include <cstdlib>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"

// Note [JSON nesting limit]
// JSON nested 100,000 deep ("[[[[...") is a few hundred KiB of text. nlohmann's parser and the
// destructor of a parsed value are iterative, but copying, comparing or dumping a value recurses
// once per level, and so do parts of our readers: such a file would overflow the stack and kill
// the process with SIGSEGV. So every JSON reader checks the depth on the raw text first
// (parse_json_document in json_parse.h, the trace checker), before anything recursive runs, and
// refuses a file that nests deeper than kMaxJsonDepth as a ParseError at the offending bracket.

namespace metron {
namespace {

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/// Calls `visit(i)` for each byte outside strings; stops when it returns true and gives i.
template <class Visit>
std::optional<std::size_t> scan_outside_strings(std::string_view text, Visit visit) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, even a quote
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (visit(i)) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::size_t> find_json_too_deep(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  const auto at = scan_outside_strings(text, [&](std::size_t i) {
    const char c = text[i];
    if (c == '[' || c == '{') return ++depth > max_depth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    return false;
  });
  if (!at) return std::nullopt;
  return *at + 1;
}

void check_json_depth(std::string_view text, const std::string& source, std::size_t max_depth) {
  const std::optional<std::size_t> at = find_json_too_deep(text, max_depth);
  if (!at) return;
  const auto [line, column] = line_and_column(text, *at);
  throw ParseError(source, line, column,
                   "JSON nested too deeply; expected at most " + std::to_string(max_depth) +
                       " nested arrays and objects, found a deeper one here");
}

std::optional<std::size_t> find_json_nul(std::string_view text) {
  const std::size_t at = text.find('\0');
  if (at == std::string_view::npos) return std::nullopt;
  return at + 1;
}

std::optional<std::size_t> find_json_number_overflow(std::string_view text) {
  const auto at = scan_outside_strings(text, [&](std::size_t i) {
    const char c = text[i];
    // A number starts with '-' or a digit that does not continue an earlier number.
    if (!(c == '-' || (c >= '0' && c <= '9')) || (i > 0 && is_number_char(text[i - 1]))) {
      return false;
    }
    std::size_t end = i;
    while (end < text.size() && is_number_char(text[end])) ++end;
    const std::string token(text.substr(i, end - i));
    return !std::isfinite(std::strtod(token.c_str(), nullptr));
  });
  if (!at) return std::nullopt;
  return *at + 1;
}

}  // namespace metron
