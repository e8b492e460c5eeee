#pragma once
// Reading input files with errors users understand, and writing outputs atomically so that a failed
// run never leaves a half-written file behind (docs/STYLE.md, "Errors", item 10).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace metron {

/// Reads a whole file, or standard input when `path` is "-".
/// Throws InvalidConfig naming the path and the reason when it cannot be read.
std::string read_file(const std::string& path);

/// Writes `content` to `path` through a temporary file in the same folder and a rename, so readers
/// see either the old file or the whole new one. Writes to standard output when `path` is "-".
/// Throws IoError naming the path and the reason; the temporary file is removed on failure.
void write_file_atomically(const std::string& path, std::string_view content);

/// One output of a run: where it goes and what it holds.
struct OutputFile {
  std::string path;
  std::string content;
};

/// Writes several outputs of one run all or nothing: every file is written to its temporary first
/// and renamed only when all were written, so a run that cannot write one of them leaves none
/// (e.g. `plan --csv A --json B` with B unwritable leaves no A). Throws InvalidConfig when two
/// outputs name the same path, IoError as write_file_atomically does.
void write_files_atomically(const std::vector<OutputFile>& files);

}  // namespace metron
