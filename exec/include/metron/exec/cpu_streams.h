#pragma once
// The CPU backend's streams and events: the CUDA-like machinery the executor's core drives, so
// that the CPU backend now and a CUDA backend later plug into one rank loop. The rank's host
// thread walks its issue order and, per task, makes the task's stream wait for its dependencies'
// events, enqueues the task's work, and records an event after it; a HostWait is synchronize().
//
// Note [cpu streams] (the semantics, which follow Note [ordering rules] in metron/ir/ordering.h):
//   - A stream is a thread with a FIFO of operations (event waits, work items, event records),
//     run one at a time in enqueue order (rule 2).
//   - An event is a one-shot completion flag: set when its stream reaches the record, that is,
//     when every operation enqueued on that stream before the record has completed. A wait on it
//     holds back every later operation of the waiting stream until it is set (rule 3).
//   - Stream s is dispatched through hardware queue s mod hardware_queues, as
//     ir::Graph::queue_of() maps a stream's index among its rank's streams. A work item may not
//     START before every work item enqueued earlier on its queue, on any stream, has started
//     (rule 4); with one queue every stream is dispatched in global enqueue order, as with
//     CUDA_DEVICE_MAX_CONNECTIONS=1. An item starts when its stream takes its queue turn (its
//     Timing::start_ns); its work function begins right after, so the first statements of two
//     items on different streams may still run in either order, as two kernels dispatched one
//     after the other may. Only work items take a place on a queue; waits and records do not.
//     A queue's head holds back the items behind it, but the queues alone cannot deadlock a rank
//     (a communication item may still block on a peer): a wait's record must be enqueued before
//     the wait, so whatever an item waits for was enqueued, and is queued, ahead of it.
//   - The first work item that throws fails the whole object: no operation that has not started
//     yet runs, on any stream, and every wait ends; synchronize() and synchronize_all() then throw
//     that failure. A failure is final.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace metron::exec {

/// Streams (one thread each), events and hardware queues of one rank on the CPU backend (Note
/// [cpu streams]). Thread-safe: any thread may call any member; in the executor one host thread
/// issues and synchronizes, and describe() may come from a watchdog thread.
/// @code
///   exec::CpuStreams streams(2, /*hardware_queues=*/8, {"compute", "dp"});
///   exec::CpuStreams::EventId grads = streams.create_event();
///   streams.enqueue(0, [&] { backward(); }, "0B0");
///   streams.record_event(0, grads);
///   streams.wait_event(1, grads);                     // dp waits for the backward ...
///   streams.enqueue(1, [&] { all_reduce(); }, "ALL_REDUCE[dp0#0]");
///   streams.synchronize_all(std::chrono::seconds(30));  // throws the first failure
///   for (const exec::CpuStreams::Timing& t : streams.timings()) trace(t);
/// @endcode
class CpuStreams {
 public:
  using EventId = std::int32_t;

  /// Starts one thread per stream. `names` (empty, or one per stream) appear in describe() and in
  /// failure messages as `stream i (name)`, or `stream i` without names. Throws InvalidConfig for
  /// streams < 1, hardware_queues < 1 or a wrong number of names.
  CpuStreams(std::int32_t streams, std::int32_t hardware_queues,
             std::vector<std::string> names = {});
  /// Stops, without draining: operations that have not started are dropped, a running work item
  /// is waited for (it cannot be interrupted), and every thread is joined. Call synchronize_all()
  /// first to finish the enqueued work. Never hangs on a wait, whether or not an item threw.
  ~CpuStreams();
  CpuStreams(const CpuStreams&) = delete;
  CpuStreams& operator=(const CpuStreams&) = delete;
  CpuStreams(CpuStreams&&) = delete;
  CpuStreams& operator=(CpuStreams&&) = delete;

  [[nodiscard]] std::int32_t num_streams() const noexcept;
  [[nodiscard]] std::int32_t hardware_queues() const noexcept { return hardware_queues_; }
  /// The hardware queue stream `stream` is dispatched through: stream mod hardware_queues().
  [[nodiscard]] std::int32_t queue_of(std::int32_t stream) const noexcept {
    return stream % hardware_queues_;
  }

  /// A new event, not yet recorded. Each event is recorded once.
  EventId create_event();
  /// Enqueues on `stream` a wait for `event` (cudaStreamWaitEvent): later operations of the
  /// stream run after the event is set. The event's record must have been enqueued already
  /// (InternalError otherwise), so that a wait can never be for an event nobody will set.
  void wait_event(std::int32_t stream, EventId event);
  /// Enqueues `work` on `stream`; it runs on the stream's thread after everything enqueued on the
  /// stream before it, once its hardware queue lets it start. `label` names it in timings(),
  /// describe() and failure messages.
  void enqueue(std::int32_t stream, std::function<void()> work, std::string label);
  /// Enqueues on `stream` the record of `event` (cudaEventRecord): the event is set when the
  /// stream reaches it. InternalError when the event was recorded before.
  void record_event(std::int32_t stream, EventId event);

  /// Blocks the calling (host) thread until `event` is set. Throws BackendError when a work item
  /// failed, before or during the wait, with the item's stream and label (the item's own
  /// exception is nested: std::rethrow_if_nested), and BackendError naming what every stream is
  /// doing when `timeout` passes first (milliseconds::max() waits for ever). InternalError when
  /// the event's record was never enqueued.
  void synchronize(EventId event, std::chrono::milliseconds timeout);
  /// Blocks until every operation enqueued so far has completed; throws as synchronize() does.
  void synchronize_all(std::chrono::milliseconds timeout);

  /// Forgets every work item and event once everything enqueued has completed (after
  /// synchronize_all()), so that a run of many iterations keeps one iteration's bookkeeping:
  /// event ids and timings() start over. InternalError while an operation is still enqueued.
  void reset();

  /// When a work item ran, on the steady clock.
  struct Timing {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    std::string label;
    std::int32_t stream = 0;
    std::int64_t item = 0;  ///< the item's place in enqueue order (since the last reset())
  };
  /// One entry per work item that has completed (after synchronize_all(): every item), in enqueue
  /// order. An item that threw has its entry too, ending when it threw.
  [[nodiscard]] std::vector<Timing> timings() const;

  /// What each stream is doing or waiting for, one line per stream, for the launcher's status
  /// and watchdog: `stream 1 (dp): waiting for event 3, recorded on stream 0 (compute) after
  /// "0B0"`; the other states are running "<label>", waiting for its turn on hardware queue Q
  /// behind "<label>" (stream S), idle, failed in "<label>", and stopped. Idle and the
  /// instantaneous steps between items (advancing) add `after "<label>"`, the last item the
  /// stream completed since the last reset(): a status is sampled, so the one a hung rank left
  /// behind is often of such a moment, and it still has to say how far the stream got.
  [[nodiscard]] std::vector<std::string> describe() const;

 private:
  enum class OpKind : std::uint8_t { kWait, kWork, kRecord };
  struct Op {
    OpKind kind = OpKind::kWork;
    EventId event = -1;          // kWait, kRecord
    std::int64_t item = -1;      // kWork: index into items_
    std::function<void()> work;  // kWork
  };
  struct Item {  // one work item, for timings, describe() and the queue turn
    std::string label;
    std::int32_t stream = 0;
    std::int64_t start_ns = -1;  // -1 until it starts
    std::int64_t end_ns = -1;    // -1 until it completes (or throws)
  };
  struct Event {
    bool record_enqueued = false;
    bool set = false;
    std::int32_t stream = -1;      // where it is recorded
    std::int64_t after_item = -1;  // the last work item enqueued on that stream before it
  };
  struct Stream {
    std::string name;
    std::deque<Op> ops;  // the front is running or blocked; popped when it completes
    std::int64_t last_item = -1;
    std::int64_t last_done = -1;  // the last work item that completed on it, for describe()
    bool running = false;         // the front is a work item that has started
  };

  void stop_and_join() noexcept;
  void run_stream(std::int32_t stream);
  // Runs the front work item of `stream` outside the lock; `lock` holds mutex_ before and after.
  void run_work(std::unique_lock<std::mutex>& lock, Stream& stream);
  // Whether the front operation of `stream` may run now; called with mutex_ held.
  [[nodiscard]] bool front_ready(const Stream& stream) const;
  void check_stream(std::int32_t stream) const;
  void check_event(EventId event) const;
  // Blocks until `done` holds or a failure; throws as synchronize() does. mutex_ held by `lock`.
  void wait_host(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout,
                 const std::function<bool()>& done, const std::string& what);
  [[noreturn]] void throw_failure() const;
  [[nodiscard]] std::string describe_stream(std::int32_t stream) const;
  [[nodiscard]] std::string stream_name(std::int32_t stream) const;

  const std::int32_t hardware_queues_;
  mutable std::mutex mutex_;
  // One condition variable for every state change (an event set, an item started or completed,
  // a failure, shutdown): a stream's readiness depends on other streams (events, queue turns),
  // and the stream counts are small, so waking every waiter is cheap and simplest to get right.
  std::condition_variable changed_;
  std::vector<Stream> streams_;
  std::vector<Event> events_;
  std::vector<Item> items_;
  // Per hardware queue, its work items not yet started, in enqueue order: the front may start.
  std::vector<std::deque<std::int64_t>> queue_pending_;
  bool stopping_ = false;
  std::exception_ptr failure_;  // the first work item's exception
  std::int64_t failed_item_ = -1;
  std::vector<std::thread> threads_;  // last: started once the state above exists
};

}  // namespace metron::exec
