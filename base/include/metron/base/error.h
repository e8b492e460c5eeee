#pragma once
// The one error hierarchy of metron (docs/STYLE.md, "Errors"). Library code throws these and never
// exits; only cli/ catches them and turns them into `metron: error: ...` and an exit code.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace metron {

/// Root of every error metron throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// True when the error is the user's input (exit code 2), false for a runtime failure (exit 1).
  [[nodiscard]] virtual bool is_input_error() const noexcept { return false; }
};

/// An impossible or inconsistent configuration (layers not divisible, unknown preset, ...).
class InvalidConfig : public Error {
 public:
  using Error::Error;
  [[nodiscard]] bool is_input_error() const noexcept override { return true; }
};

/// A graph that breaks the task-graph contract. Carries every problem found, not just the first.
class InvalidGraph : public Error {
 public:
  explicit InvalidGraph(std::vector<std::string> problems);
  [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }
  [[nodiscard]] bool is_input_error() const noexcept override { return true; }

 private:
  std::vector<std::string> problems_;
};

/// Malformed text or JSON. The message starts with `source:line:col`, or with `source` alone when
/// the place is a JSON path rather than a position (line 0).
class ParseError : public Error {
 public:
  ParseError(std::string source, std::size_t line, std::size_t column, const std::string& what);
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  [[nodiscard]] std::size_t column() const noexcept { return column_; }
  [[nodiscard]] bool is_input_error() const noexcept override { return true; }

 private:
  std::string source_;
  std::size_t line_;
  std::size_t column_;
};

/// No progress with work left. Names every blocked task and what it waits for.
class Deadlock : public Error {
 public:
  explicit Deadlock(std::vector<std::string> blocked);
  [[nodiscard]] const std::vector<std::string>& blocked() const noexcept { return blocked_; }
  // A graph that cannot run is a property of the input, so it is reported like bad input.
  [[nodiscard]] bool is_input_error() const noexcept override { return true; }

 private:
  std::vector<std::string> blocked_;
};

/// A failure of the machine or a library underneath (CUDA, NCCL, Gloo, a worker process).
class BackendError : public Error {
 public:
  using Error::Error;
};

/// Reading or writing a file failed for a reason outside the input's content. By default this is
/// the user's error (exit 2): the path they named cannot be written (a missing or unwritable
/// folder, a directory given as the output, a full device such as /dev/full), and they fix it by
/// naming another path or freeing space. Failures of the machine underneath (zlib out of memory)
/// say IoError::Cause::kRuntime (exit 1).
class IoError : public Error {
 public:
  enum class Cause : std::uint8_t { kPath, kRuntime };
  explicit IoError(const std::string& what, Cause cause = Cause::kPath)
      : Error(what), cause_(cause) {}
  [[nodiscard]] bool is_input_error() const noexcept override { return cause_ == Cause::kPath; }

 private:
  Cause cause_;
};

/// A broken internal invariant: a bug in metron, never the user's fault. Carries file:line.
class InternalError : public Error {
 public:
  InternalError(const char* file, int line, const std::string& what);
};

/// Joins problems as an indented bullet list under a headline, as InvalidGraph and Deadlock print.
std::string format_problem_list(const std::string& headline, const std::vector<std::string>& items);

}  // namespace metron

/// Checks an internal invariant in every build type (unlike assert()); throws InternalError.
#define METRON_ASSERT(cond, msg)                                                            \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      throw ::metron::InternalError(__FILE__, __LINE__,                                     \
                                    std::string("assertion `" #cond "` failed: ") + (msg)); \
    }                                                                                       \
  } while (false)
