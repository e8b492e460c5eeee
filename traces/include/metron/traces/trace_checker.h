#pragma once
// The trace validator metron owns (docs/TRACES.md §4.4), run by the tests on every trace they
// produce and by `metron check-trace`: the Perfetto importer's rules, and HTA's for per-rank files.

#include <string>
#include <string_view>
#include <vector>

namespace metron::traces {

struct TraceCheckOptions {
  /// Also apply HTA's rules: exactly what breaks one of Holistic Trace Analysis's analyses
  /// (docs/TRACES.md §2.8), nothing it merely drops without harm. Per file: distributedInfo.rank
  /// present, written `"rank": <n>` and found first by HTA's regex; per directory, each rank in one
  /// file. Per event, for GPU work (every event with args.stream, as HTA sees it): an X event
  /// with cat, in a category HTA's idle-time breakdown keeps (kernel, gpu_memcpy, gpu_memset;
  /// cuda_sync), args.stream an integer >= 0, an integer args.correlation, and named nccl... when
  /// it carries collective args; no args.stream on CPU events or gpu_user_annotation, none
  /// missing on a kernel category; at most one cuda_runtime event per correlation, starting no
  /// later than its kernel; and, with two or more ProfilerStep# markers, a cuda_runtime launch for
  /// every kernel. For per-rank files; the merged simulator file is checked with Perfetto's rules.
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
