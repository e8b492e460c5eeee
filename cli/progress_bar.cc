#include "progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace metron::cli {
namespace {

constexpr std::chrono::milliseconds kRedrawInterval{100};
constexpr std::int64_t kBarWidth = 30;
constexpr std::string_view kEraseToEndOfLine = "\x1b[K";

}  // namespace

void ProgressBar::update(std::string_view phase, std::int64_t done, std::int64_t total) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool new_phase = phase != phase_;
  if (!new_phase && done < total && now - last_ < kRedrawInterval) return;
  phase_ = phase;
  last_ = now;
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 1.0;
  const auto filled = static_cast<std::int64_t>(fraction * static_cast<double>(kBarWidth));
  out_ << fmt::format("\r{} {}/{} [{}{}] {:3.0f}%{}", phase, done, total,
                      std::string(static_cast<std::size_t>(filled), '#'),
                      std::string(static_cast<std::size_t>(kBarWidth - filled), '.'),
                      100 * fraction, kEraseToEndOfLine)
       << std::flush;
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  out_ << "\r" << kEraseToEndOfLine << std::flush;
  drawn_ = false;
}

bool ProgressBar::stderr_is_terminal() { return isatty(fileno(stderr)) != 0; }

}  // namespace metron::cli
