#pragma once
// The output files a command is asked for, checked before it runs: two flags naming one file
// would have one output overwrite the other (issue 14), so that is refused up front, naming both
// flags, instead of after minutes of work.

#include <string>
#include <vector>

#include "metron/base/file_io.h"
#include "metron/traces/trace_events.h"

namespace metron::cli {

/// One output flag and the path it was given ("" when the flag was left out).
struct NamedOutput {
  std::string flag;
  std::string path;
};

/// Throws InvalidConfig "<flag> and <flag>: both write 'X'; expected a different file for each"
/// when two given outputs name the same file (also through "./X", "dir/../X" or a link).
/// Standard output ("-") and outputs left out are not compared.
void check_distinct_outputs(const std::vector<NamedOutput>& outputs);

/// Creates the folder `path` (and its parents) that `flag` names, for outputs written into it.
/// Throws IoError "<flag>: cannot create the folder '<path>': <reason>" (exit 2).
void create_output_directory(const std::string& flag, const std::string& path);

/// A trace to write with a run's other outputs.
struct TraceOutput {
  std::string path;
  traces::TraceDocument document;
};

/// Writes a run's outputs all or nothing (docs/STYLE.md, Errors §10): `files` and every trace
/// that is written uncompressed go through write_files_atomically; a trace that must be gzipped
/// (".gz", or over 50 MB, as write_chrome_trace decides) is written after them, by the trace
/// writer, which alone compresses. Returns the paths the traces went to, in order.
std::vector<std::string> write_outputs(std::vector<OutputFile> files,
                                       const std::vector<TraceOutput>& traces);

}  // namespace metron::cli
