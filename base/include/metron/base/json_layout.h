#pragma once
// The canonical layout of metron's JSON files: one top-level key per line and one list entry per
// line, so a file stays short, greps well and diffs one entity at a time. Written once for every
// module; a template over the JSON type, because metron::base itself does not link nlohmann_json
// (its callers do).

#include <cstddef>
#include <string>

namespace metron {

/// `root` (a JSON object, e.g. nlohmann::ordered_json) laid out as
///   {
///     "key": value,
///     "list": [
///       entry,
///       entry
///     ]
///   }
/// with a final newline; every value and entry is dumped compactly on its line.
template <class Json>
std::string dump_one_entry_per_line(const Json& root) {
  std::string out = "{\n";
  std::size_t left = root.size();
  for (const auto& [key, value] : root.items()) {
    out += "  " + Json(key).dump() + ": ";
    if (!value.is_array() || value.empty()) {
      out += value.dump();
    } else {
      out += "[\n";
      for (std::size_t i = 0; i < value.size(); ++i) {
        out += "    " + value[i].dump() + (i + 1 < value.size() ? ",\n" : "\n");
      }
      out += "  ]";
    }
    out += --left > 0 ? ",\n" : "\n";
  }
  return out + "}\n";
}

}  // namespace metron
