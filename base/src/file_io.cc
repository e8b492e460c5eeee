#include "metron/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>
#include <system_error>

#include "metron/base/error.h"
#include "metron/base/temporary_file_guard.h"

namespace metron {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int error) { return std::strerror(error); }

/// Closes a descriptor we opened when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd, bool owned = true) : fd_(fd), owned_(owned) {}
  ~FileDescriptor() {
    if (owned_ && fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  /// Closes now; returns 0 or the errno of a failed close (a late write error on NFS, ...).
  int close() {
    const int result = owned_ && fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
  bool owned_;
};

// ---- reading -----------------------------------------------------------------------------

[[noreturn]] void fail_read(const std::string& path, const std::string& reason) {
  throw InvalidConfig("cannot read " +
                      (path == "-" ? std::string("standard input") : "'" + path + "'") + ": " +
                      reason);
}

[[noreturn]] void fail_too_large(const std::string& path, std::size_t max_bytes) {
  fail_read(path, "the input is larger than the limit of " + format_byte_count(max_bytes) +
                      " on one input; expected at most " + std::to_string(max_bytes) + " bytes");
}

// ---- writing -----------------------------------------------------------------------------

[[noreturn]] void fail_write(const std::string& path, const std::string& reason) {
  throw IoError("cannot write '" + path + "': " + reason);
}

/// How one output reaches its file (see write_file_atomically).
enum class OutputKind : std::uint8_t { kStdout, kDirect, kReplace };

/// One output, resolved: `target` is the file written directly, or the one the temporary
/// replaces (symbolic links followed to their final target).
struct Destination {
  const std::string* path = nullptr;  ///< as the user named it, for messages
  std::string_view content;
  OutputKind kind = OutputKind::kReplace;
  fs::path target;
  std::optional<mode_t> mode;  ///< permission bits of the file replaced, kept on the new one
};

/// /dev/stdout, /dev/fd/N and /proc/self/fd/N name a descriptor the process already holds:
/// they are written through it (appending, as the shell's `>>` would), never replaced.
bool is_descriptor_path(const fs::path& path) {
  const std::string p = path.lexically_normal().string();
  return p == "/dev/stdout" || p == "/dev/stderr" || p.starts_with("/dev/fd/") ||
         p.starts_with("/proc/self/fd/");
}

/// Follows symbolic links from `path` to the file a rename must replace (which may not exist).
fs::path final_target(const std::string& path) {
  constexpr int kMaxLinks = 40;  // Linux's own limit (MAXSYMLINKS)
  fs::path target = path;
  for (int hops = 0; hops <= kMaxLinks; ++hops) {
    struct stat info {};
    if (::lstat(target.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return target;
    std::error_code ec;
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) fail_write(path, ec.message());
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  fail_write(path, "too many levels of symbolic links");
}

Destination resolve(const std::string& path, std::string_view content) {
  Destination d{.path = &path, .content = content, .target = path};
  if (path == "-") {
    d.kind = OutputKind::kStdout;
    return d;
  }
  struct stat info {};
  if (is_descriptor_path(path)) {
    d.kind = OutputKind::kDirect;
  } else if (::stat(path.c_str(), &info) == 0) {  // follows links
    if (S_ISDIR(info.st_mode)) fail_write(path, "it is a directory; expected a file path");
    if (S_ISREG(info.st_mode)) {
      d.target = final_target(path);
      d.mode = info.st_mode & 0777;
    } else {
      d.kind = OutputKind::kDirect;  // a device, a FIFO, a socket
    }
  } else if (errno == ENOENT) {
    d.target = final_target(path);  // a new file, or the missing target of a dangling link
  } else {
    fail_write(path, errno_text(errno));  // ELOOP, ENOTDIR, EACCES on the folder, ...
  }
  return d;
}

/// Writes all of `content` to `fd`; 0 or the errno of the failing write.
int write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

void write_directly(const Destination& d) {
  FileDescriptor fd(::open(d.target.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (fd.get() < 0) fail_write(*d.path, errno_text(errno));
  int error = write_all(fd.get(), d.content);
  const int close_error = fd.close();
  if (error == 0) error = close_error;
  if (error != 0) fail_write(*d.path, errno_text(error));
}

void write_to_stdout(std::string_view content) {
  std::cout.write(content.data(), static_cast<std::streamsize>(content.size()));
  std::cout.flush();
  if (!std::cout) throw IoError("cannot write to standard output");
}

/// The temporaries of one call, each beside its target; the destructor removes every one that
/// was not renamed into place, so any failure (or exception) leaves none behind.
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles() {
    for (const Staged& s : staged_) {
      if (!s.renamed) ::unlink(s.temp.c_str());
    }
  }

  /// Writes `d`'s content to a new temporary beside `d.target`.
  void stage(const Destination& d) {
    static std::atomic<unsigned> counter{0};
    const std::string prefix =
        "." + d.target.filename().string() + ".tmp." + std::to_string(::getpid()) + ".";
    // Exclusive creation never follows a link planted at the temporary's name; a stale file of
    // an earlier process with our PID just moves us to the next number.
    for (int attempt = 0;; ++attempt) {
      const fs::path temp = d.target.parent_path() / (prefix + std::to_string(counter++));
      TemporaryFileGuard guard(temp.string());  // before the file exists
      const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno == EEXIST && attempt < 100) continue;
      if (fd < 0) fail_write(*d.path, errno_text(errno));
      staged_.push_back({temp, std::move(guard)});
      FileDescriptor file(fd);
      if (d.mode) (void)::fchmod(fd, *d.mode);
      int error = write_all(fd, d.content);
      const int close_error = file.close();
      if (error == 0) error = close_error;
      if (error != 0) fail_write(*d.path, errno_text(error));
      return;
    }
  }

  /// Renames the `i`-th staged temporary over `d.target`.
  void rename(std::size_t i, const Destination& d) {
    if (::rename(staged_[i].temp.c_str(), d.target.c_str()) != 0) {
      fail_write(*d.path, errno_text(errno));
    }
    staged_[i].renamed = true;
  }

 private:
  struct Staged {
    fs::path temp;
    TemporaryFileGuard guard;
    bool renamed = false;
  };
  std::vector<Staged> staged_;
};

/// The one code path of write_file_atomically and write_files_atomically.
void write_outputs(std::span<const Destination> outputs) {
  StagedFiles staged;
  for (const Destination& d : outputs) {
    if (d.kind == OutputKind::kReplace) staged.stage(d);
  }
  for (const Destination& d : outputs) {
    if (d.kind == OutputKind::kDirect) write_directly(d);
    if (d.kind == OutputKind::kStdout) write_to_stdout(d.content);
  }
  std::size_t next = 0;
  for (const Destination& d : outputs) {
    if (d.kind == OutputKind::kReplace) staged.rename(next++, d);
  }
}

/// The file a replaced output lands in, for comparing two outputs.
std::string identity(const Destination& d) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(d.target, ec);
  return (ec ? fs::absolute(d.target, ec).lexically_normal() : p).string();
}

}  // namespace

void check_writable(const std::string& path) {
  const Destination d = resolve(path, {});
  // Standard output and the descriptors this process holds are written through as they are.
  if (d.kind == OutputKind::kStdout || is_descriptor_path(path)) return;
  // The folder the temporary is created in, or the device or FIFO written directly.
  fs::path where = d.kind == OutputKind::kDirect ? d.target : d.target.parent_path();
  if (where.empty()) where = ".";
  const int mode = d.kind == OutputKind::kDirect ? W_OK : W_OK | X_OK;
  if (::access(where.c_str(), mode) != 0) fail_write(path, errno_text(errno));
}

std::string format_byte_count(std::size_t bytes) {
  constexpr std::array<const char*, 3> kUnits{"GiB", "MiB", "KiB"};
  for (std::size_t i = 0; i < kUnits.size(); ++i) {
    const std::size_t unit = std::size_t{1} << (10 * (kUnits.size() - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + " " + kUnits[i];
  }
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  const bool is_stdin = path == "-";
  FileDescriptor fd(is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC),
                    !is_stdin);
  if (fd.get() < 0) fail_read(path, errno_text(errno));
  struct stat info {};
  const bool known = ::fstat(fd.get(), &info) == 0;
  if (known && S_ISDIR(info.st_mode)) fail_read(path, "it is a directory; expected a file");
  std::string content;
  if (known && S_ISREG(info.st_mode)) {
    // Refuse a file known to be too large before reading any of it. The loop below still
    // counts: a file may grow while it is read, and /proc files say they are empty.
    if (static_cast<std::uintmax_t>(info.st_size) > max_bytes) fail_too_large(path, max_bytes);
    content.reserve(static_cast<std::size_t>(info.st_size));
  }
  std::array<char, std::size_t{1} << 16> buffer{};
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_read(path, errno_text(errno));
    if (n == 0) return content;
    if (static_cast<std::size_t>(n) > max_bytes - content.size()) fail_too_large(path, max_bytes);
    content.append(buffer.data(), static_cast<std::size_t>(n));
  }
}

void write_files_atomically(const std::vector<OutputFile>& files) {
  std::vector<Destination> outputs;
  outputs.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (files[i].path == files[j].path && files[i].path != "-") {
        throw InvalidConfig("two outputs are written to '" + files[i].path +
                            "'; expected a different path for each");
      }
    }
    outputs.push_back(resolve(files[i].path, files[i].content));
  }
  // Two names of one file (a link and its target, "a" and "./a") would rename twice.
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (outputs[i].kind == OutputKind::kReplace && outputs[j].kind == OutputKind::kReplace &&
          identity(outputs[i]) == identity(outputs[j])) {
        throw InvalidConfig("outputs '" + *outputs[j].path + "' and '" + *outputs[i].path +
                            "' are the same file; expected a different file for each");
      }
    }
  }
  write_outputs(outputs);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  const Destination d = resolve(path, content);
  write_outputs(std::span<const Destination>(&d, 1));
}

}  // namespace metron
