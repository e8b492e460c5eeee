#pragma once
// The CPU backend of the executor: the RankBackend interface over CpuStreams (a thread per
// stream, Note [cpu streams]) with real buffers for the graph's memory effects. What a task
// computes or moves is a CpuWork: libtorch and Gloo in a real run (cpu_run.h), plain functions
// in tests of the core.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metron/exec/cpu_streams.h"
#include "metron/exec/rank_backend.h"
#include "metron/exec/rank_program.h"

namespace metron::exec {

/// What the tasks of a CPU rank run on their stream's thread. Each blocks until done and gets
/// the launch: its task's tags (stage, chunk, microbatch, bucket), which a payload computing real
/// values needs to know what it computes (the model payload, issue 21), and for a collective its
/// ordinal (Note [rank program]), for a transfer its tag.
struct CpuWork {
  std::function<void(const Launch&, const ir::Compute&)> compute;
  std::function<void(const Launch&, const ir::Collective&)> collective;
  std::function<void(const Launch&, const ir::Send&)> send;
  std::function<void(const Launch&, const ir::Recv&)> recv;
};

/// One rank's device on the CPU.
class CpuBackend final : public RankBackend {
 public:
  /// Streams and hardware queues as `program` says. `timeout` bounds every host wait (a HostWait,
  /// the end of an iteration): past it, BackendError names what each stream is doing.
  CpuBackend(const RankProgram& program, CpuWork work, std::chrono::milliseconds timeout);

  void begin_iteration(std::span<const std::int32_t> buffer_users) override;
  Event create_event() override;
  void record_event(std::int32_t stream, Event event) override;
  void wait_event(std::int32_t stream, Event event) override;
  void launch(std::int32_t stream, const Launch& launch) override;
  void synchronize(Event event) override;
  IterationRecord end_iteration() override;
  [[nodiscard]] IterationRecord partial_record() const override;
  [[nodiscard]] std::string describe() const override;

 private:
  void allocate(const Launch& launch);
  void release(const Launch& launch);
  void run(const Launch& launch);

  CpuWork work_;
  std::chrono::milliseconds timeout_;
  /// By work item, in enqueue order (CpuStreams::timings). Written by the host thread, read by
  /// partial_record() from any thread.
  std::vector<ir::TaskId> launched_;
  mutable std::mutex launched_mutex_;

  mutable std::mutex memory_mutex_;       // stream threads allocate and free concurrently
  std::vector<std::int32_t> users_left_;  ///< by BufferId
  std::vector<std::unique_ptr<std::byte[]>> buffers_;  ///< by BufferId; null when free
  std::vector<std::int64_t> sizes_;                    ///< by BufferId, while allocated
  std::int64_t allocated_ = 0;
  std::int64_t peak_ = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> memory_;

  CpuStreams streams_;  // last: its threads run the members above, so it stops first
};

}  // namespace metron::exec
