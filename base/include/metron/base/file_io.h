#pragma once
// Reading input files with errors users understand, and writing outputs atomically so that a failed
// run never leaves a half-written file behind (docs/STYLE.md, "Errors", item 10).

#include <string>
#include <string_view>

namespace metron {

/// Reads a whole file, or standard input when `path` is "-".
/// Throws InvalidConfig naming the path and the reason when it cannot be read.
std::string read_file(const std::string& path);

/// Writes `content` to `path` through a temporary file in the same folder and a rename, so readers
/// see either the old file or the whole new one. Writes to standard output when `path` is "-".
/// Throws IoError naming the path and the reason; the temporary file is removed on failure.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace metron
