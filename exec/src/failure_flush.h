#pragma once
// Private: nothing recorded is lost when a rank's run ends badly (issue 16, "Failure"). A rank
// that fails flushes what it recorded before it reports the error; a rank that the launcher ends
// (SIGTERM, because another rank failed or the watchdog fired) flushes from a thread of its own
// and exits, within the launcher's grace period. Each writes only its own files, so the ranks
// never race on one.

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "metron/exec/rank_executor.h"

namespace metron::exec::detail {

/// While alive: SIGTERM makes the process flush and _exit(143). One at a time per process.
class FailureFlush {
 public:
  using Snapshot = std::function<std::vector<RankIteration>()>;
  using Flush = std::function<void(const std::vector<RankIteration>&)>;

  /// `snapshot` gathers what the rank recorded so far (from any thread); `flush` writes it (its
  /// exceptions are dropped: the run is failing already). An empty `flush` does nothing at all.
  FailureFlush(Snapshot snapshot, Flush flush);
  ~FailureFlush();
  FailureFlush(const FailureFlush&) = delete;
  FailureFlush& operator=(const FailureFlush&) = delete;
  FailureFlush(FailureFlush&&) = delete;
  FailureFlush& operator=(FailureFlush&&) = delete;

  /// Flushes now, on the calling thread (a failure in this rank), unless a flush already ran; if
  /// one is running on another thread, waits for it to end. (A rank whose own error came first is
  /// still flushing when the launcher's SIGTERM arrives: the SIGTERM thread must not _exit
  /// before the file is written.)
  void flush_now() noexcept;

 private:
  void wait_for_term();

  Snapshot snapshot_;
  Flush flush_;
  std::mutex mutex_;      // held while flushing
  bool flushed_ = false;  // under mutex_
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace metron::exec::detail
