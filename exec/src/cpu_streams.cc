#include "metron/exec/cpu_streams.h"

#include <algorithm>
#include <string>
#include <utility>

#include "metron/base/error.h"
#include "metron/exec/steady_time.h"

namespace metron::exec {

using detail::now_ns;

namespace {

std::string quoted(const std::string& label) { return "\"" + label + "\""; }

}  // namespace

CpuStreams::CpuStreams(std::int32_t streams, std::int32_t hardware_queues,
                       std::vector<std::string> names)
    : hardware_queues_(hardware_queues) {
  if (streams < 1) {
    throw InvalidConfig("cpu streams: expected at least 1 stream; got " + std::to_string(streams));
  }
  if (hardware_queues < 1) {
    throw InvalidConfig("cpu streams: expected at least 1 hardware queue; got " +
                        std::to_string(hardware_queues));
  }
  if (!names.empty() && std::cmp_not_equal(names.size(), streams)) {
    throw InvalidConfig("cpu streams: expected one name per stream (" + std::to_string(streams) +
                        "); got " + std::to_string(names.size()));
  }
  streams_.resize(static_cast<std::size_t>(streams));
  for (std::size_t s = 0; s < names.size(); ++s) streams_[s].name = std::move(names[s]);
  // Stream s uses queue s mod Q, so only the first min(Q, streams) queues are ever used.
  queue_pending_.resize(static_cast<std::size_t>(std::min(streams, hardware_queues)));
  threads_.reserve(streams_.size());
  try {
    for (std::int32_t s = 0; s < streams; ++s) threads_.emplace_back([this, s] { run_stream(s); });
  } catch (...) {
    stop_and_join();
    throw;
  }
}

CpuStreams::~CpuStreams() { stop_and_join(); }

void CpuStreams::stop_and_join() noexcept {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::int32_t CpuStreams::num_streams() const noexcept {
  return static_cast<std::int32_t>(streams_.size());
}

CpuStreams::EventId CpuStreams::create_event() {
  const std::lock_guard<std::mutex> lock(mutex_);
  events_.emplace_back();
  return static_cast<EventId>(events_.size() - 1);
}

void CpuStreams::wait_event(std::int32_t stream, EventId event) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check_stream(stream);
  check_event(event);
  METRON_ASSERT(events_[static_cast<std::size_t>(event)].record_enqueued,
                "cpu streams: stream " + std::to_string(stream) + " waits for event " +
                    std::to_string(event) + ", whose record was not enqueued");
  streams_[static_cast<std::size_t>(stream)].ops.push_back({.kind = OpKind::kWait, .event = event});
  changed_.notify_all();
}

void CpuStreams::enqueue(std::int32_t stream, std::function<void()> work, std::string label) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check_stream(stream);
  METRON_ASSERT(work, "cpu streams: empty work item " + quoted(label));
  const auto item = static_cast<std::int64_t>(items_.size());
  items_.push_back({.label = std::move(label), .stream = stream});
  queue_pending_[static_cast<std::size_t>(queue_of(stream))].push_back(item);
  Stream& st = streams_[static_cast<std::size_t>(stream)];
  st.ops.push_back({.kind = OpKind::kWork, .item = item, .work = std::move(work)});
  st.last_item = item;
  changed_.notify_all();
}

void CpuStreams::record_event(std::int32_t stream, EventId event) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check_stream(stream);
  check_event(event);
  Event& e = events_[static_cast<std::size_t>(event)];
  METRON_ASSERT(!e.record_enqueued,
                "cpu streams: event " + std::to_string(event) + " is recorded twice");
  Stream& st = streams_[static_cast<std::size_t>(stream)];
  e = {.record_enqueued = true, .stream = stream, .after_item = st.last_item};
  st.ops.push_back({.kind = OpKind::kRecord, .event = event});
  changed_.notify_all();
}

void CpuStreams::synchronize(EventId event, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_event(event);
  const auto e = static_cast<std::size_t>(event);
  METRON_ASSERT(events_[e].record_enqueued, "cpu streams: synchronize on event " +
                                                std::to_string(event) +
                                                ", whose record was not enqueued");
  wait_host(
      lock, timeout, [&] { return events_[e].set; }, "event " + std::to_string(event));
}

void CpuStreams::synchronize_all(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_host(
      lock, timeout,
      [&] {
        return std::all_of(streams_.begin(), streams_.end(),
                           [](const Stream& s) { return s.ops.empty(); });
      },
      "every stream");
}

void CpuStreams::wait_host(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout,
                           const std::function<bool()>& done, const std::string& what) {
  // A caller may pass milliseconds::max() for "no timeout"; now() + that would overflow, and a
  // year is as good as forever here.
  const std::chrono::milliseconds bounded =
      std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
  const bool finished = changed_.wait_for(lock, bounded, [&] { return failure_ || done(); });
  // A failure wins even when the awaited work finished: the rank is failing, so it should stop
  // at its next synchronisation rather than issue more work.
  if (failure_) throw_failure();
  if (!finished) {
    std::vector<std::string> lines;
    for (std::int32_t s = 0; s < num_streams(); ++s) lines.push_back(describe_stream(s));
    throw BackendError(format_problem_list("cpu streams: timed out after " +
                                               std::to_string(timeout.count()) +
                                               " ms waiting for " + what + "; streams:",
                                           lines));
  }
}

void CpuStreams::throw_failure() const {
  const Item& item = items_[static_cast<std::size_t>(failed_item_)];
  const std::string where =
      stream_name(item.stream) + ": work item " + quoted(item.label) + " failed: ";
  // Rethrown to read its message and then nested, so that a caller can still reach the item's
  // own exception (std::rethrow_if_nested) while the message names the stream and the item.
  try {
    std::rethrow_exception(failure_);
  } catch (const std::exception& e) {
    std::throw_with_nested(BackendError(where + e.what()));
  } catch (...) {
    std::throw_with_nested(BackendError(where + "an exception not derived from std::exception"));
  }
}

void CpuStreams::run_stream(std::int32_t stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  Stream& st = streams_[static_cast<std::size_t>(stream)];
  for (;;) {
    changed_.wait(lock,
                  [&] { return stopping_ || failure_ || (!st.ops.empty() && front_ready(st)); });
    // Nothing that has not started runs after a failure or once the destructor stops us.
    if (stopping_ || failure_) return;
    Op& op = st.ops.front();
    if (op.kind == OpKind::kWork) {
      run_work(lock, st);
      continue;
    }
    if (op.kind == OpKind::kRecord) events_[static_cast<std::size_t>(op.event)].set = true;
    st.ops.pop_front();  // a wait whose event is set, or a record: both are done
    changed_.notify_all();
  }
}

void CpuStreams::run_work(std::unique_lock<std::mutex>& lock, Stream& stream) {
  Op& op = stream.ops.front();
  const auto item = static_cast<std::size_t>(op.item);
  std::function<void()> work = std::move(op.work);
  // Starting hands the queue's turn to the next item enqueued on it (rule 4).
  queue_pending_[static_cast<std::size_t>(queue_of(items_[item].stream))].pop_front();
  items_[item].start_ns = now_ns();
  stream.running = true;
  changed_.notify_all();
  lock.unlock();
  std::exception_ptr error;
  try {
    work();
  } catch (...) {
    error = std::current_exception();
  }
  const std::int64_t end = now_ns();
  work = nullptr;  // its captures are destroyed outside the lock, in case they call back into us
  lock.lock();
  items_[item].end_ns = end;
  stream.running = false;
  stream.last_done = static_cast<std::int64_t>(item);
  stream.ops.pop_front();
  if (error && !failure_) {  // the first failure is the one reported
    failure_ = error;
    failed_item_ = static_cast<std::int64_t>(item);
  }
  changed_.notify_all();
}

bool CpuStreams::front_ready(const Stream& stream) const {
  const Op& op = stream.ops.front();
  switch (op.kind) {
    case OpKind::kWait:
      return events_[static_cast<std::size_t>(op.event)].set;
    case OpKind::kRecord:
      return true;
    case OpKind::kWork: {
      const std::int32_t queue = queue_of(items_[static_cast<std::size_t>(op.item)].stream);
      return queue_pending_[static_cast<std::size_t>(queue)].front() == op.item;
    }
  }
  return false;
}

void CpuStreams::check_stream(std::int32_t stream) const {
  METRON_ASSERT(stream >= 0 && stream < num_streams(),
                "cpu streams: stream " + std::to_string(stream) + " out of range [0, " +
                    std::to_string(num_streams()) + ")");
}

void CpuStreams::check_event(EventId event) const {
  METRON_ASSERT(event >= 0 && std::cmp_less(event, events_.size()),
                "cpu streams: unknown event " + std::to_string(event));
}

void CpuStreams::reset() {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (Stream& stream : streams_) {
    METRON_ASSERT(stream.ops.empty(),
                  "cpu streams: reset while " + quoted(stream.name) + " still has operations");
    stream.last_item = -1;
    stream.last_done = -1;
  }
  items_.clear();
  events_.clear();
}

std::vector<CpuStreams::Timing> CpuStreams::timings() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Timing> result;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    const Item& item = items_[i];
    if (item.end_ns < 0) continue;
    result.push_back({.start_ns = item.start_ns,
                      .end_ns = item.end_ns,
                      .label = item.label,
                      .stream = item.stream,
                      .item = static_cast<std::int64_t>(i)});
  }
  return result;
}

std::vector<std::string> CpuStreams::describe() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> lines;
  for (std::int32_t s = 0; s < num_streams(); ++s) lines.push_back(describe_stream(s));
  return lines;
}

std::string CpuStreams::stream_name(std::int32_t stream) const {
  const std::string& name = streams_[static_cast<std::size_t>(stream)].name;
  return "stream " + std::to_string(stream) + (name.empty() ? "" : " (" + name + ")");
}

std::string CpuStreams::describe_stream(std::int32_t stream) const {
  const Stream& st = streams_[static_cast<std::size_t>(stream)];
  const std::string head = stream_name(stream) + ": ";
  auto label_of = [&](std::int64_t item) {
    return quoted(items_[static_cast<std::size_t>(item)].label);
  };
  if (failed_item_ >= 0 && items_[static_cast<std::size_t>(failed_item_)].stream == stream) {
    return head + "failed in " + label_of(failed_item_);
  }
  const std::string after = st.last_done >= 0 ? " after " + label_of(st.last_done) : "";
  if (st.ops.empty()) return head + "idle" + after;
  if (failure_ || stopping_) return head + "stopped";
  const Op& op = st.ops.front();
  if (op.kind == OpKind::kWork) {
    if (st.running) return head + "running " + label_of(op.item);
    const std::int32_t queue = queue_of(stream);
    const std::int64_t turn = queue_pending_[static_cast<std::size_t>(queue)].front();
    if (turn == op.item) return head + "starting " + label_of(op.item);
    return head + "waiting for its turn on hardware queue " + std::to_string(queue) + " behind " +
           label_of(turn) + " (" + stream_name(items_[static_cast<std::size_t>(turn)].stream) + ")";
  }
  if (op.kind == OpKind::kWait && !events_[static_cast<std::size_t>(op.event)].set) {
    const Event& e = events_[static_cast<std::size_t>(op.event)];
    return head + "waiting for event " + std::to_string(op.event) + ", recorded on " +
           stream_name(e.stream) +
           (e.after_item >= 0 ? " after " + label_of(e.after_item) : " before any work item");
  }
  return head + "advancing" + after;  // a record, or a wait whose event is set: done at once
}

}  // namespace metron::exec
