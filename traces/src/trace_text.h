#pragma once
// Private: what the checker and the trace-file reader both read off a trace's raw text.

#include <cstdint>
#include <optional>
#include <string_view>

namespace metron::traces::detail {

/// The rank HTA reads: the first line matching `"rank":\s+(\d+)` (TRACES.md §2.8).
std::optional<std::int64_t> rank_hta_reads(std::string_view text);

}  // namespace metron::traces::detail
