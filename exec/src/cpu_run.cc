#include "metron/exec/cpu_run.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "failure_flush.h"
#include "metron/base/error.h"
#include "metron/exec/cpu_backend.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/exec/torch_compute.h"

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

std::optional<MeasuredStep> run_cpu_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                         const RunOptions& options, const StatusSink& status) {
  if (rendezvous.world_size != graph.num_ranks()) {
    throw InvalidConfig("executor: the graph has " + std::to_string(graph.num_ranks()) +
                        " ranks; expected the world size to match, got " +
                        std::to_string(rendezvous.world_size));
  }
  if (options.iterations < 1 || options.warmup < 0) {
    throw InvalidConfig(
        "executor: expected at least 1 measured iteration and no negative "
        "warm-up");
  }
  const ir::RankId rank{rendezvous.rank};
  status("connecting to the store at " + rendezvous.host + ":" + std::to_string(rendezvous.port));
  std::vector<std::vector<std::int32_t>> groups;
  for (const ir::Group& group : graph.data().groups) {
    std::vector<std::int32_t>& members = groups.emplace_back();
    for (const ir::RankId r : group.ranks) members.push_back(r.value());
  }
  // On a failure the world and the backend are left alive, never destroyed: a stream may be
  // blocked in a Gloo call that only a peer can end, and destroying them would wait for it, so
  // the error would never reach the launcher. The process ends right after the error anyway.
  auto world_owner = std::make_unique<GlooWorld>(rendezvous, groups);
  GlooWorld& world = *world_owner;
  TorchCompute compute({.intra_op_threads = options.intra_op_threads});
  RankExecutor executor(graph, rank_program(graph, rank));
  status("preparing the compute tasks' tensors");
  for (const ProgramStep& step : executor.program().steps) {
    if (const auto* c = std::get_if<ir::Compute>(&graph.task(step.task).op)) compute.prepare(*c);
  }
  CpuWork work{
      .compute = [&compute](const ir::Compute& c) { compute.run(c); },
      .collective = [&world](std::int32_t group, std::int64_t ordinal,
                             const ir::Collective& c) { world.collective(group, ordinal, c); },
      .send = [&world](std::int32_t peer, std::int64_t bytes,
                       std::int32_t tag) { world.send(peer, bytes, tag); },
      .recv = [&world](std::int32_t peer, std::int64_t bytes,
                       std::int32_t tag) { world.recv(peer, bytes, tag); },
  };
  std::vector<RankIteration> measured;
  std::mutex measured_mutex;  // the flush may read `measured` from its own thread
  auto backend = std::make_unique<CpuBackend>(executor.program(), std::move(work), options.timeout);
  const auto snapshot = [&] {
    std::vector<RankIteration> out;
    {
      const std::lock_guard<std::mutex> lock(measured_mutex);
      out = measured;
    }
    RankIteration& now = out.emplace_back();
    now.origin_ns = executor.origin_ns();
    now.record = backend->partial_record();
    return out;
  };
  detail::FailureFlush flush(snapshot, options.on_failure);
  try {
    StatusMonitor monitor(*backend, status);
    const std::int64_t total = std::int64_t{options.warmup} + options.iterations;
    for (std::int64_t i = 0; i < total; ++i) {
      monitor.set_iteration(i, /*at_barrier=*/true);
      // Every rank starts the iteration together: its origin is the one instant they share
      // (Note [measured step]).
      world.barrier();
      monitor.set_iteration(i, /*at_barrier=*/false);
      RankIteration it = executor.run(*backend, i);
      if (i >= options.warmup) {
        const std::lock_guard<std::mutex> lock(measured_mutex);
        measured.push_back(std::move(it));
      }
    }
  } catch (...) {
    flush.flush_now();
    static_cast<void>(backend.release());
    static_cast<void>(world_owner.release());
    throw;
  }
  status("gathering the measurements at rank 0");
  world.store_set(iterations_key(rendezvous.rank), encode_iterations(measured));
  world.store_set(host_key(rendezvous.rank), host_name());
  std::optional<MeasuredStep> out;
  if (rendezvous.rank == 0) {
    std::vector<std::vector<RankIteration>> all;
    bool one_machine = true;
    for (std::int32_t r = 0; r < rendezvous.world_size; ++r) {
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
