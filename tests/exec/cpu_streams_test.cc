// The CPU backend's streams, events and hardware queues with real threads (Note [cpu streams] in
// metron/exec/cpu_streams.h). Orders are checked with sequence numbers taken inside the work
// items, never with durations; a blocked item waits on a Gate the test opens once it has checked
// what must not have happened yet.

#include "metron/exec/cpu_streams.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "metron/base/error.h"

namespace metron::exec {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr milliseconds kPatience{10'000};  // only a broken implementation waits this long

// A one-shot flag a work item or the test blocks on. wait() gives up after kPatience so that a
// broken implementation fails the test instead of hanging it.
class Gate {
 public:
  void open() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kPatience, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(CpuStreams, ItemsOnOneStreamRunInEnqueueOrder) {
  CpuStreams streams(1, 8);
  std::vector<int> ran;  // touched by the stream's thread only until synchronize_all returns
  for (int i = 0; i < 50; ++i) {
    streams.enqueue(
        0, [&ran, i] { ran.push_back(i); }, "item " + std::to_string(i));
  }
  streams.synchronize_all(milliseconds::max());  // no timeout
  ASSERT_EQ(ran.size(), 50U);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ran[static_cast<std::size_t>(i)], i);
}

TEST(CpuStreams, AWaitedEventHoldsTheStreamUntilTheItemsBeforeTheRecordEnded) {
  CpuStreams streams(2, 8);
  std::atomic<int> seq{0};
  constexpr int kRounds = 20;
  std::vector<int> a_end(kRounds, -1);
  std::vector<int> b_start(kRounds, -1);
  for (int r = 0; r < kRounds; ++r) {
    const auto i = static_cast<std::size_t>(r);
    streams.enqueue(
        0,
        [&, i] {
          // A short pause gives stream 1 every chance to start too early if the wait were broken.
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          a_end[i] = seq.fetch_add(1);
        },
        "a" + std::to_string(r));
    const CpuStreams::EventId done = streams.create_event();
    streams.record_event(0, done);
    streams.wait_event(1, done);
    streams.enqueue(
        1, [&, i] { b_start[i] = seq.fetch_add(1); }, "b" + std::to_string(r));
  }
  streams.synchronize_all(kPatience);
  for (std::size_t i = 0; i < kRounds; ++i) EXPECT_GT(b_start[i], a_end[i]) << "round " << i;
}

// Rule 4 orders STARTS: an item on another stream may start as soon as the item before it on its
// queue has started. So each queue test blocks its head-of-line item X behind a running item A
// of X's own stream (rule 2); with one queue nothing enqueued after X, on any stream, may start.
TEST(CpuStreams, OneHardwareQueueStartsItemsOfEveryStreamInEnqueueOrder) {
  CpuStreams streams(3, 1);
  std::atomic<int> seq{0};
  Gate a_started;
  Gate release_a;
  streams.enqueue(
      0,
      [&] {
        seq.fetch_add(1);
        a_started.open();
        (void)release_a.wait();
      },
      "A");
  streams.enqueue(
      0, [&] { seq.fetch_add(1); }, "X");
  streams.enqueue(
      2, [&] { seq.fetch_add(1); }, "C");
  streams.enqueue(
      1, [&] { seq.fetch_add(1); }, "B");
  ASSERT_TRUE(a_started.wait());
  // C and B are free on their own streams but behind X on the one queue, and X waits for A to
  // complete: nothing else starts while A blocks. The pause only gives a broken implementation
  // time to show itself.
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(seq.load(), 1);
  EXPECT_THAT(streams.describe(),
              ElementsAre("stream 0: running \"A\"",
                          "stream 1: waiting for its turn on hardware queue 0 behind \"X\" "
                          "(stream 0)",
                          "stream 2: waiting for its turn on hardware queue 0 behind \"X\" "
                          "(stream 0)"));
  release_a.open();
  streams.synchronize_all(kPatience);
  // An item's start is when its stream takes its queue turn (its Timing::start_ns, read under
  // the lock that orders the turns); the work function's own first statement may come later, so
  // the order is checked on the timings, which come in enqueue order.
  const std::vector<CpuStreams::Timing> timings = streams.timings();
  ASSERT_EQ(timings.size(), 4U);
  for (std::size_t i = 1; i < timings.size(); ++i) {
    EXPECT_LE(timings[i - 1].start_ns, timings[i].start_ns) << timings[i].label;
  }
}

TEST(CpuStreams, AnItemWaitingForAnEventHoldsBackItsQueue) {
  CpuStreams streams(3, 1, {"compute", "dp", "tp"});
  Gate a_started;
  Gate release_a;
  streams.enqueue(
      0,
      [&] {
        a_started.open();
        (void)release_a.wait();
      },
      "A");
  const CpuStreams::EventId after_a = streams.create_event();
  streams.record_event(0, after_a);
  streams.wait_event(1, after_a);
  streams.enqueue(
      1, [] {}, "W");
  streams.enqueue(
      2, [] {}, "C");  // free on its stream, but behind W on the one queue
  ASSERT_TRUE(a_started.wait());
  EXPECT_THAT(streams.describe(),
              ElementsAre("stream 0 (compute): running \"A\"",
                          "stream 1 (dp): waiting for event 0, recorded on stream 0 (compute) "
                          "after \"A\"",
                          "stream 2 (tp): waiting for its turn on hardware queue 0 behind \"W\" "
                          "(stream 1 (dp))"));
  release_a.open();
  streams.synchronize_all(kPatience);
  const std::vector<CpuStreams::Timing> t = streams.timings();  // A, W, C
  ASSERT_EQ(t.size(), 3U);
  EXPECT_LE(t[0].end_ns, t[1].start_ns);    // W waited for A's event
  EXPECT_LE(t[1].start_ns, t[2].start_ns);  // C waited for W's start
}

TEST(CpuStreams, OneQueuePerStreamLetsALaterItemStartFirst) {
  CpuStreams streams(3, 3);
  Gate release_a;
  Gate c_started;
  std::atomic<bool> a_ended{false};
  std::atomic<bool> a_ended_before_c{true};
  streams.enqueue(
      0,
      [&] {
        (void)release_a.wait();
        a_ended = true;
      },
      "A");
  streams.enqueue(
      0, [] {}, "X");
  streams.enqueue(
      2,
      [&] {
        a_ended_before_c = a_ended.load();
        c_started.open();
      },
      "C");
  // The same order as above, but C has a queue of its own: it starts while A still blocks, and
  // only then is A released (with one queue this test would wait for kPatience and fail).
  ASSERT_TRUE(c_started.wait());
  EXPECT_FALSE(a_ended_before_c.load());
  release_a.open();
  streams.synchronize_all(kPatience);
}

TEST(CpuStreams, StreamsSharingAQueueBlockEachOtherButNotTheOtherQueue) {
  // Two queues: streams 0 and 2 share queue 0 (s mod 2), stream 1 has queue 1.
  CpuStreams streams(3, 2, {"compute", "tp", "dp"});
  EXPECT_EQ(streams.queue_of(2), 0);
  Gate a_started;
  Gate release_a;
  Gate c_started;
  streams.enqueue(
      0,
      [&] {
        a_started.open();
        (void)release_a.wait();
      },
      "A");
  streams.enqueue(
      0, [] {}, "X");
  streams.enqueue(
      2, [] {}, "B");
  streams.enqueue(
      1, [&] { c_started.open(); }, "C");
  ASSERT_TRUE(a_started.wait());
  ASSERT_TRUE(c_started.wait());
  EXPECT_EQ(streams.describe()[2],
            "stream 2 (dp): waiting for its turn on hardware queue 0 behind \"X\" "
            "(stream 0 (compute))");
  release_a.open();
  streams.synchronize_all(kPatience);
}

TEST(CpuStreams, SynchronizeWaitsForExactlyTheItemsBeforeTheEvent) {
  CpuStreams streams(1, 8);
  std::atomic<bool> first_done{false};
  std::atomic<bool> second_done{false};
  Gate release_second;
  streams.enqueue(
      0, [&] { first_done = true; }, "first");
  const CpuStreams::EventId after_first = streams.create_event();
  streams.record_event(0, after_first);
  streams.enqueue(
      0,
      [&] {
        (void)release_second.wait();
        second_done = true;
      },
      "second");
  streams.synchronize(after_first, kPatience);
  EXPECT_TRUE(first_done.load());
  EXPECT_FALSE(second_done.load());  // still blocked: synchronize did not wait for it
  release_second.open();
  streams.synchronize_all(kPatience);
  EXPECT_TRUE(second_done.load());
}

TEST(CpuStreams, AFailingItemStopsEveryStreamAndSynchronizeRethrowsIt) {
  std::atomic<bool> later_ran{false};
  {
    CpuStreams streams(2, 8, {"compute", "dp"});
    streams.enqueue(
        0, [] {}, "0F0");
    streams.enqueue(
        0, [] { throw std::runtime_error("bad tensor"); }, "0B0");
    streams.enqueue(
        0, [&] { later_ran = true; }, "0W0");
    const CpuStreams::EventId grads = streams.create_event();
    streams.record_event(0, grads);
    streams.wait_event(1, grads);
    streams.enqueue(
        1, [&] { later_ran = true; }, "ALL_REDUCE");
    // The event is never set; the failure, not the timeout, ends the wait.
    EXPECT_THAT([&] { streams.synchronize(grads, kPatience); },
                ::testing::ThrowsMessage<BackendError>(
                    "stream 0 (compute): work item \"0B0\" failed: bad tensor"));
    try {
      streams.synchronize_all(kPatience);
      ADD_FAILURE() << "synchronize_all did not throw";
    } catch (const BackendError& e) {
      EXPECT_STREQ(e.what(), "stream 0 (compute): work item \"0B0\" failed: bad tensor");
      // The item's own exception is nested inside.
      EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);
    }
    EXPECT_FALSE(later_ran.load());
    EXPECT_THAT(streams.describe(),
                ElementsAre("stream 0 (compute): failed in \"0B0\"", "stream 1 (dp): stopped"));
    std::vector<std::string> labels;
    for (const CpuStreams::Timing& t : streams.timings()) labels.push_back(t.label);
    EXPECT_THAT(labels, ElementsAre("0F0", "0B0"));
  }  // the destructor joins the threads, one of them blocked on the event: no hang
  EXPECT_FALSE(later_ran.load());
}

TEST(CpuStreams, AFailureEndsAStreamWaitingForItsQueueTurn) {
  CpuStreams streams(2, 1);
  streams.enqueue(
      0, [] { throw std::runtime_error("out of memory"); }, "A");
  streams.enqueue(
      1, [] {}, "B");
  EXPECT_THROW(streams.synchronize_all(kPatience), BackendError);
}

TEST(CpuStreams, TimingsAreOnePerItemAndInOrderOnEachStream) {
  CpuStreams streams(2, 8);
  constexpr std::size_t kItems = 10;
  for (std::size_t i = 0; i < kItems; ++i) {
    for (std::int32_t s = 0; s < 2; ++s) {
      streams.enqueue(
          s, [] { std::this_thread::yield(); }, "s" + std::to_string(s) + "i" + std::to_string(i));
    }
  }
  streams.synchronize_all(kPatience);
  const std::vector<CpuStreams::Timing> timings = streams.timings();
  ASSERT_EQ(timings.size(), 2 * kItems);
  std::vector<std::int64_t> last_end(2, 0);
  for (std::size_t k = 0; k < timings.size(); ++k) {  // enqueue order
    const CpuStreams::Timing& t = timings[k];
    const auto s = static_cast<std::int32_t>(k % 2);
    EXPECT_EQ(t.stream, s);
    EXPECT_EQ(t.label, "s" + std::to_string(s) + "i" + std::to_string(k / 2));
    EXPECT_LE(t.start_ns, t.end_ns);
    EXPECT_LE(last_end[static_cast<std::size_t>(s)], t.start_ns) << t.label;
    last_end[static_cast<std::size_t>(s)] = t.end_ns;
  }
}

TEST(CpuStreams, DescribeNamesAStreamBlockedOnAnEvent) {
  CpuStreams streams(2, 8, {"compute", "dp"});
  Gate started;
  Gate release;
  streams.enqueue(
      0,
      [&] {
        started.open();
        (void)release.wait();
      },
      "0B0");
  const CpuStreams::EventId grads = streams.create_event();
  streams.record_event(0, grads);
  streams.wait_event(1, grads);
  streams.enqueue(
      1, [] {}, "ALL_REDUCE[dp0#0]");
  ASSERT_TRUE(started.wait());
  EXPECT_THAT(streams.describe(),
              ElementsAre("stream 0 (compute): running \"0B0\"",
                          "stream 1 (dp): waiting for event 0, recorded on stream 0 (compute) "
                          "after \"0B0\""));
  release.open();
  streams.synchronize_all(kPatience);
  // Idle, each stream says how far it got; reset() starts the record over.
  EXPECT_THAT(streams.describe(), ElementsAre("stream 0 (compute): idle after \"0B0\"",
                                              "stream 1 (dp): idle after \"ALL_REDUCE[dp0#0]\""));
  streams.reset();
  EXPECT_THAT(streams.describe(), ElementsAre("stream 0 (compute): idle", "stream 1 (dp): idle"));
}

TEST(CpuStreams, SynchronizeTimesOutNamingWhatEachStreamDoes) {
  CpuStreams streams(1, 8);
  Gate started;
  Gate release;
  streams.enqueue(
      0,
      [&] {
        started.open();
        (void)release.wait();
      },
      "slow");
  const CpuStreams::EventId done = streams.create_event();
  streams.record_event(0, done);
  ASSERT_TRUE(started.wait());
  EXPECT_THAT([&] { streams.synchronize(done, milliseconds(1)); },
              ::testing::ThrowsMessage<BackendError>(
                  "cpu streams: timed out after 1 ms waiting for event 0; streams:\n"
                  "  - stream 0: running \"slow\""));
  release.open();
  streams.synchronize_all(kPatience);
}

TEST(CpuStreams, RejectsBadCountsAndMisuse) {
  EXPECT_THAT([] { CpuStreams(0, 8); }, ::testing::ThrowsMessage<InvalidConfig>(
                                            "cpu streams: expected at least 1 stream; got 0"));
  EXPECT_THAT([] { CpuStreams(2, 0); },
              ::testing::ThrowsMessage<InvalidConfig>(
                  "cpu streams: expected at least 1 hardware queue; got 0"));
  EXPECT_THAT([] { CpuStreams(2, 8, {"compute"}); },
              ::testing::ThrowsMessage<InvalidConfig>(
                  "cpu streams: expected one name per stream (2); got 1"));
  CpuStreams streams(2, 8);
  const CpuStreams::EventId e = streams.create_event();
  EXPECT_THAT([&] { streams.wait_event(1, e); },
              ::testing::ThrowsMessage<InternalError>(
                  HasSubstr("stream 1 waits for event 0, whose record was not enqueued")));
  EXPECT_THROW(streams.enqueue(
                   2, [] {}, "x"),
               InternalError);
  streams.record_event(0, e);
  EXPECT_THAT([&] { streams.record_event(1, e); },
              ::testing::ThrowsMessage<InternalError>(HasSubstr("event 0 is recorded twice")));
  streams.synchronize_all(kPatience);
}

}  // namespace
}  // namespace metron::exec

namespace metron::exec {
namespace {

TEST(CpuStreams, ResetForgetsItemsAndEventsOnceIdle) {
  CpuStreams streams(2, 8);
  Gate gate;
  streams.enqueue(
      0, [&gate] { gate.wait(); }, "blocked");
  // Still running: nothing may be forgotten.
  EXPECT_THROW(streams.reset(), InternalError);
  gate.open();
  streams.synchronize_all(kPatience);
  const CpuStreams::EventId first = streams.create_event();
  streams.record_event(1, first);
  streams.synchronize_all(kPatience);
  ASSERT_EQ(streams.timings().size(), 1U);
  streams.reset();
  EXPECT_THAT(streams.timings(), ::testing::IsEmpty());
  EXPECT_EQ(streams.create_event(), first);  // ids start over
  streams.enqueue(
      1, [] {}, "after reset");
  streams.synchronize_all(kPatience);
  ASSERT_EQ(streams.timings().size(), 1U);
  EXPECT_EQ(streams.timings()[0].label, "after reset");
}

}  // namespace
}  // namespace metron::exec
