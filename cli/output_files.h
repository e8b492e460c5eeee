#pragma once
// The output files a command is asked for, checked before it runs (issue 14), instead of after
// minutes of work: two flags naming one file would have one output overwrite the other, and a
// path that cannot be written (a missing folder, a directory) would fail only at the end.

#include <string>
#include <vector>

#include "metron/base/file_io.h"
#include "metron/traces/trace_events.h"

namespace metron::cli {

/// What an output path names, for check_outputs.
enum class OutputKind {
  kFile,          ///< a file, written where it is named
  kFolder,        ///< a folder the command writes files into (--trace-dir), made when missing
  kFileInFolder,  ///< a file in such a folder, which may not exist yet (the folder is checked)
};

/// One output flag and the path it was given ("" when the flag was left out).
struct NamedOutput {
  std::string flag;
  std::string path;
  OutputKind kind = OutputKind::kFile;
};

/// Checks a command's outputs before it runs. Throws InvalidConfig "<flag> and <flag>: both
/// write 'X'; expected a different file for each" when two given files are one (also through
/// "./X", "dir/../X" or a link); IoError "<flag>: cannot write 'X': <reason>" for a kFile that
/// cannot be written (base's check_writable), and "<flag>: cannot create the folder 'X': <reason>"
/// for a kFolder that is no folder or could not be made (as create_output_directory would say).
/// Standard output ("-") and outputs left out are not checked.
void check_outputs(const std::vector<NamedOutput>& outputs);

/// Throws the IoError create_output_directory would for `path` (an existing file that is no
/// folder, or a nearest existing parent that is no folder or not writable), creating nothing.
void check_output_directory(const std::string& flag, const std::string& path);

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
