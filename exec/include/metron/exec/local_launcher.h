#pragma once
// The local launcher: forks one worker process per rank on this machine and supervises them, so
// that `metron run --nproc N` ends every rank with the first failure's message, turns a hang into
// an error naming what each rank was doing, and leaves no process behind. Plain POSIX (Linux);
// it knows nothing of graphs or backends: a worker is any function of its rank.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace metron::exec {

/// What a worker uses to talk to the launcher: its current status (the task it runs or waits
/// for; the last one is what a failure or a timeout reports) and a final error message. Safe to
/// use from several threads of the worker. The launcher creates it; a worker only receives it.
class WorkerChannel {
 public:
  /// A channel that writes frames to `fd` (the write end of the launcher's pipe for `rank`).
  WorkerChannel(std::int32_t rank, int fd) : rank_(rank), fd_(fd) {}

  [[nodiscard]] std::int32_t rank() const noexcept { return rank_; }

  /// Publishes the worker's current status, one short line (newlines become spaces; longer than
  /// kMaxStatusBytes is cut). Every call counts as progress for the watchdog.
  void set_status(std::string_view status);

  /// Reports a failure of this rank. The launcher ends the run with it as soon as it reads it,
  /// whether or not the worker returns afterwards. `input_error` marks a failure caused by the
  /// user's input (exit code 2 in the CLI) rather than a runtime failure (exit code 1).
  void report_error(std::string_view message, bool input_error = false);

  static constexpr std::size_t kMaxStatusBytes = 1024;
  static constexpr std::size_t kMaxErrorBytes = std::size_t{64} * 1024;

 private:
  void send(char kind, std::string_view payload);

  std::int32_t rank_;
  int fd_;
  std::mutex mutex_;  // one frame at a time, whichever worker thread writes it
};

/// How a run is supervised.
struct LaunchOptions {
  std::int32_t workers = 1;
  /// The watchdog: the run fails when no worker published a status for this long (a hang, not a
  /// slow run, as long as workers publish a status per task). Zero turns it off.
  std::chrono::milliseconds timeout{0};
  /// How long a worker that is being ended gets between SIGTERM and SIGKILL.
  std::chrono::milliseconds grace{2000};
};

/// Why a run failed.
enum class FailureKind : std::uint8_t {
  kError,        ///< a worker threw or called report_error()
  kExit,         ///< a worker exited with a non-zero status without saying why
  kSignal,       ///< a worker was killed by a signal it did not get from the launcher
  kTimeout,      ///< the watchdog fired: no progress for LaunchOptions::timeout
  kInterrupted,  ///< the launching process received SIGINT or SIGTERM
};
[[nodiscard]] const char* to_string(FailureKind kind) noexcept;

/// The first failure of a run, the one that ended it.
struct LaunchFailure {
  FailureKind kind = FailureKind::kError;
  std::int32_t rank = -1;    ///< the failing rank; -1 for kTimeout and kInterrupted
  int signal = 0;            ///< for kSignal and kInterrupted
  bool input_error = false;  ///< set by a worker's report_error(..., true) or a metron input error
  /// "rank 2: boom"; "rank 2 was killed by signal 9 (Killed) while <status>"; for a timeout,
  /// "no progress for 0.5 s; last status of each rank:" and one "  - rank R: <status>" line per
  /// rank.
  std::string message;
};

/// What the launcher knows about one worker after the run.
struct WorkerReport {
  std::int32_t rank = 0;
  int pid = 0;                     ///< its process id (already reaped: do not signal it)
  int exit_code = -1;              ///< its exit status when it exited, else -1
  int signal = 0;                  ///< the signal that killed it, else 0
  bool ended_by_launcher = false;  ///< the launcher sent it SIGTERM or SIGKILL
  std::string status;              ///< its last published status ("" when it published none)
  std::string error;               ///< the error message it reported, if any
};

/// The outcome of launch_local(): one report per rank and the first failure, if any.
struct LaunchResult {
  std::vector<WorkerReport> workers;
  std::optional<LaunchFailure> failure;
  [[nodiscard]] bool ok() const noexcept { return !failure.has_value(); }
};

/// The work of one rank; it runs in its own process.
using WorkerFunction = std::function<void(std::int32_t rank, WorkerChannel& channel)>;

/// Forks `options.workers` processes; rank r runs `work(r, channel)` and exits 0 when it returns,
/// or 1 when it throws (the exception's message reaches the launcher as the rank's error). The
/// calling process supervises until every worker is reaped: on the first failure (an error
/// message, a non-zero exit, a death by signal, the watchdog, or SIGINT/SIGTERM sent to the
/// launcher) it sends SIGTERM to every live worker, then SIGKILL after `options.grace`, and
/// returns that first failure. A worker's runtime error waits 0.3 s first: when another worker
/// dies meanwhile, the death is reported instead, since the error is most likely its echo (a
/// peer's "Connection reset by peer" can arrive before the dead worker can be reaped). Failures are
/// returned, not thrown: the caller picks the error type and exit code. Workers die with the
/// launcher (PR_SET_PDEATHSIG) and are always reaped.
///
/// Must be called while the process has a single thread (fork copies only the calling thread,
/// so a lock held by another thread would stay locked forever in the worker); throws
/// InternalError otherwise. Not reentrant: one launch at a time per process. A worker ends with
/// _exit() after flushing stdio, so the parent's atexit handlers and static destructors never run
/// in it; a worker that must flush something when it is ended installs its own SIGTERM handler.
/// Throws InvalidConfig for workers < 1 and BackendError when a worker cannot be started.
///
/// @code
/// exec::LaunchResult r = exec::launch_local(
///     {.workers = 4, .timeout = std::chrono::seconds(30)},
///     [&](std::int32_t rank, exec::WorkerChannel& channel) {
///       channel.set_status("task 12 (rank 1, F3): waiting for recv from rank 0");
///       run_rank(graph, rank);
///     });
/// if (!r.ok()) throw BackendError(r.failure->message);
/// @endcode
[[nodiscard]] LaunchResult launch_local(const LaunchOptions& options, const WorkerFunction& work);

}  // namespace metron::exec
