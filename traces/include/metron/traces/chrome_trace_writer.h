#pragma once
// Writes a TraceDocument as Chrome trace JSON in the conventions of docs/TRACES.md §6.1: object
// form with the header keys first (schemaVersion, deviceProperties, distributedInfo,
// baseTimeNanoseconds, displayTimeUnit, otherData, metadata) and `traceEvents` last; `": "` after
// keys so HTA's regex finds `"rank": <n>`; timestamps in µs with 3 decimals (exact for integer
// nanoseconds); names sanitised (no control characters, no \u escapes); M events for process and
// thread names and sort indices; events sorted by (ts, pid, tid) — except that at equal ts a
// flow's end (flow_in) comes after the other events, so that its start is read first — with ties
// broken by input order, so the same document always gives the same bytes.

#include <cstdint>
#include <string>

#include "metron/traces/trace_events.h"

namespace metron::traces {

/// The JSON text. Arguments and counter series that are NaN or infinite are left out (strict
/// JSON has neither); a counter sample left without series is left out. Throws InvalidConfig
/// for a slice with both flow_in and flow_out (one bind_id per v2 slice).
std::string to_chrome_json(const TraceDocument& document);

/// Writes the document to `path` atomically (temp file + rename). gzip-compressed when `path`
/// ends in ".gz", or — with `gzip_above_bytes` > 0 — when the JSON is larger than that, in which
/// case ".gz" is appended to the path ("-", standard output, is never compressed). Returns the
/// path written. Throws IoError, and InvalidConfig as to_chrome_json does.
std::string write_chrome_trace(const std::string& path, const TraceDocument& document,
                               std::int64_t gzip_above_bytes = 50'000'000);

}  // namespace metron::traces
