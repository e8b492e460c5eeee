#include "metron/exec/rank_run.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "failure_flush.h"

namespace metron::exec {
namespace {

/// Publishes what the backend's streams are doing whenever it changes, from a thread of its own:
/// the host thread may be blocked for good (that is what the watchdog is for), and a status that
/// stops changing is how a hang shows, so an unchanged status is not published again.
class StatusMonitor {
 public:
  StatusMonitor(const RankBackend& backend, const StatusSink& sink)
      : backend_(backend), sink_(sink), thread_([this] { loop(); }) {}
  ~StatusMonitor() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  StatusMonitor(const StatusMonitor&) = delete;
  StatusMonitor& operator=(const StatusMonitor&) = delete;
  StatusMonitor(StatusMonitor&&) = delete;
  StatusMonitor& operator=(StatusMonitor&&) = delete;

  /// The iteration the host is in, as the status's prefix.
  /// Where the host is: at the barrier before `iteration`, or issuing and waiting for it.
  void set_iteration(std::int64_t iteration, bool at_barrier) {
    at_barrier_ = at_barrier;
    iteration_ = iteration;
  }

 private:
  void loop() {
    std::string last;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      std::string now = (at_barrier_ ? "at the barrier before iteration " : "iteration ") +
                        std::to_string(iteration_.load()) + ": " + backend_.describe();
      if (now != last) {
        sink_(now);
        last = std::move(now);
      }
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; });
    }
  }

  const RankBackend& backend_;
  const StatusSink& sink_;
  std::atomic<std::int64_t> iteration_{0};
  std::atomic<bool> at_barrier_{true};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

std::string iterations_key(std::int32_t rank) {
  return "metron/iterations/" + std::to_string(rank);
}

std::string host_key(std::int32_t rank) { return "metron/host/" + std::to_string(rank); }

// This machine's name: ranks that report the same one share a steady clock.
std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

}  // namespace

std::optional<MeasuredStep> run_rank_iterations(const ir::Graph& graph, std::int32_t rank,
                                                std::int32_t world_size, RankStore& world,
                                                RankExecutor& executor, RankBackend& backend,
                                                const RunOptions& options,
                                                const StatusSink& status) {
  std::vector<RankIteration> measured;
  std::mutex measured_mutex;  // the flush may read `measured` from its own thread
  const auto snapshot = [&] {
    std::vector<RankIteration> out;
    {
      const std::lock_guard<std::mutex> lock(measured_mutex);
      out = measured;
    }
    RankIteration& now = out.emplace_back();
    now.origin_ns = executor.origin_ns();
    now.record = backend.partial_record();
    return out;
  };
  detail::FailureFlush flush(snapshot, options.on_failure);
  try {
    StatusMonitor monitor(backend, status);
    const std::int64_t total = std::int64_t{options.warmup} + options.iterations;
    for (std::int64_t i = 0; i < total; ++i) {
      monitor.set_iteration(i, /*at_barrier=*/true);
      // Every rank starts the iteration together: its origin is the one instant they share
      // (Note [measured step]).
      world.barrier();
      monitor.set_iteration(i, /*at_barrier=*/false);
      RankIteration it = executor.run(backend, i);
      if (i >= options.warmup) {
        const std::lock_guard<std::mutex> lock(measured_mutex);
        measured.push_back(std::move(it));
      }
    }
  } catch (...) {
    flush.flush_now();
    throw;
  }
  status("gathering the measurements at rank 0");
  world.store_set(iterations_key(rank), encode_iterations(measured));
  world.store_set(host_key(rank), host_name());
  std::optional<MeasuredStep> out;
  if (rank == 0) {
    std::vector<std::vector<RankIteration>> all;
    bool one_machine = true;
    for (std::int32_t r = 0; r < world_size; ++r) {
      all.push_back(decode_iterations(world.store_get(iterations_key(r))));
      one_machine = one_machine && world.store_get(host_key(r)) == host_name();
    }
    out = measured_step(graph, all, one_machine);
  }
  // Nobody leaves before rank 0 has read everything from the store it hosts.
  world.barrier();
  return out;
}

}  // namespace metron::exec
