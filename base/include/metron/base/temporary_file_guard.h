#pragma once
// Temporaries of atomic writes that a signal must not leave behind (Note [temporaries on signals]
// in base/src/temporary_file_guard.cc): the writer registers each temporary for as long as it
// exists, and the command's main() installs handlers that remove the registered ones when the
// process is interrupted or terminated.

#include <cstddef>
#include <string>

namespace metron {

/// Registers one temporary file for removal on SIGINT, SIGTERM or SIGHUP while the guard lives.
/// Registration is best effort: with more temporaries in flight than the registry holds, or a
/// path longer than PATH_MAX, the extra ones are not registered (and not removed on a signal).
/// @code
///   TemporaryFileGuard guard(temp);  // before the file is created
///   ... write temp, rename it over the target ...
///   // the destructor unregisters it; it never removes the file itself
/// @endcode
class TemporaryFileGuard {
 public:
  explicit TemporaryFileGuard(const std::string& path) noexcept;
  ~TemporaryFileGuard();
  TemporaryFileGuard(TemporaryFileGuard&& other) noexcept;
  TemporaryFileGuard& operator=(TemporaryFileGuard&&) = delete;
  TemporaryFileGuard(const TemporaryFileGuard&) = delete;
  TemporaryFileGuard& operator=(const TemporaryFileGuard&) = delete;

  /// False when the registry was full or the path too long.
  [[nodiscard]] bool is_registered() const noexcept { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

/// Installs the handlers that remove every registered temporary on SIGINT, SIGTERM and SIGHUP and
/// then end the process by the same signal with its default action, so the exit status still
/// says which signal killed it. Signals the parent set to be ignored stay ignored. For main().
void remove_temporaries_on_signals();

/// How many temporaries are registered now (for tests).
std::size_t num_temporaries_in_flight() noexcept;

}  // namespace metron
