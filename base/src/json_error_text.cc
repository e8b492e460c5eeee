#include "metron/base/json_error_text.h"

namespace metron {

std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1;
  std::size_t column = 0;
  for (std::size_t i = 0; i < byte; ++i) {
    if (i < text.size() && text[i] == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
  }
  return {line, column};
}

std::string short_json_reason(std::string what) {
  if (what.starts_with("[json.exception.")) what.erase(0, what.find("] ") + 2);
  if (what.starts_with("parse error")) what.erase(0, what.find(": ") + 2);
  return what;
}

}  // namespace metron
