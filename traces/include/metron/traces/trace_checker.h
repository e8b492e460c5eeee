#pragma once
// The trace validator metron owns (docs/TRACES.md §4.4), run by the tests on every trace they
// produce and by `metron check-trace`: the Perfetto importer's rules, and HTA's for per-rank files.

#include <string>
#include <string_view>
#include <vector>

namespace metron::traces {

struct TraceCheckOptions {
  /// Also apply HTA's rules (distributedInfo.rank first and written `"rank": <n>`, GPU events
  /// with integer args.stream >= 1, device and correlation, every kept event with cat and dur).
  /// For per-rank executor files; the merged simulator file is checked with Perfetto's rules.
  bool hta = false;
};

/// Every violation in a Chrome trace's JSON text, each naming the event (its index in
/// traceEvents, ph, name, pid/tid) and the rule; empty when the trace is clean. Malformed JSON
/// is one violation naming line and column.
std::vector<std::string> check_chrome_trace(std::string_view text,
                                            const TraceCheckOptions& options = {});

/// The same for a file (".gz" files are decompressed). A missing or unreadable file throws
/// InvalidConfig, as every command's input does (metron/base/file_io.h read_file).
std::vector<std::string> check_chrome_trace_file(const std::string& path,
                                                 const TraceCheckOptions& options = {});

/// The per-rank files of one directory as HTA loads them (every `*.json` and `*.gz` file, rank
/// read with HTA's regex, 0 when it finds none): each rank in exactly one file, plus every
/// violation of each file (prefixed with the file name) under `options`. Throws IoError when the
/// directory cannot be listed and InvalidConfig when a file cannot be read.
std::vector<std::string> check_chrome_trace_directory(const std::string& directory,
                                                      const TraceCheckOptions& options = {});

/// The text of a trace file, gunzipped when it starts with the gzip magic bytes (as Perfetto
/// sniffs it, whatever the name). Throws InvalidConfig when the file cannot be read or looks like
/// gzip but does not decompress.
std::string read_chrome_trace_text(const std::string& path);

}  // namespace metron::traces
