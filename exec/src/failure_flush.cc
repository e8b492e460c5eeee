#include "failure_flush.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <utility>

namespace metron::exec::detail {
namespace {

// The write end of the live FailureFlush's pipe, for the signal handler (async-signal-safe:
// it only writes a byte).
std::atomic<int> g_term_fd{-1};
struct sigaction g_previous {};

extern "C" void on_term(int /*signal*/) {
  const int fd = g_term_fd.load();
  if (fd >= 0) static_cast<void>(::write(fd, "t", 1));
}

}  // namespace

FailureFlush::FailureFlush(Snapshot snapshot, Flush flush)
    : snapshot_(std::move(snapshot)), flush_(std::move(flush)) {
  if (!flush_ || ::pipe(pipe_) != 0) return;
  g_term_fd = pipe_[1];
  struct sigaction action {};
  action.sa_handler = on_term;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, &g_previous);
  thread_ = std::thread([this] { wait_for_term(); });
}

FailureFlush::~FailureFlush() {
  if (!thread_.joinable()) return;
  ::sigaction(SIGTERM, &g_previous, nullptr);
  g_term_fd = -1;
  static_cast<void>(::write(pipe_[1], "q", 1));
  thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void FailureFlush::flush_now() noexcept {
  if (!flush_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (flushed_) return;
  flushed_ = true;
  try {
    flush_(snapshot_());
  } catch (...) {  // NOLINT(bugprone-empty-catch): the run is failing already; its error wins
  }
}

void FailureFlush::wait_for_term() {
  char byte = 0;
  while (true) {
    pollfd fd{pipe_[0], POLLIN, 0};
    if (::poll(&fd, 1, -1) < 0) continue;  // EINTR
    if (::read(pipe_[0], &byte, 1) != 1) continue;
    if (byte == 'q') return;
    flush_now();
    ::_exit(128 + SIGTERM);  // as the default action would, without the atexit handlers
  }
}

}  // namespace metron::exec::detail
