#pragma once
// Reading input files with errors users understand, and writing outputs atomically so that a failed
// run never leaves a half-written file behind (docs/STYLE.md, "Errors", item 10).

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace metron {

/// The most bytes metron reads from one input: 1 GiB. The largest real inputs (a task graph of
/// thousands of ranks, a long Chrome trace) are a few hundred MiB, and parsing one takes several
/// times its size in memory. Without a limit, `/dev/zero`, an endless pipe or a gzip bomb would
/// run until the machine runs out of memory; with it they are refused as bad input.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

/// Reads a whole file, or standard input when `path` is "-", of at most `max_bytes` bytes.
/// Throws InvalidConfig naming the path and the reason when it cannot be read, and naming the
/// limit when it holds more (also for endless devices and pipes, which are read up to the limit).
/// @code
///   std::string text = read_file("graph.json");  // at most kMaxInputBytes
/// @endcode
std::string read_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

/// A byte count as messages print it: "1 GiB", "64 MiB", or "1000 bytes" when not a whole unit.
std::string format_byte_count(std::size_t bytes);

/// Writes `content` to `path` so that readers see either the old file or the whole new one:
///   - a regular file, or a path that does not exist yet, gets a temporary file beside it that is
///     renamed over it (the temporary is removed on failure, and on SIGINT/SIGTERM once the
///     command installed remove_temporaries_on_signals());
///   - a symbolic link is written through: its final target is replaced, the link is kept;
///   - an existing file that is not a regular file (a device such as /dev/null or /dev/full, a
///     FIFO, /dev/stdout) is written directly, without a temporary;
///   - "-" writes to standard output.
/// Throws IoError naming the path and the reason (a missing or unwritable folder, a directory
/// given as the output, a full device); IoError is the user's error (exit 2), see error.h.
void write_file_atomically(const std::string& path, std::string_view content);

/// Throws the IoError write_file_atomically(path, ...) would throw for a path it cannot write
/// whatever the content (a directory, a missing or unwritable folder, a device that refuses
/// writing), without writing or creating anything: for a command to check its outputs before
/// minutes of work rather than after. A full disk shows only when writing.
void check_writable(const std::string& path);

/// One output of a run: where it goes and what it holds.
struct OutputFile {
  std::string path;
  std::string content;
};

/// Writes several outputs of one run all or nothing: every file is written to its temporary first
/// and renamed only when all were written, so a run that cannot write one of them leaves none
/// (e.g. `plan --csv A --json B` with B unwritable leaves no A). Outputs that are written
/// directly (devices, FIFOs, "-") are written after the temporaries and before the renames.
/// Throws InvalidConfig when two outputs name the same file, IoError as write_file_atomically
/// does.
void write_files_atomically(const std::vector<OutputFile>& files);

}  // namespace metron
