#include "output_files.h"

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

void check_distinct_outputs(const std::vector<NamedOutput>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].path.empty() || outputs[i].path == "-") continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (outputs[j].path.empty() || outputs[j].path == "-") continue;
      if (identity(outputs[i].path) == identity(outputs[j].path)) {
        throw InvalidConfig(outputs[j].flag + " and " + outputs[i].flag + ": both write '" +
                            outputs[i].path + "'; expected a different file for each");
      }
    }
  }
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
