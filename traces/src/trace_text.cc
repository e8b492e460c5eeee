// The raw-text scan behind trace_text.h: a pass over the characters of text already known to be
// valid JSON, apart from the rules because it sees what the parsed JSON no longer shows.

#include "trace_text.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace_values.h"

namespace metron::traces::detail {
namespace {

bool is_line_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

/// Whether `text[i]` (just after the quote closing a "rank" key) continues as HTA's regex
/// `"rank":\s+(\d+)` wants within one line (HTA scans line by line, §2.8).
bool rank_followed_by_space(std::string_view text, std::size_t i) {
  if (i >= text.size() || text[i] != ':') return false;
  std::size_t k = i + 1;
  while (k < text.size() && is_line_space(text[k])) ++k;
  return k > i + 1 && k < text.size() && text[k] >= '0' && text[k] <= '9';
}

}  // namespace

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
      } else if ((c == '}' || c == ']') && !stack.empty()) {
        // The text is valid JSON when this runs, so the brackets balance; the guard keeps a
        // caller that forgot that from reading outside the stack.
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
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\') {
        escaped_u = escaped_u || (i + 1 < text.size() && text[i + 1] == 'u');
        i += 2;
      } else {
        ++i;
      }
    }
    if (i >= text.size()) break;  // an unterminated string: not JSON, nothing more to see
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

}  // namespace metron::traces::detail
