#include "output_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "metron/base/error.h"
#include "metron/traces/chrome_trace_writer.h"

namespace metron::cli {
namespace {

/// The file `path` names, whether it exists yet or not, for comparing two outputs.
std::string identity(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error).lexically_normal();
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, error);
  return (error ? absolute : canonical).string();
}

/// write_chrome_trace's default: larger traces are gzip-compressed.
constexpr std::int64_t kGzipAboveBytes = 50'000'000;

/// Whether the trace writer would write `content` to `path` uncompressed.
bool is_plain(const std::string& path, const std::string& content) {
  return path != "-" && !path.ends_with(".gz") &&
         content.size() <= static_cast<std::size_t>(kGzipAboveBytes);
}

}  // namespace

void check_outputs(const std::vector<NamedOutput>& outputs) {
  const auto file = [](const NamedOutput& o) {
    return !o.path.empty() && o.path != "-" && o.kind != OutputKind::kFolder;
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!file(outputs[i])) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (!file(outputs[j])) continue;
      if (identity(outputs[i].path) == identity(outputs[j].path)) {
        throw InvalidConfig(outputs[j].flag + " and " + outputs[i].flag + ": both write '" +
                            outputs[i].path + "'; expected a different file for each");
      }
    }
  }
  for (const NamedOutput& o : outputs) {
    if (o.path.empty() || o.path == "-") continue;
    if (o.kind == OutputKind::kFolder) check_output_directory(o.flag, o.path);
    if (o.kind != OutputKind::kFile) continue;
    try {
      check_writable(o.path);
    } catch (const IoError& e) {
      throw IoError(o.flag + ": " + e.what());
    }
  }
}

void check_output_directory(const std::string& flag, const std::string& path) {
  const auto fail = [&](const std::string& reason) {
    throw IoError(flag + ": cannot create the folder '" + path + "': " + reason);
  };
  // The folder itself, or the nearest of its parents that exists, which would hold it.
  std::filesystem::path existing = std::filesystem::path(path).lexically_normal();
  std::error_code error;
  while (!std::filesystem::exists(existing, error)) {
    if (error) fail(error.message());
    existing = existing.has_relative_path() ? existing.parent_path() : std::filesystem::path(".");
    if (existing.empty()) existing = ".";
  }
  if (!std::filesystem::is_directory(existing, error)) {
    fail(std::strerror(ENOTDIR));
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) fail(std::strerror(errno));
}

void create_output_directory(const std::string& flag, const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    throw IoError(flag + ": cannot create the folder '" + path + "': " + error.message());
  }
}

std::vector<std::string> write_outputs(std::vector<OutputFile> files,
                                       const std::vector<TraceOutput>& traces) {
  std::vector<bool> plain;
  for (const TraceOutput& trace : traces) {
    std::string json = traces::to_chrome_json(trace.document);
    plain.push_back(is_plain(trace.path, json));
    if (plain.back()) files.push_back({trace.path, std::move(json)});
  }
  write_files_atomically(files);
  std::vector<std::string> written;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    written.push_back(
        plain[i] ? traces[i].path
                 : traces::write_chrome_trace(traces[i].path, traces[i].document, kGzipAboveBytes));
  }
  return written;
}

}  // namespace metron::cli
