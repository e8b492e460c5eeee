#pragma once
// Private: reading specs from JSON with messages that name the JSON path, shared by every spec
// of metron::models. nlohmann stays out of the public headers.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"

namespace metron::models::detail {

using Json = nlohmann::ordered_json;

/// A wrong type or value at a JSON path; the entry points turn it into a ParseError naming the
/// source, so the small readers need not carry it around.
struct PathError {
  std::string path;
  std::string what;
};

[[noreturn]] void fail(const std::string& path, std::string what);
/// The value as JSON text, cut to 40 characters, for "got ..." messages.
std::string brief(const Json& value);
std::int64_t read_positive_integer(const Json& v, const std::string& path);
std::int64_t read_non_negative_integer(const Json& v, const std::string& path);
double read_positive_number(const Json& v, const std::string& path);
double read_non_negative_number(const Json& v, const std::string& path);
std::string read_string(const Json& v, const std::string& path);
bool read_bool(const Json& v, const std::string& path);

/// Parses JSON text; malformed text throws ParseError at source:line:col.
Json parse_json(std::string_view text, const std::string& source);

/// `value` as one line of JSON with a final newline. A string that is not valid UTF-8 throws
/// InvalidConfig naming `what` (e.g. `model "x"`).
std::string dump_line(const Json& value, const std::string& what);

/// Parses `text` and reads it with `read(root)`; a PathError becomes a ParseError naming
/// `source` and the JSON path.
template <class Read>
auto read_document(std::string_view text, const std::string& source, Read read) {
  const Json root = parse_json(text, source);
  try {
    return read(root);
  } catch (const PathError& e) {
    throw ParseError(source, 0, 0, e.path + ": " + e.what);
  }
}

/// One JSON object being read: remembers the keys consumed, so that finish() can count the rest
/// as unknown keys in the Diagnostics (docs/STYLE.md, Errors §8).
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, Diagnostics* diagnostics);

  [[nodiscard]] std::string path_of(std::string_view key) const;
  /// The value of `key`, or nullptr when absent.
  const Json* find(std::string_view key);
  /// The value of `key`; fails naming the missing key.
  const Json& required(std::string_view key);
  /// Counts each key never asked for as "unknown_key", with a message naming the key, the keys
  /// the object may have and the nearest of them ("<path>: unknown key; expected one of "a",
  /// "b"; did you mean "a"?"). Call after asking for every key the object may have.
  void finish() const;

 private:
  const Json& object_;
  std::string path_;
  Diagnostics* diagnostics_;
  std::vector<std::string> used_;
  std::vector<std::string> known_;  // every key asked for: the keys this object may have
};

}  // namespace metron::models::detail
