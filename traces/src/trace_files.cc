// Trace files as the checker reads them: gzip sniffed by its magic bytes, one file or a
// directory of per-rank files (HTA's layout).

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/traces/trace_checker.h"
#include "trace_text.h"

namespace metron::traces {
namespace {

/// `bytes` gunzipped (every member, as gzip -d does), or nullopt when they are not valid gzip.
/// Throws InvalidConfig when they decompress to more than kMaxInputBytes (a gzip bomb: a few MiB
/// of zeros compress a thousandfold).
std::optional<std::string> gunzip(const std::string& bytes, const std::string& path) {
  z_stream stream{};
  // windowBits 15 + 16: gzip wrapper only (zlib manual, inflateInit2).
  constexpr int kGzipWindowBits = 15 + 16;
  if (inflateInit2(&stream, kGzipWindowBits) != Z_OK) return std::nullopt;
  std::string out;
  std::vector<char> buffer(std::size_t{1} << 16);
  // zlib's interface is not const-correct; inflate only reads next_in.
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  std::size_t left = bytes.size();
  constexpr std::size_t kMaxChunk = std::size_t{1} << 30;
  int result = Z_OK;
  while (true) {
    if (stream.avail_in == 0 && left > 0) {
      stream.avail_in = static_cast<uInt>(std::min(left, kMaxChunk));
      left -= stream.avail_in;
    }
    stream.next_out = reinterpret_cast<Bytef*>(buffer.data());
    stream.avail_out = static_cast<uInt>(buffer.size());
    result = inflate(&stream, Z_NO_FLUSH);
    const std::size_t produced = buffer.size() - stream.avail_out;
    if (produced > kMaxInputBytes - out.size()) {
      inflateEnd(&stream);
      throw InvalidConfig("cannot read '" + path + "': it decompresses to more than the limit of " +
                          format_byte_count(kMaxInputBytes) + " on one input; expected at most " +
                          std::to_string(kMaxInputBytes) + " bytes");
    }
    out.append(buffer.data(), produced);
    if (result == Z_STREAM_END) {
      if (stream.avail_in == 0 && left == 0) break;
      inflateReset(&stream);  // another gzip member follows
      continue;
    }
    if (result != Z_OK && !(result == Z_BUF_ERROR && stream.avail_out == 0)) break;
  }
  inflateEnd(&stream);
  if (result != Z_STREAM_END) return std::nullopt;
  return out;
}

/// The file's bytes, and whether they are gzip that did not decompress.
std::pair<std::string, bool> read_trace_bytes(const std::string& path) {
  // read_file words a missing or unreadable file as every other command does (bad input).
  std::string bytes = read_file(path);
  // gzip by its magic bytes 1f 8b (RFC 1952 §2.3.1), as Perfetto sniffs it, not by the name.
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1F &&
      static_cast<unsigned char>(bytes[1]) == 0x8B) {
    std::optional<std::string> text = gunzip(bytes, path);
    if (!text) return {std::string(), true};
    return {std::move(*text), false};
  }
  return {std::move(bytes), false};
}

}  // namespace

std::string read_chrome_trace_text(const std::string& path) {
  auto [text, broken_gzip] = read_trace_bytes(path);
  if (broken_gzip) throw InvalidConfig("'" + path + "' starts like gzip but does not decompress");
  return std::move(text);
}

std::vector<std::string> check_chrome_trace_file(const std::string& path,
                                                 const TraceCheckOptions& options) {
  const auto [text, broken_gzip] = read_trace_bytes(path);
  if (broken_gzip) return {"the file starts like gzip but does not decompress"};
  return check_chrome_trace(text, options);
}

std::vector<std::string> check_chrome_trace_directory(const std::string& directory,
                                                      const TraceCheckOptions& options) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string extension = it->path().extension().string();
    if (it->is_regular_file() && (extension == ".json" || extension == ".gz")) {
      files.push_back(it->path().string());
    }
  }
  if (ec) throw IoError("cannot list '" + directory + "': " + ec.message());
  std::sort(files.begin(), files.end());  // directory order is not deterministic
  std::vector<std::string> violations;
  std::map<std::int64_t, std::string> owner;
  for (const std::string& file : files) {
    const std::string name = fs::path(file).filename().string();
    const auto [text, broken_gzip] = read_trace_bytes(file);
    if (broken_gzip) {
      violations.push_back(name + ": the file starts like gzip but does not decompress");
      continue;
    }
    for (const std::string& v : check_chrome_trace(text, options)) {
      violations.push_back(name + ": " + v);
    }
    // HTA gives a file without a match rank 0, and a later file with the same rank replaces
    // the earlier one (docs/TRACES.md §2.8).
    const std::int64_t rank = detail::rank_hta_reads(text).value_or(0);
    const auto [it, inserted] = owner.emplace(rank, name);
    if (!inserted) {
      violations.push_back(name + ": HTA reads rank " + std::to_string(rank) + ", as in " +
                           it->second + "; HTA keeps one file per rank");
    }
  }
  return violations;
}

}  // namespace metron::traces
