#pragma once
// Reading JSON objects with errors that name the path of the bad value ("sync.bucket_size: ...").
// A PathError is thrown deep inside the readers and turned into a ParseError naming the source
// at the top (scenario_from_json).

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace metron::scenario::detail {

using Json = nlohmann::ordered_json;

/// A wrong value at a JSON path.
struct PathError {
  std::string path;
  std::string what;
};

[[noreturn]] void fail(const std::string& path, const std::string& what);

/// The value's JSON text, cut to 40 characters, for messages.
std::string brief(const Json& v);

/// Every key of `object` must be one of `known`: a typo must not be silently ignored.
void require_known_keys(const Json& object, const std::string& path,
                        std::initializer_list<std::string_view> known);

/// A positive integer that fits an int32.
std::int32_t read_positive_int32(const Json& v, const std::string& path);
/// A positive integer.
std::int64_t read_positive_int64(const Json& v, const std::string& path);
/// true or false.
bool read_bool(const Json& v, const std::string& path);

}  // namespace metron::scenario::detail
