#pragma once
// Private: finding a preset by name, with the "did you mean" hint, for every kind of preset.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/error.h"

namespace metron::models::detail {

/// Levenshtein distance, for "did you mean" hints (preset names, JSON keys).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// `<what> preset: unknown name "x"; expected one of a, b, c[; did you mean "b"]`.
std::string unknown_preset_message(std::string_view what, std::string_view name,
                                   const std::vector<std::string_view>& names);

/// The preset called `name`; throws InvalidConfig with the message above.
template <class Spec>
const Spec& find_preset(std::span<const Spec> presets, std::string_view name,
                        std::string_view what) {
  std::vector<std::string_view> names;
  for (const Spec& spec : presets) {
    if (spec.name == name) return spec;
    names.push_back(spec.name);
  }
  throw InvalidConfig(unknown_preset_message(what, name, names));
}

}  // namespace metron::models::detail
