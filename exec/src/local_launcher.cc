#include "metron/exec/local_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <thread>
#include <utility>

#include "metron/base/error.h"

namespace metron::exec {

// Note [launcher protocol]
// Each worker owns the write end of one pipe; the launcher reads the other end. A worker writes
// frames: one kind byte ('S' status, 'E' runtime error, 'I' input error), a 4-byte length in host
// order, then the payload. The launcher keeps the last status per rank, which is what a timeout or
// a death by signal reports, so it never has to ask a (possibly hung) worker anything: the
// answer is already in the pipe. poll() wakes on a frame, on a worker's exit (its pidfd, Linux 5.3
// and later; the pipe's EOF comes slightly before the exit can be reaped, so it is not enough) and
// on a forwarded signal; a short poll period backs these up where pidfds do not exist.

namespace {

constexpr std::size_t kFrameHeader = 5;
constexpr std::chrono::milliseconds kPollPeriod{50};
// How long a rank's runtime error waits for a peer's death that would explain it (fail()).
constexpr std::chrono::milliseconds kEchoWindow{300};

// The launcher's SIGINT/SIGTERM handler writes one byte here (the self-pipe trick), so that a
// signal wakes poll() without any work in the handler beyond async-signal-safe calls.
std::atomic<int> g_signal_pipe_write{-1};
std::atomic<int> g_received_signal{0};
std::atomic<bool> g_launch_active{false};

extern "C" void on_launcher_signal(int signo) {
  const int saved_errno = errno;
  g_received_signal.store(signo);
  const int fd = g_signal_pipe_write.load();
  if (fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

std::string errno_text(int err) { return std::strerror(err); }

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) {
      ::close(fd_);  // no retry on EINTR: on Linux the descriptor is closed either way
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read_end;
  Fd write_end;
};

// Both ends close on exec; the read end never blocks, so the launcher cannot hang on a worker.
Pipe make_pipe(const std::string& what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw BackendError("local launch: cannot create the pipe for " + what + ": " +
                       errno_text(errno));
  }
  Pipe p{Fd(fds[0]), Fd(fds[1])};
  const int flags = ::fcntl(p.read_end.get(), F_GETFL);
  ::fcntl(p.read_end.get(), F_SETFL, flags | O_NONBLOCK);
  return p;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::size_t count_threads() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 1;  // no /proc: cannot tell, assume the documented contract holds
  std::size_t n = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

/// The threads of this process once those that are exiting have gone. A thread that was just
/// joined (stop_blas_threads joins OpenBLAS's) is still listed in /proc/self/task for a moment:
/// the kernel wakes its joiner before it removes the task. So a count above 1 is taken again,
/// for up to 200 ms, before it counts as a thread that runs.
std::size_t threads_after_exits() {
  std::size_t n = count_threads();
  for (int tries = 0; n > 1 && tries < 20; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = count_threads();
  }
  return n;
}

std::string signal_name(int sig) {
  const char* text = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (text != nullptr ? std::string(" (") + text + ")" : "");
}

// "0.5 s", "60 s", "1.25 s".
std::string seconds_text(std::chrono::milliseconds ms) {
  const auto count = ms.count();
  std::string out = std::to_string(count / 1000);
  if (const auto frac = count % 1000; frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    digits.erase(digits.find_last_not_of('0') + 1);
    out += "." + digits;
  }
  return out + " s";
}

// Installs the forwarding handlers for SIGINT and SIGTERM for the length of one launch, and
// SIGCHLD's default action (under SIG_IGN the kernel would reap the workers before we could
// read their exit status). Restores everything it changed.
class SignalGuard {
 public:
  SignalGuard() : pipe_(make_pipe("signals")) {
    const int flags = ::fcntl(pipe_.write_end.get(), F_GETFL);
    ::fcntl(pipe_.write_end.get(), F_SETFL, flags | O_NONBLOCK);
    g_received_signal.store(0);
    g_signal_pipe_write.store(pipe_.write_end.get());
    struct sigaction action {};
    action.sa_handler = on_launcher_signal;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGCHLD, &dfl, &old_chld_);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  ~SignalGuard() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    g_signal_pipe_write.store(-1);
  }
  [[nodiscard]] int read_fd() const noexcept { return pipe_.read_end.get(); }
  [[nodiscard]] int write_fd() const noexcept { return pipe_.write_end.get(); }

 private:
  Pipe pipe_;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_chld_ {};
};

// A descriptor that becomes readable when `pid` exits, or an empty Fd on kernels without pidfds.
Fd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return Fd();
#endif
}

struct Worker {
  pid_t pid = -1;
  Fd read_end;
  Fd pidfd;
  std::string buffer;  // bytes read but not yet a whole frame
  bool reaped = false;
  WorkerReport report;
};

// The child side: becomes rank `rank` and never returns. Only the forked copy of the calling
// thread exists here, which is why launch_local insists on a single-threaded caller.
[[noreturn]] void run_worker(std::int32_t rank, int fd, pid_t parent, const sigset_t& old_mask,
                             const WorkerFunction& work) {
  // Dies with the launcher; the getppid() check closes the race with a launcher that died
  // before prctl() ran.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  g_signal_pipe_write.store(-1);
  g_launch_active.store(false);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  int code = 0;
  WorkerChannel channel(rank, fd);
  try {
    work(rank, channel);
  } catch (const Error& e) {
    channel.report_error(e.what(), e.is_input_error());
    code = 1;
  } catch (const std::exception& e) {
    channel.report_error(e.what());
    code = 1;
  } catch (...) {
    channel.report_error("unknown exception");
    code = 1;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // _exit: the parent's atexit handlers and static destructors are not this process's to run.
  ::_exit(code);
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, const SignalGuard& signals)
      : options_(options), signals_(signals) {}

  void start(const WorkerFunction& work);
  LaunchResult supervise();

 private:
  using Clock = std::chrono::steady_clock;

  void start_one(std::int32_t rank, const WorkerFunction& work);
  void abandon_started() noexcept;
  void poll_once();
  void drain(Worker& w);
  void handle_frame(Worker& w, char kind, std::string payload);
  void reap();
  void classify_exit(Worker& w, int status);
  void check_signals();
  void check_watchdog();
  void escalate();
  void fail(LaunchFailure failure);
  void settle_pending_error(bool now);
  [[nodiscard]] std::string status_list(const std::string& headline) const;
  [[nodiscard]] std::string last_words(const Worker& w) const;

  const LaunchOptions& options_;
  const SignalGuard& signals_;
  std::vector<Worker> workers_;
  std::optional<LaunchFailure> failure_;
  Clock::time_point last_progress_ = Clock::now();
  std::optional<Clock::time_point> kill_at_;  // set once the others are being ended
  bool killed_ = false;
  // A rank's runtime error waiting out kEchoWindow before it becomes the failure (fail()).
  std::optional<LaunchFailure> pending_error_;
  Clock::time_point pending_until_;
};

void Supervisor::start(const WorkerFunction& work) {
  workers_.reserve(static_cast<std::size_t>(options_.workers));
  // Whatever is buffered now would otherwise be written once by every worker as well.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  try {
    for (std::int32_t rank = 0; rank < options_.workers; ++rank) start_one(rank, work);
  } catch (...) {
    abandon_started();
    throw;
  }
  last_progress_ = Clock::now();
}

void Supervisor::start_one(std::int32_t rank, const WorkerFunction& work) {
  Pipe pipe = make_pipe("rank " + std::to_string(rank));
  // Blocked across fork so that a signal cannot run the launcher's handler inside a worker
  // before the worker has restored the default action.
  sigset_t block;
  sigset_t old_mask;
  ::sigemptyset(&block);
  ::sigaddset(&block, SIGINT);
  ::sigaddset(&block, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (Worker& other : workers_) {
      other.read_end.reset();
      other.pidfd.reset();
    }
    pipe.read_end.reset();
    ::close(signals_.read_fd());
    ::close(signals_.write_fd());
    run_worker(rank, pipe.write_end.get(), parent, old_mask, work);
  }
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    throw BackendError("local launch: cannot start the worker of rank " + std::to_string(rank) +
                       " of " + std::to_string(options_.workers) +
                       ": fork: " + errno_text(fork_errno));
  }
  Worker& w = workers_.emplace_back();
  w.pid = pid;
  w.read_end = std::move(pipe.read_end);
  w.pidfd = open_pidfd(pid);
  w.report.rank = rank;
  w.report.pid = pid;
}

// A launch that failed half-way: the workers already started must not outlive it.
void Supervisor::abandon_started() noexcept {
  for (Worker& w : workers_) ::kill(w.pid, SIGKILL);
  for (Worker& w : workers_) {
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

LaunchResult Supervisor::supervise() {
  auto live = [&] {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.reaped; });
  };
  while (live()) {
    poll_once();
    check_signals();
    for (Worker& w : workers_) drain(w);
    reap();
    settle_pending_error(false);
    check_watchdog();
    escalate();
  }
  settle_pending_error(true);
  LaunchResult result;
  for (Worker& w : workers_) result.workers.push_back(std::move(w.report));
  result.failure = std::move(failure_);
  return result;
}

// Waits until a worker writes or exits, a signal arrives, or the next deadline (watchdog or
// SIGKILL) comes, whichever is first, and never longer than kPollPeriod.
void Supervisor::poll_once() {
  std::vector<pollfd> fds;
  fds.push_back({signals_.read_fd(), POLLIN, 0});
  for (const Worker& w : workers_) {
    if (w.read_end.get() >= 0) fds.push_back({w.read_end.get(), POLLIN, 0});
    if (!w.reaped && w.pidfd.get() >= 0) fds.push_back({w.pidfd.get(), POLLIN, 0});
  }
  const auto now = Clock::now();
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kPollPeriod);
  if (options_.timeout.count() > 0 && !failure_) {
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(last_progress_ +
                                                                       options_.timeout - now));
  }
  if (kill_at_ && !killed_) {
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*kill_at_ - now));
  }
  const int timeout_ms =
      static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, wait.count()));
  // EINTR (a forwarded signal) just means: look at everything again.
  ::poll(fds.data(), fds.size(), timeout_ms);
}

void Supervisor::drain(Worker& w) {
  char chunk[4096];
  while (w.read_end.get() >= 0) {
    const ssize_t n = ::read(w.read_end.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) w.read_end.reset();
    if (n == 0) w.read_end.reset();  // EOF: the worker (and every copy of its fd) is gone
    if (n <= 0) break;
    w.buffer.append(chunk, static_cast<std::size_t>(n));
  }
  while (w.buffer.size() >= kFrameHeader) {
    std::uint32_t size = 0;
    std::memcpy(&size, w.buffer.data() + 1, sizeof size);
    if (size > WorkerChannel::kMaxErrorBytes) {  // not our protocol: drop what cannot be parsed
      w.buffer.clear();
      break;
    }
    if (w.buffer.size() < kFrameHeader + size) break;
    const char kind = w.buffer[0];
    std::string payload = w.buffer.substr(kFrameHeader, size);
    w.buffer.erase(0, kFrameHeader + size);
    handle_frame(w, kind, std::move(payload));
  }
}

void Supervisor::handle_frame(Worker& w, char kind, std::string payload) {
  if (kind == 'S') {
    w.report.status = std::move(payload);
    last_progress_ = Clock::now();
    return;
  }
  if (kind != 'E' && kind != 'I') return;
  w.report.error = payload;
  fail({.kind = FailureKind::kError,
        .rank = w.report.rank,
        .input_error = kind == 'I',
        .message = "rank " + std::to_string(w.report.rank) + ": " + payload});
}

void Supervisor::reap() {
  for (Worker& w : workers_) {
    if (w.reaped) continue;
    int status = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(w.pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got == 0) continue;
    w.reaped = true;
    // What it wrote before dying is all in the pipe now; read it before judging the exit, so that
    // a worker that threw is reported by its message rather than by its exit code.
    drain(w);
    w.read_end.reset();
    w.pidfd.reset();
    last_progress_ = Clock::now();
    if (got > 0) classify_exit(w, status);
  }
}

void Supervisor::classify_exit(Worker& w, int status) {
  const std::string rank = "rank " + std::to_string(w.report.rank);
  if (WIFEXITED(status)) {
    w.report.exit_code = WEXITSTATUS(status);
    // A worker that reported an error exits non-zero because of it: the error is the report.
    if (w.report.exit_code != 0 && !w.report.ended_by_launcher && w.report.error.empty()) {
      fail({.kind = FailureKind::kExit,
            .rank = w.report.rank,
            .message = rank + " exited with status " + std::to_string(w.report.exit_code) +
                       last_words(w)});
    }
  } else if (WIFSIGNALED(status)) {
    w.report.signal = WTERMSIG(status);
    if (!w.report.ended_by_launcher) {
      fail({.kind = FailureKind::kSignal,
            .rank = w.report.rank,
            .signal = w.report.signal,
            .message = rank + " was killed by " + signal_name(w.report.signal) + last_words(w)});
    }
  }
}

std::string Supervisor::last_words(const Worker& w) const {
  return w.report.status.empty() ? std::string(" before publishing a status")
                                 : " while " + w.report.status;
}

void Supervisor::check_signals() {
  char bytes[64];
  bool got = false;
  ssize_t n = 0;
  while ((n = ::read(signals_.read_fd(), bytes, sizeof bytes)) > 0 || (n < 0 && errno == EINTR)) {
    got = got || n > 0;
  }
  if (!got) return;
  const int sig = g_received_signal.load();
  if (failure_) {
    killed_ = false;  // asked again while ending the run: do not wait out the grace period
    kill_at_ = Clock::now();
    return;
  }
  fail({.kind = FailureKind::kInterrupted,
        .signal = sig,
        .message =
            status_list("interrupted by " + signal_name(sig) + "; last status of each rank:")});
}

void Supervisor::check_watchdog() {
  if (failure_ || options_.timeout.count() <= 0) return;
  if (Clock::now() - last_progress_ < options_.timeout) return;
  fail({.kind = FailureKind::kTimeout,
        .message = status_list("no progress for " + seconds_text(options_.timeout) +
                               "; last status of each rank:")});
}

std::string Supervisor::status_list(const std::string& headline) const {
  std::vector<std::string> lines;
  for (const Worker& w : workers_) {
    std::string line = "rank " + std::to_string(w.report.rank) + ": ";
    if (w.reaped && w.report.exit_code == 0) {
      line += "finished";
    } else {
      line += w.report.status.empty() ? "(no status published)" : w.report.status;
    }
    lines.push_back(std::move(line));
  }
  return format_problem_list(headline, lines);
}

void Supervisor::fail(LaunchFailure failure) {
  if (failure_) return;
  // A rank's runtime error is often the echo of a peer's death (Gloo's "Connection reset by
  // peer"): the kernel closes a dying process's sockets before its parent can reap it, so the
  // echo may be read first. It waits kEchoWindow for a death that would explain it.
  if (failure.kind == FailureKind::kError && !failure.input_error) {
    if (!pending_error_) {
      pending_error_ = std::move(failure);
      pending_until_ = Clock::now() + kEchoWindow;
    }
    return;
  }
  failure_ = std::move(failure);
}

void Supervisor::settle_pending_error(bool now) {
  if (failure_ || !pending_error_) return;
  if (now || Clock::now() >= pending_until_) failure_ = std::move(pending_error_);
}

// After the first failure: SIGTERM to every live worker at once, SIGKILL to the survivors after
// the grace period. A rank that reported its own error is left to exit by itself (it is on its
// way out, and its exit status is worth keeping) and only gets the SIGKILL.
void Supervisor::escalate() {
  if (!failure_) return;
  if (!kill_at_) {
    kill_at_ = Clock::now() + options_.grace;
    for (Worker& w : workers_) {
      if (w.reaped || !w.report.error.empty()) continue;
      w.report.ended_by_launcher = true;
      ::kill(w.pid, SIGTERM);
    }
  }
  if (killed_ || Clock::now() < *kill_at_) return;
  killed_ = true;
  for (Worker& w : workers_) {
    if (w.reaped) continue;
    w.report.ended_by_launcher = true;
    ::kill(w.pid, SIGKILL);
  }
}

}  // namespace

void WorkerChannel::set_status(std::string_view status) {
  std::string line(status.substr(0, kMaxStatusBytes));
  std::replace(line.begin(), line.end(), '\n', ' ');
  send('S', line);
}

void WorkerChannel::report_error(std::string_view message, bool input_error) {
  send(input_error ? 'I' : 'E', message.substr(0, kMaxErrorBytes));
}

void WorkerChannel::send(char kind, std::string_view payload) {
  std::string frame(kFrameHeader + payload.size(), '\0');
  frame[0] = kind;
  const auto size = static_cast<std::uint32_t>(payload.size());
  std::memcpy(frame.data() + 1, &size, sizeof size);
  std::memcpy(frame.data() + kFrameHeader, payload.data(), payload.size());
  const std::lock_guard<std::mutex> lock(mutex_);
  // A failed write means the launcher is gone, and PR_SET_PDEATHSIG is ending this process.
  (void)write_all(fd_, frame.data(), frame.size());
}

const char* to_string(FailureKind kind) noexcept {
  switch (kind) {
    case FailureKind::kError:
      return "error";
    case FailureKind::kExit:
      return "exit";
    case FailureKind::kSignal:
      return "signal";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

LaunchResult launch_local(const LaunchOptions& options, const WorkerFunction& work) {
  if (options.workers < 1) {
    throw InvalidConfig("local launch: " + std::to_string(options.workers) +
                        " workers; expected at least 1");
  }
  if (options.timeout.count() < 0 || options.grace.count() < 0) {
    throw InvalidConfig("local launch: negative timeout or grace period; expected 0 or more");
  }
  if (const std::size_t threads = threads_after_exits(); threads > 1) {
    throw InternalError(__FILE__, __LINE__,
                        "launch_local called with " + std::to_string(threads) +
                            " threads running; it must fork before the process starts threads");
  }
  if (g_launch_active.exchange(true)) {
    throw InternalError(__FILE__, __LINE__, "launch_local called while another launch runs");
  }
  struct Release {
    Release() = default;
    Release(const Release&) = delete;
    Release& operator=(const Release&) = delete;
    ~Release() { g_launch_active.store(false); }
  } release;
  const SignalGuard signals;
  Supervisor supervisor(options, signals);
  supervisor.start(work);
  return supervisor.supervise();
}

}  // namespace metron::exec
