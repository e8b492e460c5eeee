#pragma once
// Private: what the checker and the trace-file reader read off a trace's raw text (the JSON
// parser forgets escapes and spacing; Perfetto and HTA do not).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace metron::traces::detail {

/// Facts only the raw text shows, from a pass over text already known to be valid JSON.
struct RawFacts {
  std::set<std::size_t> escaped_events;  ///< events holding a \u escape
  std::set<std::string> escaped_keys;    ///< top-level keys (outside traceEvents) holding one
  std::optional<bool> rank_spaced;       ///< distributedInfo's "rank": followed by a space
};

RawFacts scan_raw_text(std::string_view text);

/// The rank HTA reads: the first line matching `"rank":\s+(\d+)` (docs/TRACES.md §2.8).
std::optional<std::int64_t> rank_hta_reads(std::string_view text);

}  // namespace metron::traces::detail
