#include "metron/exec/cpu_backend.h"

#include <variant>

#include "metron/base/error.h"
#include "metron/exec/steady_time.h"

namespace metron::exec {

using detail::now_ns;

CpuBackend::CpuBackend(const RankProgram& program, CpuWork work, std::chrono::milliseconds timeout)
    : work_(std::move(work)),
      timeout_(timeout),
      streams_(static_cast<std::int32_t>(program.stream_names.size()), program.hardware_queues,
               program.stream_names) {}

void CpuBackend::begin_iteration(std::span<const std::int32_t> buffer_users) {
  const std::lock_guard<std::mutex> lock(memory_mutex_);
  users_left_.assign(buffer_users.begin(), buffer_users.end());
  buffers_.clear();
  buffers_.resize(buffer_users.size());
  sizes_.assign(buffer_users.size(), 0);
  allocated_ = 0;
  peak_ = 0;
  memory_.clear();
  {
    const std::lock_guard<std::mutex> launched(launched_mutex_);
    launched_.clear();
  }
  streams_.reset();
}

RankBackend::Event CpuBackend::create_event() { return streams_.create_event(); }

void CpuBackend::record_event(std::int32_t stream, Event event) {
  streams_.record_event(stream, event);
}

void CpuBackend::wait_event(std::int32_t stream, Event event) {
  streams_.wait_event(stream, event);
}

void CpuBackend::launch(std::int32_t stream, const Launch& launch) {
  {
    const std::lock_guard<std::mutex> lock(launched_mutex_);
    launched_.push_back(launch.id);
  }
  // The closure holds a copy: the caller's Launch may change before the stream reaches it.
  streams_.enqueue(
      stream, [this, launch] { run(launch); }, launch.label);
}

void CpuBackend::run(const Launch& launch) {
  allocate(launch);
  const ir::Task& task = *launch.task;
  if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
    work_.compute(launch, *c);
  } else if (const auto* g = std::get_if<ir::Collective>(&task.op)) {
    work_.collective(launch, *g);
  } else if (const auto* s = std::get_if<ir::Send>(&task.op)) {
    work_.send(launch, *s);
  } else if (const auto* r = std::get_if<ir::Recv>(&task.op)) {
    work_.recv(launch, *r);
  }
  release(launch);
}

void CpuBackend::allocate(const Launch& launch) {
  if (launch.allocates.empty()) return;
  const std::lock_guard<std::mutex> lock(memory_mutex_);
  for (const auto& [buffer, bytes] : launch.allocates) {
    // Real memory, as a device allocation is: the executor measures what the graph's memory
    // effects cost, so the bytes must exist. Not touched: a page is committed when written.
    buffers_[buffer.index()] =
        std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(bytes));
    sizes_[buffer.index()] = bytes;
    allocated_ += bytes;
  }
  peak_ = std::max(peak_, allocated_);
  memory_.emplace_back(now_ns(), allocated_);
}

void CpuBackend::release(const Launch& launch) {
  if (launch.releases.empty()) return;
  const std::lock_guard<std::mutex> lock(memory_mutex_);
  bool freed = false;
  for (const ir::BufferId buffer : launch.releases) {
    std::int32_t& left = users_left_[buffer.index()];
    if (--left > 0) continue;
    METRON_ASSERT(left == 0, "cpu backend: buffer " + std::to_string(buffer.value()) +
                                 " released more often than it has users");
    std::unique_ptr<std::byte[]>& memory = buffers_[buffer.index()];
    METRON_ASSERT(memory != nullptr, "cpu backend: buffer " + std::to_string(buffer.value()) +
                                         " freed before it was allocated");
    memory.reset();
    allocated_ -= sizes_[buffer.index()];
    freed = true;
  }
  if (!freed) return;
  memory_.emplace_back(now_ns(), allocated_);
}

void CpuBackend::synchronize(Event event) { streams_.synchronize(event, timeout_); }

IterationRecord CpuBackend::end_iteration() {
  streams_.synchronize_all(timeout_);
  return partial_record();
}

IterationRecord CpuBackend::partial_record() const {
  IterationRecord record;
  // Work items are launches in enqueue order; before the end of an iteration only some have
  // completed, and each timing says which item it is.
  const std::vector<CpuStreams::Timing> timings = streams_.timings();
  {
    const std::lock_guard<std::mutex> lock(launched_mutex_);
    for (const CpuStreams::Timing& t : timings) {
      if (t.item < 0 || std::cmp_greater_equal(t.item, launched_.size())) continue;
      record.launches.push_back(
          {launched_[static_cast<std::size_t>(t.item)], t.start_ns, t.end_ns});
    }
  }
  const std::lock_guard<std::mutex> lock(memory_mutex_);
  record.memory = memory_;
  record.peak_memory_bytes = peak_;
  return record;
}

std::string CpuBackend::describe() const {
  std::string out;
  for (const std::string& line : streams_.describe()) {
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

}  // namespace metron::exec
