#pragma once
// Turning a JSON library's parse error into metron's `source:line:col: what` form. Standard
// library only, so that every module reading JSON (ir, models, ...) shares one implementation.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace metron {

/// Line and column of the character at 1-based `byte` in `text`, counted as nlohmann's lexer
/// counts them (a newline starts the next line at column 0), so that our position agrees with
/// the one in the library's own message.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte);

/// nlohmann's exception text without its "[json.exception.parse_error.101] parse error at line
/// 3, column 5: " prefix: the position is already in metron's own.
std::string short_json_reason(std::string what);

}  // namespace metron
