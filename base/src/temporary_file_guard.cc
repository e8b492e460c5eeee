#include "metron/base/temporary_file_guard.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

// Note [temporaries on signals]
// write_file_atomically writes `.NAME.tmp.PID.N` beside the target and renames it into place. A
// SIGINT (Ctrl-C) or SIGTERM (a job scheduler's timeout) between the two would leave the
// temporary behind, since the default action ends the process without unwinding. So each
// temporary is registered here for as long as it exists, and a handler unlinks the registered
// ones and then re-raises the signal with its default action: the parent still sees "killed by
// SIGINT" (a shell stops a script on it), not an exit code we made up.
//
// The handler may run at any point of the main program, so it only does what POSIX allows in a
// signal handler: it reads lock-free atomics and fixed arrays (no allocation, no std::string)
// and calls unlink(), signal() and raise(). A slot is claimed free -> claimed, filled, then
// published as ready; the handler touches only ready slots, so it never reads a half-copied
// path. Unlinking a ready path whose file was not created yet, or was already renamed, is
// harmless: the name holds our PID and a counter, so no one else's file has it.

namespace metron {
namespace {

// Enough for every output of one run that write_files_atomically stages at once; a path longer
// than PATH_MAX could not be opened anyway.
constexpr std::size_t kMaxTemporaries = 64;
constexpr std::size_t kMaxPathBytes = PATH_MAX;

enum SlotState : int { kFree = 0, kClaimed = 1, kReady = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  std::array<char, kMaxPathBytes> path{};
};

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

// Constant-initialized (no constructor runs), so a handler can read it at any time.
std::array<Slot, kMaxTemporaries> registry;

constexpr std::array<int, 3> kCleanupSignals{SIGINT, SIGTERM, SIGHUP};

void remove_temporaries_and_reraise(int signal_number) {
  for (Slot& slot : registry) {
    if (slot.state.load(std::memory_order_acquire) == kReady) ::unlink(slot.path.data());
  }
  // The default action, then the same signal: it is blocked while this handler runs and is
  // delivered, killing the process, as soon as the handler returns.
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

TemporaryFileGuard::TemporaryFileGuard(const std::string& path) noexcept {
  if (path.size() >= kMaxPathBytes) return;
  for (std::size_t i = 0; i < registry.size(); ++i) {
    int expected = kFree;
    if (!registry[i].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
      continue;
    }
    std::memcpy(registry[i].path.data(), path.c_str(), path.size() + 1);
    registry[i].state.store(kReady, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

TemporaryFileGuard::TemporaryFileGuard(TemporaryFileGuard&& other) noexcept : slot_(other.slot_) {
  other.slot_ = -1;
}

TemporaryFileGuard::~TemporaryFileGuard() {
  if (slot_ >= 0) registry[static_cast<std::size_t>(slot_)].state.store(kFree);
}

void remove_temporaries_on_signals() {
  for (int signal_number : kCleanupSignals) {
    struct sigaction old_action {};
    if (::sigaction(signal_number, nullptr, &old_action) != 0) continue;
    // `nohup` and background jobs of a non-interactive shell ignore some of these on purpose.
    if (old_action.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_reraise;
    ::sigemptyset(&action.sa_mask);
    for (int other : kCleanupSignals) ::sigaddset(&action.sa_mask, other);
    ::sigaction(signal_number, &action, nullptr);
  }
}

std::size_t num_temporaries_in_flight() noexcept {
  std::size_t n = 0;
  for (const Slot& slot : registry) n += slot.state.load() == kReady ? 1U : 0U;
  return n;
}

}  // namespace metron
