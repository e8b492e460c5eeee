#pragma once
// The backend interface: what the executor's core asks of one rank's device. The core
// (rank_executor.h) walks the rank's program and calls these; the CPU backend implements them
// with threads, libtorch and Gloo (cpu_backend.h), a CUDA backend with CUDA streams, events,
// stream-ordered allocations and NCCL. Nothing here names a backend's types.

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::exec {

/// One task handed to a stream.
struct Launch {
  ir::TaskId id;
  const ir::Task* task = nullptr;  ///< the graph's task (the graph outlives the backend)
  std::string label;               ///< what failure messages and the watchdog call it
  /// Collective: its place in the rank's order of its group over the whole run (iteration i
  /// continues after iteration i − 1's), Note [rank program].
  std::int64_t ordinal = -1;
  std::int32_t tag = -1;  ///< send or receive: matches the peer's transfer
  /// The buffers the task allocates when it starts (id, bytes), and every buffer whose user
  /// count it lowers when it completes (its allocates, then its uses).
  std::vector<std::pair<ir::BufferId, std::int64_t>> allocates;
  std::vector<ir::BufferId> releases;
};

/// When a launched task ran, on the host's steady clock (nanoseconds since its epoch).
struct LaunchTiming {
  ir::TaskId id;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// What a backend measured over one iteration.
struct IterationRecord {
  std::vector<LaunchTiming> launches;  ///< one per launched task
  /// (steady-clock ns, bytes allocated by tasks) at every allocation and free.
  std::vector<std::pair<std::int64_t, std::int64_t>> memory;
  std::int64_t peak_memory_bytes = 0;  ///< the most bytes allocated at once
};

/// One rank's device, as the core drives it. The core calls it from one host thread; failures
/// are BackendError naming the task (its Launch::label) that failed or blocks.
class RankBackend {
 public:
  using Event = std::int32_t;

  RankBackend() = default;
  virtual ~RankBackend() = default;
  RankBackend(const RankBackend&) = delete;
  RankBackend& operator=(const RankBackend&) = delete;
  RankBackend(RankBackend&&) = delete;
  RankBackend& operator=(RankBackend&&) = delete;

  /// Starts an iteration: buffer user counts (by BufferId, RankProgram::buffer_users) reset,
  /// nothing recorded yet.
  virtual void begin_iteration(std::span<const std::int32_t> buffer_users) = 0;
  /// A new event (cudaEventCreate), recorded once.
  virtual Event create_event() = 0;
  /// Records `event` on `stream` after everything enqueued there so far (cudaEventRecord).
  virtual void record_event(std::int32_t stream, Event event) = 0;
  /// Later work of `stream` waits for `event` (cudaStreamWaitEvent); its record came first.
  virtual void wait_event(std::int32_t stream, Event event) = 0;
  /// Enqueues a task on `stream`: it allocates its buffers, runs (compute, collective, send or
  /// receive), lowers the user counts of `releases` (a count reaching 0 frees the buffer), and
  /// is timed.
  virtual void launch(std::int32_t stream, const Launch& launch) = 0;
  /// Blocks the host until `event` is set (a HostWait: cudaEventSynchronize).
  virtual void synchronize(Event event) = 0;
  /// Blocks until everything enqueued has completed, and returns what the iteration measured.
  virtual IterationRecord end_iteration() = 0;
  /// What the current iteration has recorded so far, without waiting: the tasks that completed
  /// and the memory samples. Safe from any thread; for flushing a failed run's traces.
  [[nodiscard]] virtual IterationRecord partial_record() const = 0;
  /// What each stream is doing or waiting for, one line, for the watchdog's status.
  [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace metron::exec
