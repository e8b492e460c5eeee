#pragma once
// Limits on JSON text that metron checks before parsing it (Note [JSON nesting limit] in
// base/src/json_limits.cc), and finding the number a JSON library could not hold. Standard
// library only, so that every module reading JSON (ir, models, scenario, traces) shares them.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace metron {

/// The deepest nesting of arrays and objects metron reads. Real inputs nest fewer than 10 levels;
/// 512 leaves room for any generated file while every recursive walk of a parsed value (copy,
/// dump, comparison, our readers) stays far inside the stack.
inline constexpr std::size_t kMaxJsonDepth = 512;

/// The 1-based byte offset in `text` of the first '[' or '{' that opens level `max_depth` + 1
/// (brackets inside strings do not count), or nullopt when the text nests no deeper. One pass,
/// no recursion; text that is not JSON is scanned the same way and left to the parser.
std::optional<std::size_t> find_json_too_deep(std::string_view text,
                                              std::size_t max_depth = kMaxJsonDepth);

/// Throws ParseError at `source:line:col` of the bracket that nests too deep, naming the limit.
/// @code
///   check_json_depth(text, "graph.json");  // before nlohmann::json::parse(text)
/// @endcode
void check_json_depth(std::string_view text, const std::string& source,
                      std::size_t max_depth = kMaxJsonDepth);

/// The 1-based byte offset of the first number outside strings whose value is too large for a
/// double ("1e400"), or nullopt. nlohmann reports such a number without a position; this finds it.
std::optional<std::size_t> find_json_number_overflow(std::string_view text);

/// The 1-based byte offset of the first NUL byte in `text`, or nullopt. nlohmann's lexer takes a
/// NUL for the end of the input and ignores whatever follows it, so a reader must refuse one
/// itself (fuzzing found a trace that parsed as valid JSON up to its NUL).
std::optional<std::size_t> find_json_nul(std::string_view text);

/// The reason for such a byte, after "malformed JSON".
inline constexpr std::string_view kJsonNulReason =
    "a NUL byte; expected text (a JSON parser would stop there and drop the rest)";

/// What such a number was expected to be, to append to the library's reason.
inline constexpr std::string_view kJsonNumberRange =
    "; expected a number a double can hold (magnitude at most about 1.8e308)";

}  // namespace metron
