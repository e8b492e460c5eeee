#include "preset_lookup.h"

#include <algorithm>

namespace metron::models::detail {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string unknown_preset_message(std::string_view what, std::string_view name,
                                   const std::vector<std::string_view>& names) {
  // Far-off names get no hint: a suggestion that shares nothing with the input misleads.
  constexpr std::size_t kMaxDistance = 3;
  std::string list;
  std::string_view closest;
  std::size_t best = kMaxDistance + 1;
  for (std::string_view candidate : names) {
    list += (list.empty() ? "" : ", ") + std::string(candidate);
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best) {
      best = distance;
      closest = candidate;
    }
  }
  std::string message = std::string(what) + " preset: unknown name \"" + std::string(name) +
                        "\"; expected one of " + list;
  if (!closest.empty()) message += "; did you mean \"" + std::string(closest) + "\"";
  return message;
}

}  // namespace metron::models::detail
