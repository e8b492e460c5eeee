#pragma once
// Private: how the checker reads values off a trace's JSON (coerced as Perfetto coerces them)
// and prints times; shared by the rule files and the raw-text scan, so all read them one way.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace metron::traces::detail {

using Json = nlohmann::ordered_json;

// Perfetto coerces pid and tid to uint32 (CoerceToUint32, docs/TRACES.md §1.5).
constexpr std::int64_t kIdLimit = std::int64_t{1} << 32;

inline std::string microseconds(std::int64_t ns) {
  const std::string sign = ns < 0 ? "-" : "";
  const std::int64_t magnitude = ns < 0 ? -ns : ns;
  std::string fraction = std::to_string(magnitude % 1000);
  fraction.insert(0, 3 - fraction.size(), '0');
  return sign + std::to_string(magnitude / 1000) + "." + fraction;
}

inline const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

inline std::string string_member(const Json& object, const char* key) {
  const Json* value = member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

inline std::optional<std::int64_t> integer(const Json* value) {
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned()) {
    const auto u = value->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  return value->get<std::int64_t>();
}

/// A JSON number of microseconds in nanoseconds, as Perfetto's CoerceToTs reads it (§1.5),
/// clamped to ±kMaxMicroseconds so that absurd values cannot overflow.
inline std::optional<std::int64_t> nanoseconds(const Json* value) {
  // About 285 years: far beyond any trace, far below the int64 limit in nanoseconds.
  constexpr std::int64_t kMaxMicroseconds = 9'000'000'000'000'000;
  constexpr auto kMaxDouble = static_cast<double>(kMaxMicroseconds);
  if (value == nullptr || !value->is_number()) return std::nullopt;
  if (auto i = integer(value)) return std::clamp(*i, -kMaxMicroseconds, kMaxMicroseconds) * 1000;
  const double us = std::clamp(value->get<double>(), -kMaxDouble, kMaxDouble);
  return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

inline bool is_true(const Json* value) {
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

inline bool has_control_character(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

}  // namespace metron::traces::detail
