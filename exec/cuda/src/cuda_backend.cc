#include "metron/exec/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "cuda_check.h"
#include "metron/base/error.h"
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/nccl_world.h"
#include "metron/exec/steady_time.h"

namespace metron::exec::cuda {
namespace {

using detail::check;
using exec::detail::now_ns;

/// A launched task of the current iteration and the timing events around it.
struct Launched {
  ir::TaskId id;
  std::int32_t stream = 0;
  std::string label;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  std::int64_t issued_ns = 0;  ///< host clock when the host began enqueueing it
};

/// The host saw launch `launch` complete by `at_ns` (a host wait or the iteration's end returned).
struct Release {
  std::size_t launch = 0;
  std::int64_t at_ns = 0;
};

/// A change of the graph's allocated bytes: at the start or the end of launch `launch`.
struct MemoryChange {
  std::size_t launch = 0;
  bool at_end = false;
  std::int64_t delta = 0;
};

bool done(cudaError_t status) {
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

}  // namespace

struct CudaBackend::Impl {
  CudaCompute& compute;
  NcclWorld* world = nullptr;
  std::chrono::milliseconds timeout;
  int device = 0;
  std::vector<cudaStream_t> streams;
  std::vector<std::string> stream_names;
  cudaMemPool_t pool = nullptr;
  cudaEvent_t origin = nullptr;
  /// Host clock read right before and right after the origin event completed; the host time of
  /// the origin, between them, is calibrated at the end of the iteration (Note [cuda backend]).
  std::int64_t origin_before_ns = 0;
  std::int64_t origin_after_ns = 0;

  std::vector<cudaEvent_t> order_events;  ///< without timing, reused every iteration
  std::size_t next_order_event = 0;
  /// By order event: the launch recorded before it on its stream (-1: none), so that a host
  /// wait on the event tells when the host saw that launch complete.
  std::vector<std::int64_t> event_after_launch;
  std::vector<std::int64_t> last_launch_on_stream;  ///< by stream, this iteration
  std::vector<Release> releases;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timing_events;  ///< by launch index

  mutable std::mutex mutex;  ///< guards `launched` and `changes`: read from other threads
  std::vector<Launched> launched;
  std::vector<MemoryChange> changes;

  std::vector<std::int32_t> users_left;  ///< by BufferId
  std::vector<void*> buffers;            ///< by BufferId; null when free
  std::vector<std::int64_t> sizes;       ///< by BufferId, while allocated

  Impl(CudaCompute& c, NcclWorld* w, std::chrono::milliseconds t, int d)
      : compute(c), world(w), timeout(t), device(d) {}

  ~Impl() {
    for (cudaStream_t s : streams) static_cast<void>(cudaStreamSynchronize(s));
    for (void* b : buffers) {
      if (b != nullptr) static_cast<void>(cudaFreeAsync(b, streams.empty() ? nullptr : streams[0]));
    }
    for (cudaStream_t s : streams) static_cast<void>(cudaStreamSynchronize(s));
    for (cudaEvent_t e : order_events) static_cast<void>(cudaEventDestroy(e));
    for (auto [a, b] : timing_events) {
      static_cast<void>(cudaEventDestroy(a));
      static_cast<void>(cudaEventDestroy(b));
    }
    if (origin != nullptr) static_cast<void>(cudaEventDestroy(origin));
    for (cudaStream_t s : streams) static_cast<void>(cudaStreamDestroy(s));
    if (pool != nullptr) static_cast<void>(cudaMemPoolDestroy(pool));
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;

  // Nanoseconds from the origin to a timing event recorded after it, on the device's clock.
  [[nodiscard]] std::int64_t since_origin_ns(cudaEvent_t event) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, origin, event), "cudaEventElapsedTime");
    return static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }

  // The host time of the origin (Note [cuda backend]): within the reads around it, no later
  // than any completion the host saw allows, no earlier than any task's issue allows.
  [[nodiscard]] std::int64_t origin_host_ns(const std::vector<std::int64_t>& start,
                                            const std::vector<std::int64_t>& end) const {
    std::int64_t low = origin_before_ns;
    std::int64_t high = origin_after_ns;
    for (std::size_t i = 0; i < launched.size(); ++i) {
      if (start[i] >= 0) low = std::max(low, launched[i].issued_ns - start[i]);
    }
    for (const Release& r : releases) {
      if (r.launch < end.size() && end[r.launch] >= 0)
        high = std::min(high, r.at_ns - end[r.launch]);
    }
    // Clock jitter can make the bounds cross by a few hundred nanoseconds: split the difference.
    return low <= high ? low : low + (high - low) / 2;
  }

  [[nodiscard]] std::string describe() const {
    std::vector<std::string> state(streams.size(), "idle");
    std::vector<bool> settled(streams.size(), false);
    {
      const std::lock_guard<std::mutex> lock(mutex);
      for (const Launched& l : launched) {
        const auto s = static_cast<std::size_t>(l.stream);
        // An idle stream says how far it got, as the CPU backend's do: a hung peer's last
        // status is often sampled between tasks.
        if (!settled[s]) state[s] = "idle after " + l.label;
        if (settled[s] || cudaEventQuery(l.end) == cudaSuccess) continue;
        settled[s] = true;
        state[s] =
            (cudaEventQuery(l.start) == cudaSuccess ? "running " : "waiting before ") + l.label;
      }
    }
    static_cast<void>(cudaGetLastError());
    std::string out;
    for (std::size_t s = 0; s < streams.size(); ++s) {
      if (!out.empty()) out += "; ";
      out += "stream " + stream_names[s] + ": " + state[s];
    }
    return out;
  }

  // Polls `query` until it reports completion; past the timeout, or when NCCL reports an error,
  // aborts the communicators and throws naming what each stream is doing.
  void wait(const std::function<cudaError_t()>& query, const std::string& what) {
    const std::int64_t deadline =
        now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
    for (std::int64_t spins = 0;; ++spins) {
      if (done(query())) return;
      if (world != nullptr) {
        const std::string error = world->async_error();
        if (!error.empty()) {
          const std::string status = describe();
          world->abort();
          throw BackendError("cuda backend: NCCL failed while waiting for " + what + " (" + error +
                             "); " + status);
        }
      }
      if (now_ns() > deadline) {
        const std::string status = describe();
        if (world != nullptr) world->abort();
        throw BackendError("cuda backend: timed out after " + std::to_string(timeout.count()) +
                           " ms waiting for " + what + "; " + status);
      }
      // Spin briefly (a HostWait's latency is part of what is measured), then back off.
      if (spins < 2000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  // A launch that failed before it ran: its timing events may still hold an earlier
  // iteration's times, so it is not reported.
  void forget_last_launch() {
    const std::lock_guard<std::mutex> lock(mutex);
    launched.pop_back();
  }

  void allocate(const Launch& launch, std::size_t index, cudaStream_t stream) {
    for (const auto& [buffer, bytes] : launch.allocates) {
      if (bytes <= 0) continue;
      void* memory = nullptr;
      check(cudaMallocFromPoolAsync(&memory, static_cast<std::size_t>(bytes), pool, stream),
            "cudaMallocFromPoolAsync", "buffer " + std::to_string(buffer.value()));
      buffers[buffer.index()] = memory;
      sizes[buffer.index()] = bytes;
      const std::lock_guard<std::mutex> lock(mutex);
      changes.push_back({index, false, bytes});
    }
  }

  void release(const Launch& launch, std::size_t index, cudaStream_t stream) {
    for (const ir::BufferId buffer : launch.releases) {
      std::int32_t& left = users_left[buffer.index()];
      if (--left > 0) continue;
      METRON_ASSERT(left == 0, "cuda backend: buffer " + std::to_string(buffer.value()) +
                                   " released more often than it has users");
      void*& memory = buffers[buffer.index()];
      if (memory == nullptr) continue;  // a buffer of 0 bytes
      check(cudaFreeAsync(memory, stream), "cudaFreeAsync",
            "buffer " + std::to_string(buffer.value()));
      memory = nullptr;
      const std::lock_guard<std::mutex> lock(mutex);
      changes.push_back({index, true, -sizes[buffer.index()]});
    }
  }

  void run(const Launch& launch, std::int32_t stream_index, cudaStream_t stream) {
    const ir::Task& task = *launch.task;
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      compute.enqueue(*c, stream_index, stream);
      return;
    }
    if (world == nullptr) {
      throw BackendError("cuda backend: the task communicates but the run has no NCCL world");
    }
    if (const auto* g = std::get_if<ir::Collective>(&task.op)) {
      world->collective(g->group.value(), launch.ordinal, *g, stream);
    } else if (const auto* s = std::get_if<ir::Send>(&task.op)) {
      world->send(s->peer.value(), s->bytes, stream);
    } else if (const auto* r = std::get_if<ir::Recv>(&task.op)) {
      world->recv(r->peer.value(), r->bytes, stream);
    }
  }

  IterationRecord record(bool complete_only) const {
    IterationRecord out;
    const std::lock_guard<std::mutex> lock(mutex);
    // Device times from the origin first (-1: not complete), host times once it is placed.
    std::vector<std::int64_t> start(launched.size(), -1);
    std::vector<std::int64_t> end(launched.size(), -1);
    for (std::size_t i = 0; i < launched.size(); ++i) {
      const Launched& l = launched[i];
      if (complete_only && cudaEventQuery(l.end) != cudaSuccess) continue;
      start[i] = since_origin_ns(l.start);
      end[i] = since_origin_ns(l.end);
    }
    static_cast<void>(cudaGetLastError());
    const std::int64_t origin_ns = origin_host_ns(start, end);
    for (std::size_t i = 0; i < launched.size(); ++i) {
      if (start[i] < 0) continue;
      start[i] += origin_ns;
      end[i] += origin_ns;
      out.launches.push_back({launched[i].id, start[i], end[i]});
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> deltas;
    for (const MemoryChange& c : changes) {
      if (c.launch >= launched.size()) continue;
      const std::int64_t at = c.at_end ? end[c.launch] : start[c.launch];
      if (at >= 0) deltas.emplace_back(at, c.delta);
    }
    // Allocations before frees at one instant, as the simulator counts them.
    std::stable_sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    std::int64_t allocated = 0;
    for (const auto& [at, delta] : deltas) {
      allocated += delta;
      out.memory.emplace_back(at, allocated);
      out.peak_memory_bytes = std::max(out.peak_memory_bytes, allocated);
    }
    return out;
  }
};

CudaBackend::CudaBackend(const RankProgram& program, CudaCompute& compute, NcclWorld* world,
                         std::chrono::milliseconds timeout, int device)
    : impl_(std::make_unique<Impl>(compute, world, timeout, device)) {
  check(cudaSetDevice(device), "cudaSetDevice", "device " + std::to_string(device));
  impl_->stream_names = program.stream_names;
  for (std::size_t s = 0; s < program.stream_names.size(); ++s) {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    impl_->streams.push_back(stream);
  }
  if (impl_->streams.empty()) {
    throw InvalidConfig("cuda backend: rank " + std::to_string(program.rank.value()) +
                        " has no streams");
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  check(cudaMemPoolCreate(&impl_->pool, &props), "cudaMemPoolCreate");
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  check(cudaMemPoolSetAttribute(impl_->pool, cudaMemPoolAttrReleaseThreshold, &keep),
        "cudaMemPoolSetAttribute");
  check(cudaEventCreate(&impl_->origin), "cudaEventCreate");
}

CudaBackend::~CudaBackend() = default;

void CudaBackend::begin_iteration(std::span<const std::int32_t> buffer_users) {
  Impl& d = *impl_;
  for (cudaStream_t s : d.streams) check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (void*& b : d.buffers) {
    // Buffers a previous (failed or unbalanced) iteration left allocated.
    if (b != nullptr) check(cudaFreeAsync(b, d.streams[0]), "cudaFreeAsync");
    b = nullptr;
  }
  check(cudaStreamSynchronize(d.streams[0]), "cudaStreamSynchronize");
  d.users_left.assign(buffer_users.begin(), buffer_users.end());
  d.event_after_launch.clear();
  d.last_launch_on_stream.assign(d.streams.size(), -1);
  d.buffers.assign(buffer_users.size(), nullptr);
  d.sizes.assign(buffer_users.size(), 0);
  {
    const std::lock_guard<std::mutex> lock(d.mutex);
    d.launched.clear();
    d.changes.clear();
    d.releases.clear();
  }
  d.next_order_event = 0;
  std::uint64_t zero = 0;
  check(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrUsedMemHigh, &zero),
        "cudaMemPoolSetAttribute");
  // The origin (Note [cuda backend]): the device is idle and reaches the event after the first
  // read and before the second.
  d.origin_before_ns = now_ns();
  check(cudaEventRecord(d.origin, d.streams[0]), "cudaEventRecord");
  while (!done(cudaEventQuery(d.origin))) {
  }
  d.origin_after_ns = now_ns();
}

RankBackend::Event CudaBackend::create_event() {
  Impl& d = *impl_;
  if (d.next_order_event == d.order_events.size()) {
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    d.order_events.push_back(event);
  }
  d.event_after_launch.resize(d.next_order_event + 1, -1);
  return static_cast<Event>(d.next_order_event++);
}

void CudaBackend::record_event(std::int32_t stream, Event event) {
  impl_->event_after_launch.at(static_cast<std::size_t>(event)) =
      impl_->last_launch_on_stream.at(static_cast<std::size_t>(stream));
  check(cudaEventRecord(impl_->order_events.at(static_cast<std::size_t>(event)),
                        impl_->streams.at(static_cast<std::size_t>(stream))),
        "cudaEventRecord");
}

void CudaBackend::wait_event(std::int32_t stream, Event event) {
  check(cudaStreamWaitEvent(impl_->streams.at(static_cast<std::size_t>(stream)),
                            impl_->order_events.at(static_cast<std::size_t>(event)), 0),
        "cudaStreamWaitEvent");
}

void CudaBackend::launch(std::int32_t stream, const Launch& launch) {
  Impl& d = *impl_;
  cudaStream_t s = d.streams.at(static_cast<std::size_t>(stream));
  std::size_t index = 0;
  {
    const std::lock_guard<std::mutex> lock(d.mutex);
    index = d.launched.size();
    if (index == d.timing_events.size()) {
      cudaEvent_t start = nullptr;
      cudaEvent_t end = nullptr;
      check(cudaEventCreate(&start), "cudaEventCreate");
      check(cudaEventCreate(&end), "cudaEventCreate");
      d.timing_events.emplace_back(start, end);
    }
    const auto [start, end] = d.timing_events[index];
    d.launched.push_back({launch.id, stream, launch.label, start, end, now_ns()});
  }
  d.last_launch_on_stream.at(static_cast<std::size_t>(stream)) = static_cast<std::int64_t>(index);
  const auto [start, end] = d.timing_events[index];
  try {
    check(cudaEventRecord(start, s), "cudaEventRecord");
    d.allocate(launch, index, s);
    d.run(launch, stream, s);
    d.release(launch, index, s);
    check(cudaEventRecord(end, s), "cudaEventRecord");
  } catch (const InvalidConfig& e) {
    d.forget_last_launch();
    throw InvalidConfig(launch.label + ": " + e.what());
  } catch (const BackendError& e) {
    d.forget_last_launch();
    throw BackendError(launch.label + ": " + e.what());
  }
}

void CudaBackend::synchronize(Event event) {
  Impl& d = *impl_;
  cudaEvent_t e = d.order_events.at(static_cast<std::size_t>(event));
  d.wait([e] { return cudaEventQuery(e); }, "a host wait");
  const std::int64_t launch = d.event_after_launch.at(static_cast<std::size_t>(event));
  if (launch < 0) return;
  const std::lock_guard<std::mutex> lock(d.mutex);
  d.releases.push_back({static_cast<std::size_t>(launch), now_ns()});
}

IterationRecord CudaBackend::end_iteration() {
  Impl& d = *impl_;
  for (std::size_t s = 0; s < d.streams.size(); ++s) {
    cudaStream_t stream = d.streams[s];
    d.wait([stream] { return cudaStreamQuery(stream); },
           "the end of the iteration on stream " + d.stream_names[s]);
    const std::int64_t last = d.last_launch_on_stream[s];
    if (last < 0) continue;
    const std::lock_guard<std::mutex> lock(d.mutex);
    d.releases.push_back({static_cast<std::size_t>(last), now_ns()});
  }
  IterationRecord out = d.record(/*complete_only=*/false);
  std::uint64_t high = 0;
  check(cudaMemPoolGetAttribute(d.pool, cudaMemPoolAttrUsedMemHigh, &high),
        "cudaMemPoolGetAttribute");
  out.peak_memory_bytes = static_cast<std::int64_t>(high);
  return out;
}

IterationRecord CudaBackend::partial_record() const {
  return impl_->record(/*complete_only=*/true);
}

std::string CudaBackend::describe() const { return impl_->describe(); }

void set_hardware_queues(std::int32_t queues) {
  if (queues < 1 || std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") != nullptr) return;
  // setenv copies its arguments; the context reads the variable when it is created.
  static_cast<void>(::setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(queues).c_str(), 0));
}

}  // namespace metron::exec::cuda
