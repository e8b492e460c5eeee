#pragma once
// A one-line progress bar on a terminal ("estimating 1234/5000 [######......]  25%"), redrawn
// in place at most ten times a second so that drawing never slows the work it reports on.

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace metron::cli {

class ProgressBar {
 public:
  /// Draws on `out` when `enabled`; a disabled bar does nothing (output that is not a terminal
  /// gets no control characters).
  ProgressBar(std::ostream& out, bool enabled) : out_(out), enabled_(enabled) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { clear(); }

  /// Reports `done` of `total` in `phase`. Redraws when the phase changes, at the end of a phase,
  /// or when 100 ms have passed since the last drawing. Not thread-safe: one caller at a time.
  void update(std::string_view phase, std::int64_t done, std::int64_t total);

  /// Erases the bar, so that what is printed next starts on a clean line.
  void clear();

  /// True when standard error is a terminal.
  static bool stderr_is_terminal();

 private:
  std::ostream& out_;
  bool enabled_;
  bool drawn_ = false;
  std::string phase_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace metron::cli
