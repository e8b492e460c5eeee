#pragma once
// The CUDA backend of the executor: the RankBackend interface over CUDA streams and events, with
// the graph's memory effects as stream-ordered allocations, compute through CudaCompute and
// communication through NcclWorld. CUDA types stay behind a pimpl.
//
// Note [cuda backend]:
//   - Streams: one non-blocking CUDA stream per IR stream of the rank. Dependencies across streams
//     are events created with cudaEventDisableTiming: recorded after the dependency,
//     cudaStreamWaitEvent before the task (Note [rank program]). The hardware-queue count is
//     CUDA_DEVICE_MAX_CONNECTIONS, which only takes effect when it is set before the process's
//     first CUDA call: the runs set it from the program first; set_hardware_queues() is the one
//     place.
//   - Timing: each task is bracketed by two timing events on its stream, and the device's times
//     are placed on the host's steady clock through an origin event, recorded at the start of
//     the iteration with the device idle between two host reads (spinning on cudaEventQuery, so
//     the reads are a few microseconds apart). Where between the reads the device reached the
//     origin is then bounded by what the host saw: no task started before the host began
//     enqueueing it, and none ended after a host wait on it (or the end of the iteration)
//     returned. The origin is the earliest host time those bounds allow (the middle when clock
//     jitter makes them cross), so every time of the iteration is consistent with the host's
//     own issue times, within the reads' distance. (The issue asked for the origin "between two
//     host clock reads"; the bounds only narrow it further.)
//   - Memory: a task's buffers are cudaMallocAsync'ed on its stream before it runs and
//     cudaFreeAsync'ed on the stream of the task that lowers their user count to zero, after it
//     runs. The count drops in the host's issue order, so a buffer is freed after the last user
//     the host issued; a user on another stream may still run then, which is harmless here
//     because the payload never touches these buffers (they stand for the memory, not for data).
//     The pool keeps what it freed (release threshold: unlimited), so no allocation waits for the
//     driver; the peak is the pool's high-water mark of memory in use (cudaMemPoolAttrUsedMemHigh,
//     reset at each iteration), which rounds each allocation up to the pool's granularity. The
//     memory samples are the graph's bytes at each allocating task's start and freeing task's end.
//   - Waiting: a HostWait and the end of an iteration poll their events and streams with
//     cudaEventQuery/cudaStreamQuery and the communicator's asynchronous errors; past the timeout
//     the world is aborted (ncclCommAbort) and BackendError names what each stream is doing.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "metron/exec/rank_backend.h"
#include "metron/exec/rank_program.h"

namespace metron::exec::cuda {

class CudaCompute;
class NcclWorld;

/// One rank's device on a GPU (Note [cuda backend]).
class CudaBackend final : public RankBackend {
 public:
  /// Streams as `program` says, on `device`. `world` may be null for a graph without
  /// communication. Both must outlive the backend. `timeout` bounds every host wait.
  CudaBackend(const RankProgram& program, CudaCompute& compute, NcclWorld* world,
              std::chrono::milliseconds timeout, int device = 0);
  ~CudaBackend() override;

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
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sets CUDA_DEVICE_MAX_CONNECTIONS to `queues` for this process unless the user set it. Only
/// effective before the process's first CUDA call (Note [cuda backend]).
void set_hardware_queues(std::int32_t queues);

}  // namespace metron::exec::cuda
