#pragma once
// Private: the pieces every spec of metron::models uses to name its enums and to validate itself,
// so that all specs word their problems alike ("tp: expected a positive integer, got 0").

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json_reading.h"

namespace metron::models::detail {

/// An enum's JSON names, in the order to_string lists them.
template <class Enum, std::size_t N>
using EnumNames = std::array<std::pair<Enum, std::string_view>, N>;

template <class Enum, std::size_t N>
std::string_view name_of(const EnumNames<Enum, N>& names, Enum e) {
  for (const auto& [value, name] : names) {
    if (value == e) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
std::optional<Enum> parse_name(const EnumNames<Enum, N>& names, std::string_view text) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return std::nullopt;
}

/// `"a", "b", "c"`: the names, for "expected one of ..." messages.
template <class Enum, std::size_t N>
std::string quoted_names(const EnumNames<Enum, N>& names) {
  std::string out;
  for (const auto& [value, name] : names) {
    out += (out.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  }
  return out;
}

/// The enum named by the JSON string `v`; fails at `path` listing the names otherwise.
template <class Enum, std::size_t N>
Enum read_enum(const EnumNames<Enum, N>& names, const Json& v, const std::string& path) {
  const std::optional<Enum> value =
      v.is_string() ? parse_name(names, v.get<std::string>()) : std::nullopt;
  if (!value) fail(path, "expected one of " + quoted_names(names) + ", got " + brief(v));
  return *value;
}

/// Json's own formatting of a number: shortest round-trip text, "inf"/"nan" as such.
std::string number_text(double value);

/// Each adds "<key>: expected ..., got <value>" to `problems` when the value is out of range.
void check_positive(std::vector<std::string>& problems, const std::string& key, std::int64_t value);
void check_positive(std::vector<std::string>& problems, const std::string& key, double value);
void check_non_negative(std::vector<std::string>& problems, const std::string& key, double value);
/// "<key>: expected at most <limit> (<why>), got <value>" when value > limit (Note [input limits]).
void check_at_most(std::vector<std::string>& problems, const std::string& key, std::int64_t value,
                   std::int64_t limit, const std::string& why);
/// "<what> (n) must be divisible by <by> (d)", checked only when both are positive.
void check_divisible(std::vector<std::string>& problems, const std::string& what, std::int64_t n,
                     const std::string& by, std::int64_t d);

/// Throws InvalidConfig "<where>: <problem>" for one problem, or a list headed
/// "<where>: N problems" for several; returns when there are none.
void throw_if_problems(const std::string& where, const std::vector<std::string>& problems);

}  // namespace metron::models::detail
