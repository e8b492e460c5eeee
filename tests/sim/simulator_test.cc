// The simulator on small graphs built by hand, each expectation worked out on paper in the
// comments: overlap of communication with compute, rendezvous, hardware queues, host waits,
// compute slow-down, memory, bytes, bubbles and their causes, the critical path, deadlocks,
// determinism and input errors.

#include "metron/sim/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "ir/task_factory.h"
#include "metron/base/error.h"
#include "support/one_f_one_b_step.h"

namespace metron::sim {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using namespace metron::ir;
using namespace metron::ir::testing;

/// Durations indexed by task id, filled in by the test as it adds tasks.
struct Durations {
  std::vector<Time> by_task;
  TaskId add(GraphBuilder& b, Task task, Time duration) {
    const TaskId id = b.add(std::move(task));
    by_task.resize(id.index() + 1, 0);
    by_task[id.index()] = duration;
    return id;
  }
};

std::map<BubbleCause, Time> bubble_map(Time warmup, Time cooldown, Time recv, Time collective,
                                       Time other) {
  return {{BubbleCause::kWarmup, warmup},
          {BubbleCause::kCooldown, cooldown},
          {BubbleCause::kWaitRecv, recv},
          {BubbleCause::kWaitCollective, collective},
          {BubbleCause::kOther, other}};
}

// Two ranks; each runs B (100) then C (100) on "compute", and an all-reduce (150) of B's
// gradients on "dp" that waits for B. Both reach the all-reduce at 100, so it runs [100, 250]
// beside C [100, 200]: 100 ns hidden, 50 ns exposed after C ends.
TEST(Simulator, AllReduceOnSecondStreamOverlapsCompute) {
  GraphBuilder b;
  Durations d;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const GroupId dp = b.add_group("dp", {r0, r1});
  std::vector<TaskId> bwd, rest, reduce;
  for (RankId r : {r0, r1}) {
    const StreamId cs = b.add_stream(r, "compute");
    const StreamId grad = b.add_stream(r, "dp-grad");
    bwd.push_back(d.add(b, compute(r, cs, Phase::kBackward), 100));
    rest.push_back(d.add(b, compute(r, cs, Phase::kOther), 100));
    reduce.push_back(d.add(b, after(collective(r, grad, dp, 4096, 0), bwd.back()), 150));
  }
  const Graph g = std::move(b).build();
  const SimResult res = simulate(g, d.by_task);

  EXPECT_EQ(res.makespan, 250);
  EXPECT_EQ(res.tasks[bwd[0].index()], (TaskTiming{0, 100}));
  EXPECT_EQ(res.tasks[rest[0].index()], (TaskTiming{100, 200}));
  EXPECT_EQ(res.tasks[reduce[0].index()], (TaskTiming{100, 250}));
  EXPECT_EQ(res.tasks[reduce[1].index()], (TaskTiming{100, 250}));
  for (const RankMetrics& m : res.ranks) {
    EXPECT_EQ(m.compute_busy, 200);     // B + C back to back
    EXPECT_EQ(m.idle, 50);              // 250 - 200
    EXPECT_EQ(m.comm_total, 150);       // [100, 250]
    EXPECT_EQ(m.comm_exposed, 50);      // [200, 250]: nothing computes
    EXPECT_EQ(m.comm_overlapped, 100);  // [100, 200] beside C
    EXPECT_EQ(m.bubble, bubble_map(0, 50, 0, 0, 0));
    EXPECT_THAT(m.bubbles, ElementsAre(Bubble{200, 250, BubbleCause::kCooldown, TaskId{}}));
    // A ring all-reduce on 2 ranks sends 2(n−1)/n = 1 times its buffer.
    EXPECT_THAT(m.bytes_sent, ElementsAre(Pair(dp, 4096)));
    EXPECT_THAT(m.collective_bytes, ElementsAre(Pair(dp, 4096)));
    EXPECT_EQ(m.peak_memory_bytes, 0);
  }
  // Ends at one time go by rank: rank 1's B completed last at 100 and released the all-reduce;
  // rank 1's member is the last task to end at 250.
  EXPECT_THAT(res.critical_path, ElementsAre(bwd[1], reduce[1]));
}

// Bytes on the wire follow nccl-tests' bus factors (models::wire_bytes), the buffer sizes stay as
// the graph states them: on 4 ranks an all-reduce of 4096 B sends 2·3/4·4096 = 6144 B per rank,
// and the reduce-scatter plus all-gather that replace it 3/4·4096 = 3072 B each, the same 6144
// in all, though their buffers sum to 8192.
TEST(Simulator, BytesSentAreWireBytesAndCollectiveBytesTheBuffers) {
  for (const bool split : {false, true}) {
    GraphBuilder b;
    Durations d;
    std::vector<RankId> ranks;
    for (int i = 0; i < 4; ++i) ranks.push_back(b.add_rank());
    const GroupId dp = b.add_group("dp", ranks);
    for (RankId r : ranks) {
      const StreamId s = b.add_stream(r, "dp");
      if (split) {
        d.add(b, collective(r, s, dp, 4096, 0, CollectiveOp::kReduceScatter), 10);
        d.add(b, collective(r, s, dp, 4096, 1, CollectiveOp::kAllGather), 10);
      } else {
        d.add(b, collective(r, s, dp, 4096, 0), 20);
      }
    }
    const SimResult res = simulate(std::move(b).build(), d.by_task);
    for (const RankMetrics& m : res.ranks) {
      EXPECT_THAT(m.bytes_sent, ElementsAre(Pair(dp, 6144))) << split;
      EXPECT_THAT(m.collective_bytes, ElementsAre(Pair(dp, split ? 8192 : 4096)));
    }
  }
}

// Rank 0 computes A for 100 ns, rank 1 for 300 ns; their all-reduce members (50 and 80 ns)
// start together when the slower one arrives (300) and run for the longer duration (80), then
// each rank's optimizer step (20) waits for it: [380, 400].
TEST(Simulator, CollectiveStartsWhenItsSlowestMemberArrivesAndRunsForTheLongestDuration) {
  GraphBuilder b;
  Durations d;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const GroupId dp = b.add_group("dp", {r0, r1});
  std::vector<TaskId> work, reduce, step;
  for (RankId r : {r0, r1}) {
    const StreamId cs = b.add_stream(r, "compute");
    const StreamId grad = b.add_stream(r, "dp-grad");
    work.push_back(d.add(b, compute(r, cs, Phase::kBackward), r == r0 ? 100 : 300));
    reduce.push_back(
        d.add(b, after(collective(r, grad, dp, 64, 0), work.back()), r == r0 ? 50 : 80));
    step.push_back(d.add(b, after(compute(r, cs, Phase::kOptimizer), reduce.back()), 20));
  }
  const Graph g = std::move(b).build();
  const SimResult res = simulate(g, d.by_task);

  EXPECT_EQ(res.makespan, 400);
  EXPECT_EQ(res.tasks[reduce[0].index()], (TaskTiming{300, 380}));
  EXPECT_EQ(res.tasks[reduce[1].index()], (TaskTiming{300, 380}));
  EXPECT_EQ(res.tasks[step[0].index()], (TaskTiming{380, 400}));
  // Rank 0: busy 100 + 20; the gap [100, 380] ends when the all-reduce completes.
  EXPECT_EQ(res.ranks[0].compute_busy, 120);
  EXPECT_EQ(res.ranks[0].idle, 280);
  EXPECT_EQ(res.ranks[0].bubble, bubble_map(0, 0, 0, 280, 0));
  EXPECT_THAT(res.ranks[0].bubbles,
              ElementsAre(Bubble{100, 380, BubbleCause::kWaitCollective, reduce[0]}));
  EXPECT_EQ(res.ranks[0].comm_exposed, 80);  // [300, 380] with no compute
  // Rank 1: busy 300 + 20; gap [300, 380].
  EXPECT_EQ(res.ranks[1].bubble, bubble_map(0, 0, 0, 80, 0));
  // Rank 1's A ended last before the rendezvous, so the chain runs through it.
  EXPECT_THAT(res.critical_path, ElementsAre(work[1], reduce[1], step[1]));
}

// One rank issues C1 (10), C2 (10) on "compute", then K (15), a collective on "dp" that waits
// for nothing. With 8 hardware queues K starts at once: [0, 15], hidden behind C1 and C2. With
// one queue the device dispatches in issue order, so K waits until C2 (issued before it, on
// another stream) has started at 10: [10, 25], and 5 ns are exposed.
TEST(Simulator, OneHardwareQueueSerialisesACommunicationStreamBehindEarlierCompute) {
  for (const std::int32_t queues : {8, 1}) {
    GraphBuilder b;
    Durations d;
    const RankId r = b.add_rank(Rank{.hardware_queues = queues});
    const GroupId solo = b.add_group("solo", {r});
    const StreamId cs = b.add_stream(r, "compute");
    const StreamId dp = b.add_stream(r, "dp");
    const TaskId c1 = d.add(b, compute(r, cs, Phase::kForward), 10);
    const TaskId c2 = d.add(b, compute(r, cs, Phase::kForward), 10);
    const TaskId k = d.add(b, collective(r, dp, solo, 8, 0), 15);
    const Graph g = std::move(b).build();
    const SimResult res = simulate(g, d.by_task);
    SCOPED_TRACE(queues);
    if (queues == 8) {
      EXPECT_EQ(res.tasks[k.index()], (TaskTiming{0, 15}));
      EXPECT_EQ(res.makespan, 20);
      EXPECT_EQ(res.ranks[0].comm_exposed, 0);
    } else {
      EXPECT_EQ(res.tasks[k.index()], (TaskTiming{10, 25}));
      EXPECT_EQ(res.makespan, 25);
      EXPECT_EQ(res.ranks[0].comm_exposed, 5);  // [20, 25]
      EXPECT_EQ(res.ranks[0].comm_overlapped, 10);
      // K's start was set by C2's start (hardware queue), which was set by C1's end.
      EXPECT_THAT(res.critical_path, ElementsAre(c1, c2, k));
    }
  }
}

// Rank 0: A (50) on "compute", a receive K from rank 1, a host wait on K, then F (100). Rank 1:
// C (300), then the send (20) after it. The pair runs [300, 320]; the host of rank 0 issues F
// only then: F [320, 420] and rank 0 idles [50, 320] waiting for the receive. Without the host
// wait F follows A at once: [50, 150].
TEST(Simulator, HostWaitStallsIssueUntilItsTargetCompletes) {
  for (const bool with_wait : {true, false}) {
    GraphBuilder b;
    Durations d;
    const RankId r0 = b.add_rank();
    const RankId r1 = b.add_rank();
    const StreamId c0 = b.add_stream(r0, "compute");
    const StreamId in = b.add_stream(r0, "pp-recv");
    const StreamId c1 = b.add_stream(r1, "compute");
    const StreamId out = b.add_stream(r1, "pp-send");
    d.add(b, compute(r0, c0, Phase::kForward), 50);
    const TaskId k = d.add(b, recv(r0, in, 1, 64, 7), 20);
    TaskId wait;
    if (with_wait) wait = d.add(b, host_wait(r0, k), 1000);  // host waits take no time
    const TaskId f = d.add(b, compute(r0, c0, Phase::kForward), 100);
    const TaskId c = d.add(b, compute(r1, c1, Phase::kForward), 300);
    d.add(b, after(send(r1, out, 0, 64, 7), c), 20);
    const Graph g = std::move(b).build();
    const SimResult res = simulate(g, d.by_task);
    SCOPED_TRACE(with_wait);
    EXPECT_EQ(res.tasks[k.index()], (TaskTiming{300, 320}));
    EXPECT_THAT(res.ranks[1].bytes_sent, ElementsAre(Pair(GroupId{}, 64)));
    EXPECT_TRUE(res.ranks[0].bytes_sent.empty());  // receiving is not sending
    if (with_wait) {
      EXPECT_EQ(res.tasks[wait.index()], (TaskTiming{320, 320}));
      EXPECT_EQ(res.tasks[f.index()], (TaskTiming{320, 420}));
      EXPECT_EQ(res.makespan, 420);
      EXPECT_EQ(res.ranks[0].bubble, bubble_map(0, 0, 270, 0, 0));  // 320 - 50
      EXPECT_THAT(res.ranks[0].bubbles, ElementsAre(Bubble{50, 320, BubbleCause::kWaitRecv, k}));
      EXPECT_EQ(res.ranks[1].bubble, bubble_map(0, 120, 0, 0, 0));  // 420 - 300
      EXPECT_THAT(res.critical_path, ElementsAre(c, k, wait, f));
    } else {
      EXPECT_EQ(res.tasks[f.index()], (TaskTiming{50, 150}));
      EXPECT_EQ(res.makespan, 320);
    }
  }
}

// Rank 0 computes C (1200 ns) on its "compute" stream and all-reduces (600 ns) on its "dp" stream;
// rank 1 computes X (300 ns), then all-reduces. tasks = {C, rank 0's all-reduce, X, rank 1's}.
struct OverlapStep {
  Graph graph;
  std::vector<Time> durations;
  std::array<TaskId, 4> tasks;
};

OverlapStep overlap_step() {
  GraphBuilder b;
  Durations d;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const GroupId dp = b.add_group("dp", {r0, r1});
  const StreamId c0 = b.add_stream(r0, "compute");
  const StreamId g0 = b.add_stream(r0, "dp");
  const StreamId c1 = b.add_stream(r1, "compute");
  const StreamId g1 = b.add_stream(r1, "dp");
  const TaskId c = d.add(b, compute(r0, c0, Phase::kBackward), 1200);
  const TaskId ar = d.add(b, collective(r0, g0, dp, 8, 0), 600);
  const TaskId x = d.add(b, compute(r1, c1, Phase::kBackward), 300);
  const TaskId ar1 = d.add(b, after(collective(r1, g1, dp, 8, 0), x), 600);
  return {std::move(b).build(), std::move(d.by_task), {c, ar, x, ar1}};
}

// Rank 0 computes C (1200) while an all-reduce (600) runs [300, 900] on its "dp" stream, after
// rank 1's X (300). With slow-down 0.5, C progresses at 1/1.5 while the all-reduce runs:
// 300 ns of work by 300, 600 / 1.5 = 400 more by 900, the remaining 1200 - 700 = 500 at full
// speed: C ends at 1400. Without slow-down it ends at 1200.
TEST(Simulator, ComputeSlowsDownWhileCommunicationRunsOnItsRank) {
  for (const double s : {0.5, 0.0}) {
    const OverlapStep o = overlap_step();
    const auto [c, ar, x, ar1] = o.tasks;
    const SimResult res = simulate(o.graph, o.durations, {.compute_slowdown_during_comm = s});
    SCOPED_TRACE(s);
    EXPECT_EQ(res.tasks[ar.index()], (TaskTiming{300, 900}));
    // Rank 1's compute is not slowed: its all-reduce starts after X ended.
    EXPECT_EQ(res.tasks[x.index()], (TaskTiming{0, 300}));
    if (s > 0) {
      EXPECT_EQ(res.tasks[c.index()], (TaskTiming{0, 1400}));
      EXPECT_EQ(res.makespan, 1400);
      EXPECT_EQ(res.ranks[0].compute_busy, 1400);
      EXPECT_EQ(res.ranks[0].comm_exposed, 0);
    } else {
      EXPECT_EQ(res.tasks[c.index()], (TaskTiming{0, 1200}));
      EXPECT_EQ(res.makespan, 1200);
    }
  }
}

// The same step with communication slow-down 1 (the all-reduce progresses at 1/2 while a member
// rank computes): rank 0's C runs until 1200, so by then the all-reduce did (1200 - 300) / 2 =
// 450 of its 600 and ends 150 later, at 1350, on both ranks. With compute slow-down 0.5 as well,
// both are slowed from 300: the all-reduce's 600 take 1200, to 1500; by then C did 300 +
// 1200 / 1.5 = 1100 of its 1200, and ends 100 later, at 1600.
TEST(Simulator, CommunicationSlowsDownWhileAMemberRankComputes) {
  for (const double compute_slowdown : {0.0, 0.5}) {
    const OverlapStep o = overlap_step();
    const auto [c, ar, x, ar1] = o.tasks;
    const SimResult res = simulate(
        o.graph, o.durations,
        {.compute_slowdown_during_comm = compute_slowdown, .comm_slowdown_during_compute = 1.0});
    SCOPED_TRACE(compute_slowdown);
    const Time ar_end = compute_slowdown > 0 ? 1500 : 1350;
    EXPECT_EQ(res.tasks[ar.index()], (TaskTiming{300, ar_end}));
    EXPECT_EQ(res.tasks[ar1.index()], (TaskTiming{300, ar_end}));
    EXPECT_EQ(res.tasks[c.index()], (TaskTiming{0, compute_slowdown > 0 ? 1600 : 1200}));
    EXPECT_EQ(res.ranks[1].comm_total, ar_end - 300);
  }
  // Without compute on a member's rank, nothing is slowed.
  GraphBuilder b;
  Durations d;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const GroupId dp = b.add_group("dp", {r0, r1});
  const TaskId ar = d.add(b, collective(r0, b.add_stream(r0, "dp"), dp, 8, 0), 600);
  d.add(b, collective(r1, b.add_stream(r1, "dp"), dp, 8, 0), 600);
  const Graph g = std::move(b).build();
  EXPECT_EQ(simulate(g, d.by_task, {.comm_slowdown_during_compute = 1.0}).tasks[ar.index()],
            (TaskTiming{0, 600}));
  EXPECT_THAT([&] { (void)simulate(g, d.by_task, {.comm_slowdown_during_compute = -1}); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("comm_slowdown_during_compute: -1; expected a finite number >= 0")));
}

// F1 stashes a (100 bytes), F2 stashes b (250), B2 frees b, B1 frees a; 10 ns each, one stream:
// 100 at 0, 350 at 10, back to 100 when B2 ends at 30, 0 when B1 ends at 40.
TEST(Simulator, MemoryFollowsAllocationsAndLastUses) {
  GraphBuilder b;
  Durations d;
  const RankId r = b.add_rank();
  const StreamId c = b.add_stream(r, "compute");
  const BufferId a = b.add_buffer(r, 100, "a");
  const BufferId z = b.add_buffer(r, 250, "b");
  Task f1 = compute(r, c, Phase::kForward, 0, 0);
  f1.allocates = {a};
  Task f2 = compute(r, c, Phase::kForward, 0, 1);
  f2.allocates = {z};
  Task b2 = compute(r, c, Phase::kBackward, 0, 1);
  b2.uses = {z};
  Task b1 = compute(r, c, Phase::kBackward, 0, 0);
  b1.uses = {a};
  for (Task* t : {&f1, &f2, &b2, &b1}) d.add(b, *t, 10);
  const Graph g = std::move(b).build();
  const SimResult res = simulate(g, d.by_task);
  EXPECT_EQ(res.ranks[0].peak_memory_bytes, 350);
  EXPECT_THAT(res.ranks[0].memory_timeline,
              ElementsAre(Pair(0, 100), Pair(10, 350), Pair(30, 100), Pair(40, 0)));
}

TEST(Simulator, ZeroDurationsRunInOrderAtTimeZero) {
  GraphBuilder b;
  const RankId r = b.add_rank();
  const StreamId c = b.add_stream(r, "compute");
  b.add(compute(r, c, Phase::kForward));
  b.add(compute(r, c, Phase::kBackward));
  const Graph g = std::move(b).build();
  const std::vector<Time> zero(2, 0);
  const SimResult res = simulate(g, zero);
  EXPECT_EQ(res.makespan, 0);
  EXPECT_THAT(res.tasks, ElementsAre(TaskTiming{0, 0}, TaskTiming{0, 0}));
  EXPECT_TRUE(res.ranks[0].bubbles.empty());
  EXPECT_EQ(res.ranks[0].idle, 0);
}

// Rank 0 posts the receive of microbatch 1's gradient before microbatch 0's; rank 1 sends them
// in the other order (tests/support/one_f_one_b_step.h). With unit durations: rank 0 runs F0
// [0, 1] and F1 [1, 2]; its B0 waits forever for the receive queued behind.
TEST(Simulator, SwappedReceivesDeadlockNamingTheBlockedTasksWithThePartialResult) {
  const Graph g = metron::testing::build_one_f_one_b_step({.swap_first_gradient_receives = true});
  const std::vector<Time> unit(static_cast<std::size_t>(g.num_tasks()), 1);
  const auto find = [&](std::int32_t rank, Phase phase, std::int32_t mb) {
    for (std::int32_t i = 0; i < g.num_tasks(); ++i) {
      const Task& t = g.task(TaskId{i});
      const auto* c = std::get_if<Compute>(&t.op);
      if (c && t.rank == RankId{rank} && c->phase == phase && t.microbatch == MicrobatchId{mb}) {
        return TaskId{i};
      }
    }
    return TaskId{};
  };
  try {
    (void)simulate(g, unit);
    FAIL() << "expected SimulationDeadlock";
  } catch (const SimulationDeadlock& e) {
    EXPECT_THAT(e.what(), HasSubstr("deadlock: no task can make progress"));
    EXPECT_THAT(e.blocked(),
                Contains(AllOf(HasSubstr("rank 0 stream \"pp-recv\": task 4 (rank 0, stage 0, "
                                         "microbatch 1): receive of gradient"),
                               HasSubstr("is ready but waits for its partners"))));
    EXPECT_THAT(e.blocked(), Contains(HasSubstr("rank 1 stream \"pp-send\"")));
    const SimResult& partial = e.partial();
    EXPECT_EQ(partial.tasks[find(0, Phase::kForward, 0).index()], (TaskTiming{0, 1}));
    EXPECT_EQ(partial.tasks[find(0, Phase::kForward, 1).index()], (TaskTiming{1, 2}));
    EXPECT_EQ(partial.tasks[find(0, Phase::kBackward, 0).index()], (TaskTiming{-1, -1}));
    EXPECT_EQ(partial.tasks[find(0, Phase::kForward, 2).index()], (TaskTiming{-1, -1}));
    EXPECT_EQ(partial.ranks.size(), 4U);
  }
}

TEST(Simulator, SameInputGivesIdenticalResults) {
  const Graph g = metron::testing::build_one_f_one_b_step({.pp = 4, .dp = 2, .microbatches = 8});
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()));
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<Time>(100 + (i * 37) % 501);
  const SimResult a = simulate(g, d, {.compute_slowdown_during_comm = 0.2});
  const SimResult b = simulate(g, d, {.compute_slowdown_during_comm = 0.2});
  EXPECT_EQ(a, b);
  EXPECT_GT(a.makespan, 0);
}

// Without slow-down the engine skips the slow-down bookkeeping (every task has exactly one end);
// with a slow-down factor but no communication that takes time, that bookkeeping runs and must
// never change a thing: communication of zero duration never slows compute down.
TEST(Simulator, SlowDownWithoutTimedCommunicationGivesTheResultOfNoSlowDown) {
  const Graph g = metron::testing::build_one_f_one_b_step({.pp = 4, .dp = 3, .microbatches = 8});
  std::vector<Time> d(static_cast<std::size_t>(g.num_tasks()), 0);
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (g.tasks()[i].kind() == TaskKind::kCompute) d[i] = static_cast<Time>(100 + (i * 37) % 501);
  }
  const SimResult plain = simulate(g, d);
  EXPECT_EQ(simulate(g, d, {.compute_slowdown_during_comm = 0.5}), plain);
  EXPECT_GT(plain.makespan, 0);
}

TEST(Simulator, RejectsDurationsOfTheWrongSize) {
  const Graph g = metron::testing::build_one_f_one_b_step({});
  const std::vector<Time> d(3, 1);
  EXPECT_THAT([&] { (void)simulate(g, d); },
              ::testing::ThrowsMessage<InvalidConfig>(HasSubstr(
                  "durations: 3 entries for a graph of " + std::to_string(g.num_tasks()))));
}

TEST(Simulator, RejectsNegativeDurationsNamingTheTask) {
  GraphBuilder b;
  const RankId r = b.add_rank();
  const StreamId c = b.add_stream(r, "compute");
  b.add(compute(r, c, Phase::kForward, 0, 0));
  b.add(compute(r, c, Phase::kBackward, 0, 3));
  const Graph g = std::move(b).build();
  const std::vector<Time> d{5, -2};
  EXPECT_THAT([&] { (void)simulate(g, d); },
              ::testing::ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("durations: 1 negative entry"),
                        HasSubstr("task 1 (rank 0, stage 0, microbatch 3)"),
                        HasSubstr("duration -2 ns; expected >= 0"))));
  const std::vector<Time> ok{5, 2};
  EXPECT_THAT([&] { (void)simulate(g, ok, {.compute_slowdown_during_comm = -0.1}); },
              ::testing::ThrowsMessage<InvalidConfig>(
                  HasSubstr("compute_slowdown_during_comm: -0.1; expected a finite number >= 0")));
}

// Issue 14: durations whose sum would overflow int64 nanoseconds (explicit costs of 5e11 ms
// crashed the engine) are refused, naming the sum and the limit.
TEST(Simulator, RefusesDurationsWhoseSumCouldOverflowTheClock) {
  GraphBuilder b;
  const RankId r = b.add_rank();
  const StreamId c = b.add_stream(r, "compute");
  b.add(compute(r, c, Phase::kForward, 0, 0));
  b.add(compute(r, c, Phase::kBackward, 0, 0));
  const Graph g = std::move(b).build();
  const Time huge = Time{1} << 61;
  const std::vector<Time> d{huge, huge};
  EXPECT_THAT([&] { (void)simulate(g, d); },
              ::testing::ThrowsMessage<InvalidConfig>(AllOf(HasSubstr("durations: their sum is"),
                                                            HasSubstr("expected at most"),
                                                            HasSubstr("int64 nanoseconds"))));
  // The slowdown stretches compute, so it lowers the limit.
  const std::vector<Time> large{Time{1} << 58, 1};
  EXPECT_NO_THROW((void)simulate(g, large));
  EXPECT_THROW((void)simulate(g, large, {.compute_slowdown_during_comm = 7}), InvalidConfig);
}

TEST(Simulator, ConvertsSecondsAndMillisecondsToNanoseconds) {
  EXPECT_EQ(from_seconds(1.5), 1'500'000'000);
  EXPECT_EQ(from_milliseconds(0.0025), 2'500);
  EXPECT_EQ(from_milliseconds(1e-7), 0);  // 0.1 ns rounds to 0
  EXPECT_EQ(to_string(BubbleCause::kWaitCollective), "wait_collective");
  EXPECT_EQ(to_string(BubbleCause::kWarmup), "warmup");
}

}  // namespace
}  // namespace metron::sim
