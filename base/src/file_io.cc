#include "metron/base/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "metron/base/error.h"

namespace metron {
namespace {

std::string errno_text() { return std::strerror(errno); }

/// Makes a temporary path beside `target` that no concurrent writer of the same target will pick.
std::filesystem::path temporary_path_for(const std::filesystem::path& target) {
  static int counter = 0;
  auto name = "." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter++);
  return target.parent_path() / name;
}

/// Writes `content` to a new temporary file beside `path` and returns its path; removes it and
/// throws IoError when it cannot be written whole.
std::filesystem::path write_temporary(const std::string& path, std::string_view content) {
  const std::filesystem::path temp = temporary_path_for(std::filesystem::path(path));
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) throw IoError("cannot write '" + path + "': " + errno_text());
  const bool wrote = std::fwrite(content.data(), 1, content.size(), file) == content.size();
  const int write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!wrote || !closed) {
    std::filesystem::remove(temp);
    errno = wrote ? errno : write_errno;
    throw IoError("cannot write '" + path + "': " + errno_text());
  }
  return temp;
}

/// Renames a finished temporary over `path`; removes it and throws IoError when that fails.
void rename_into_place(const std::filesystem::path& temp, const std::string& path) {
  std::error_code ec;
  std::filesystem::rename(temp, std::filesystem::path(path), ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    throw IoError("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace

std::string read_file(const std::string& path) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InvalidConfig("cannot read '" + path + "': it is a directory; expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidConfig("cannot read '" + path + "': " + errno_text());
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InvalidConfig("cannot read '" + path + "': " + errno_text());
  return content;
}

void write_files_atomically(const std::vector<OutputFile>& files) {
  for (std::size_t i = 0; i < files.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (files[i].path == files[j].path && files[i].path != "-") {
        throw InvalidConfig("two outputs are written to '" + files[i].path +
                            "'; expected a different path for each");
      }
    }
  }
  // Write every temporary first; rename only when all were written.
  std::vector<std::filesystem::path> temps;
  try {
    for (const OutputFile& f : files) {
      temps.push_back(f.path == "-" ? std::filesystem::path{} : write_temporary(f.path, f.content));
    }
  } catch (...) {
    for (const auto& t : temps) {
      std::error_code ec;
      if (!t.empty()) std::filesystem::remove(t, ec);
    }
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].path == "-") {
      write_file_atomically("-", files[i].content);
    } else {
      rename_into_place(temps[i], files[i].path);
    }
  }
}

void write_file_atomically(const std::string& path, std::string_view content) {
  if (path == "-") {
    std::cout.write(content.data(), static_cast<std::streamsize>(content.size()));
    std::cout.flush();
    if (!std::cout) throw IoError("cannot write to standard output");
    return;
  }
  rename_into_place(write_temporary(path, content), path);
}

}  // namespace metron
