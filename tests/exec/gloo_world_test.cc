// GlooWorld between real worker processes (the local launcher): every collective op moves the
// right values on 2 and 3 ranks and on a group without every rank, the ordinal turn orders calls
// that threads make in opposite orders, send/recv, the store, and the failures (a dead peer, no
// store). GlooWorld is only ever created inside workers: launch_local needs a single-threaded
// caller, and Gloo starts threads.

#include "metron/exec/gloo_world.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gloo_world_test_access.h"
#include "metron/base/error.h"
#include "metron/exec/local_launcher.h"
#include "metron/exec/torch_compute.h"
#include "metron/exec/wire_layout.h"
#include "support/free_port.h"

namespace metron::exec {
namespace {

using ir::CollectiveOp;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using testing::free_port;

Rendezvous rendezvous(std::int32_t port, std::int32_t rank, std::int32_t world_size,
                      std::chrono::milliseconds timeout = 10s) {
  return {.port = port, .rank = rank, .world_size = world_size, .timeout = timeout};
}

LaunchResult launch(std::int32_t workers, const WorkerFunction& work) {
  // Linking libtorch loads Debian's pthreads OpenBLAS, whose thread pool starts before main;
  // launch_local forks only a single-threaded process.
  stop_blas_threads();
  return launch_local({.workers = workers, .timeout = 20s}, work);
}

std::string failure_of(const LaunchResult& result) {
  return result.ok() ? "" : result.failure->message;
}

// ---- the wire layout -----------------------------------------------------------------------

TEST(GlooWireLayout, CarriesBf16AsFp16AndFp8AsBytes) {
  EXPECT_EQ(detail::wire_type(ir::DType::kBf16), detail::WireType::kFloat16);
  EXPECT_EQ(detail::wire_type(ir::DType::kFp8), detail::WireType::kUint8);
  EXPECT_EQ(detail::wire_type(ir::DType::kFp32), detail::WireType::kFloat32);
  EXPECT_EQ(detail::element_bytes(detail::WireType::kFloat16), 2);
  EXPECT_EQ(detail::element_bytes(detail::WireType::kInt64), 8);
}

TEST(GlooWireLayout, SplitOpsRoundTheChunkUpSoTheBufferDividesEvenly) {
  const detail::WireLayout gather = detail::wire_layout(
      {.op = CollectiveOp::kAllGather, .bytes = 100, .dtype = ir::DType::kFp32}, 3);
  EXPECT_EQ(gather.chunk_elements, 9);  // 100 bytes / 3 members / 4 bytes, rounded up
  EXPECT_EQ(gather.call_elements, 27);
  EXPECT_EQ(gather.input_elements(), 9);
  EXPECT_EQ(gather.output_elements(), 27);

  const detail::WireLayout scatter = detail::wire_layout(
      {.op = CollectiveOp::kReduceScatter, .bytes = 96, .dtype = ir::DType::kBf16, .count = 2}, 2);
  EXPECT_EQ(scatter.calls, 2);
  EXPECT_EQ(scatter.call_elements, 24);  // 48 bytes per call = 24 fp16
  EXPECT_EQ(scatter.input_elements(), 24);
  EXPECT_EQ(scatter.output_elements(), 12);
}

TEST(GlooWireLayout, WholeBufferOpsSplitBytesAmongCalls) {
  const detail::WireLayout reduce = detail::wire_layout(
      {.op = CollectiveOp::kAllReduce, .bytes = 10, .dtype = ir::DType::kFp32, .count = 3}, 4);
  EXPECT_EQ(reduce.calls, 3);
  EXPECT_EQ(reduce.call_elements, 1);  // 4 bytes per call (10/3 rounded up) = 1 float
  EXPECT_EQ(reduce.chunk_elements, 1);
  EXPECT_EQ(detail::wire_layout({.op = CollectiveOp::kBroadcast, .bytes = 0}, 2).call_elements, 0);
}

TEST(GlooWireLayout, CountBelowOneIsAnInputError) {
  try {
    (void)detail::wire_layout({.op = CollectiveOp::kAllReduce, .bytes = 8, .count = 0}, 2);
    FAIL() << "expected InvalidConfig";
  } catch (const InvalidConfig& error) {
    EXPECT_STREQ(error.what(),
                 "all-reduce: expected count >= 1 and a non-empty group; got count 0, group "
                 "size 2");
  }
}

// ---- values ----------------------------------------------------------------------------------

constexpr std::int64_t kWhole = 6;  // elements per call of all-reduce, reduce, broadcast
constexpr std::int64_t kChunk = 4;  // elements per member per call of the split ops

// What rank `rank` holds at element `i` of call `call`: distinct per rank, element and call.
std::int32_t value(std::int32_t rank, std::int32_t call, std::int64_t i) {
  return (rank + 1) * 1000 + call * 100 + static_cast<std::int32_t>(i);
}

bool is_split(CollectiveOp op) {
  return op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kAllToAll;
}

struct Case {
  CollectiveOp op;
  std::int32_t count;
};

// The inputs and the expected outputs of one case, computed from value() alone.
struct Expectation {
  std::vector<std::int32_t> input;
  std::vector<std::int32_t> output;  // empty: this rank's output is unspecified (reduce, non-root)
};

Expectation expect(const Case& c, const std::vector<std::int32_t>& members, std::int32_t local,
                   std::int32_t root) {
  const auto size = static_cast<std::int64_t>(members.size());
  const std::int32_t rank = members[static_cast<std::size_t>(local)];
  Expectation e;
  for (std::int32_t call = 0; call < c.count; ++call) {
    const std::int64_t in = c.op == CollectiveOp::kAllGather ? kChunk
                            : is_split(c.op)                 ? kChunk * size
                                                             : kWhole;
    for (std::int64_t i = 0; i < in; ++i) e.input.push_back(value(rank, call, i));
    auto sum = [&](std::int64_t i) {
      std::int32_t total = 0;
      for (std::int32_t m : members) total += value(m, call, i);
      return total;
    };
    switch (c.op) {
      case CollectiveOp::kAllReduce:
        for (std::int64_t i = 0; i < kWhole; ++i) e.output.push_back(sum(i));
        break;
      case CollectiveOp::kReduce:
        if (rank == root) {
          for (std::int64_t i = 0; i < kWhole; ++i) e.output.push_back(sum(i));
        }
        break;
      case CollectiveOp::kBroadcast:
        for (std::int64_t i = 0; i < kWhole; ++i) e.output.push_back(value(root, call, i));
        break;
      case CollectiveOp::kAllGather:
        for (std::int32_t m : members) {
          for (std::int64_t i = 0; i < kChunk; ++i) e.output.push_back(value(m, call, i));
        }
        break;
      case CollectiveOp::kReduceScatter:
        for (std::int64_t i = 0; i < kChunk; ++i) e.output.push_back(sum(local * kChunk + i));
        break;
      case CollectiveOp::kAllToAll:
        for (std::int32_t m : members) {
          for (std::int64_t i = 0; i < kChunk; ++i) {
            e.output.push_back(value(m, call, local * kChunk + i));
          }
        }
        break;
    }
  }
  return e;
}

std::vector<std::byte> to_bytes(const std::vector<std::int32_t>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(std::int32_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<std::int32_t> from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<std::int32_t> values(bytes.size() / sizeof(std::int32_t));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(std::int32_t));
  return values;
}

std::string describe(const std::vector<std::int32_t>& values) {
  std::string text;
  for (std::int32_t v : values) text += (text.empty() ? "" : " ") + std::to_string(v);
  return text;
}

// Runs every op (count 1 and 2) on group `group` and throws on the first wrong value.
void check_every_op(GlooWorld& world, std::int32_t group, const std::vector<std::int32_t>& members,
                    std::int32_t rank) {
  const auto local =
      static_cast<std::int32_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  const std::int32_t root = members.back();  // not group index 0
  const auto size = static_cast<std::int64_t>(members.size());
  std::int64_t ordinal = 0;
  // 0 bytes moves nothing but still takes its turn: the ordinals after it must not wait.
  world.collective(group, ordinal++, {.op = CollectiveOp::kAllReduce, .bytes = 0});
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
        CollectiveOp::kReduce, CollectiveOp::kBroadcast, CollectiveOp::kAllToAll}) {
    for (std::int32_t count : {1, 2}) {
      const std::int64_t elements = (is_split(op) ? kChunk * size : kWhole) * count;
      const ir::Collective collective{.op = op,
                                      .bytes = elements * 4,
                                      .dtype = ir::DType::kInt32,
                                      .root = ir::RankId{root},
                                      .count = count};
      const Expectation e = expect({op, count}, members, local, root);
      GlooWorldTestAccess::write_input(world, group, collective, to_bytes(e.input));
      world.collective(group, ordinal++, collective);
      if (e.output.empty()) continue;
      const std::vector<std::int32_t> got =
          from_bytes(GlooWorldTestAccess::read_output(world, group, collective));
      if (got != e.output) {
        throw std::runtime_error(std::string(ir::to_string(op)) + " x" + std::to_string(count) +
                                 " on group " + std::to_string(group) + ": expected [" +
                                 describe(e.output) + "], got [" + describe(got) + "]");
      }
    }
  }
  // Types that Gloo does not have travel as types it has: they complete too.
  world.collective(group, ordinal++,
                   {.op = CollectiveOp::kAllReduce, .bytes = 4096, .dtype = ir::DType::kBf16});
  world.collective(group, ordinal++,
                   {.op = CollectiveOp::kReduceScatter, .bytes = 4096, .dtype = ir::DType::kFp8});
  world.collective(group, ordinal++,
                   {.op = CollectiveOp::kAllGather, .bytes = 4096, .dtype = ir::DType::kFp8});
}

TEST(GlooWorld, EveryCollectiveMovesTheRightValuesOnTwoRanks) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 2), {{0, 1}});
    check_every_op(world, 0, {0, 1}, rank);
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

TEST(GlooWorld, EveryCollectiveMovesTheRightValuesOnThreeRanksAndOnAGroupWithoutEveryRank) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(3, [&](std::int32_t rank, WorkerChannel&) {
    // Group 1 = {2, 0}: rank 1 is no member, and group order differs from rank order.
    const std::vector<std::vector<std::int32_t>> groups{{0, 1, 2}, {2, 0}};
    GlooWorld world(rendezvous(port, rank, 3), groups);
    check_every_op(world, 0, groups[0], rank);
    if (rank != 1) {
      check_every_op(world, 1, groups[1], rank);
      return;
    }
    try {
      world.collective(1, 0, {.op = CollectiveOp::kAllReduce, .bytes = 8});
      throw std::runtime_error("a non-member's collective did not throw");
    } catch (const InvalidConfig& error) {
      if (std::string(error.what()) != "gloo collective: rank 1 is not a member of group 1") {
        throw std::runtime_error(std::string("wrong message: ") + error.what());
      }
    }
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

TEST(GlooWorld, ARootOutsideTheGroupIsAnInputError) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(3, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 3), {{0, 2}});
    if (rank == 1) return;
    try {
      world.collective(0, 0, {.op = CollectiveOp::kBroadcast, .bytes = 8, .root = ir::RankId{1}});
      throw std::runtime_error("a root outside the group did not throw");
    } catch (const InvalidConfig& error) {
      if (std::string(error.what()) !=
          "gloo group 0: root rank 1 is not a member; members are 0, 2") {
        throw std::runtime_error(std::string("wrong message: ") + error.what());
      }
    }
    // The failed call took no turn: ordinal 0 is still free, on both members.
    world.collective(0, 0, {.op = CollectiveOp::kBroadcast, .bytes = 8, .root = ir::RankId{2}});
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

// ---- the ordinal turn ------------------------------------------------------------------------

TEST(GlooWorld, TheOrdinalTurnIssuesCallsFromThreadsInTheSameOrderOnEveryMember) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 2), {{0, 1}});
    const std::vector<std::int32_t> members{0, 1};
    // Different ops and sizes: issued in different orders, Gloo would mismatch them or hang.
    const ir::Collective first{
        .op = CollectiveOp::kAllGather, .bytes = kChunk * 2 * 4, .dtype = ir::DType::kInt32};
    const ir::Collective second{
        .op = CollectiveOp::kAllReduce, .bytes = kWhole * 4, .dtype = ir::DType::kInt32};
    const Expectation e0 = expect({first.op, 1}, members, rank, 0);
    const Expectation e1 = expect({second.op, 1}, members, rank, 0);
    GlooWorldTestAccess::write_input(world, 0, first, to_bytes(e0.input));
    GlooWorldTestAccess::write_input(world, 0, second, to_bytes(e1.input));
    auto call = [&](std::int64_t ordinal) {
      return std::thread([&world, &first, &second, ordinal] {
        world.collective(0, ordinal, ordinal == 0 ? first : second);
      });
    };
    // Rank 0 starts ordinal 1 first, rank 1 starts ordinal 0 first.
    std::thread early = call(rank == 0 ? 1 : 0);
    std::this_thread::sleep_for(100ms);
    std::thread late = call(rank == 0 ? 0 : 1);
    early.join();
    late.join();
    if (from_bytes(GlooWorldTestAccess::read_output(world, 0, first)) != e0.output ||
        from_bytes(GlooWorldTestAccess::read_output(world, 0, second)) != e1.output) {
      throw std::runtime_error("wrong values after calls from two threads");
    }
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

TEST(GlooWorld, AllGathersRunningAtOnceOnOneGroupKeepTheirValuesApart) {
  // All-gathers pass the turn before they move anything (gloo_world.h): two of them, from two
  // threads, run at the same time on one group, and each must receive its own members' chunks.
  const std::int32_t port = free_port();
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 2), {{0, 1}});
    const std::vector<std::int32_t> members{0, 1};
    const ir::Collective big{.op = CollectiveOp::kAllGather,
                             .bytes = kChunk * 2 * 4 * 2,
                             .dtype = ir::DType::kInt32,
                             .count = 2};
    const ir::Collective small{
        .op = CollectiveOp::kAllGather, .bytes = kChunk * 2 * 4, .dtype = ir::DType::kInt32};
    const Expectation e_big = expect({big.op, 2}, members, rank, 0);
    const Expectation e_small = expect({small.op, 1}, members, rank, 0);
    for (int round = 0; round < 20; ++round) {
      GlooWorldTestAccess::write_input(world, 0, big, to_bytes(e_big.input));
      GlooWorldTestAccess::write_input(world, 0, small, to_bytes(e_small.input));
      const std::int64_t first = 2 * round;
      std::thread a([&] { world.collective(0, first, big); });
      std::thread b([&] { world.collective(0, first + 1, small); });
      a.join();
      b.join();
      if (from_bytes(GlooWorldTestAccess::read_output(world, 0, big)) != e_big.output ||
          from_bytes(GlooWorldTestAccess::read_output(world, 0, small)) != e_small.output) {
        throw std::runtime_error("round " + std::to_string(round) +
                                 ": an all-gather received another one's values");
      }
    }
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

// ---- point-to-point, barrier, store ----------------------------------------------------------

TEST(GlooWorld, SendAndRecvMatchByTagWhateverTheOrderTheyArePostedIn) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(3, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 3), {});
    const std::int32_t next = (rank + 1) % 3;
    const std::int32_t previous = (rank + 2) % 3;
    // Two transfers per pair with different sizes; the receiver posts them in reverse order.
    std::thread send_a([&] { world.send(next, 1000, 5); });
    std::thread send_b([&] { world.send(next, 300000, 9); });
    std::thread recv_b([&] { world.recv(previous, 300000, 9); });
    std::this_thread::sleep_for(50ms);
    world.recv(previous, 1000, 5);
    for (std::thread* t : {&send_a, &send_b, &recv_b}) t->join();
    world.send(next, 0, 1);  // nothing to move: returns at once, no recv needed
    world.barrier();
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

TEST(GlooWorld, TheStoreCarriesValuesBetweenRanks) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(3, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 3), {});
    world.store_set("result/" + std::to_string(rank), "from rank " + std::to_string(rank));
    if (rank != 0) return;
    for (std::int32_t r = 0; r < 3; ++r) {
      const std::string got = world.store_get("result/" + std::to_string(r));
      if (got != "from rank " + std::to_string(r)) throw std::runtime_error("store got " + got);
    }
  });
  EXPECT_TRUE(result.ok()) << failure_of(result);
}

// ---- failures --------------------------------------------------------------------------------

// Worker errors reach the launcher as text: this keeps the type in it.
template <class F>
void rethrow_backend_error(F&& f) {
  try {
    f();
  } catch (const BackendError& error) {
    throw std::runtime_error(std::string("BackendError: ") + error.what());
  }
}

TEST(GlooWorld, AMissingKeyThrowsBackendErrorNamingTheKey) {
  const std::int32_t port = free_port();
  const LaunchResult result = launch(1, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 1, 300ms), {});
    rethrow_backend_error([&] { (void)world.store_get("never-set"); });
  });
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.failure->message.find(
                "rank 0: BackendError: gloo rendezvous at 127.0.0.1:" + std::to_string(port) +
                " (rank 0 of 1): getting key 'never-set': "),
            std::string::npos)
      << result.failure->message;
}

TEST(GlooWorld, NoStoreThrowsBackendErrorNamingHostAndPort) {
  const std::int32_t port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = launch(1, [&](std::int32_t, WorkerChannel&) {
    // Rank 1 of 2 alone: nobody hosts the store.
    rethrow_backend_error([&] { GlooWorld world(rendezvous(port, 1, 2, 500ms), {}); });
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_NE(result.failure->message.find(
                "rank 0: BackendError: gloo rendezvous at 127.0.0.1:" + std::to_string(port) +
                " (rank 1 of 2): connecting to the store: "),
            std::string::npos)
      << result.failure->message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(GlooWorld, RanksThatNeverJoinAreNamedAfterOneTimeout) {
  const std::int32_t port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    // Ranks 0 and 2 of a world of 4 start; 1 and 3 never do.
    rethrow_backend_error(
        [&] { GlooWorld world(rendezvous(port, rank == 0 ? 0 : 2, 4, 2000ms), {}); });
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_THAT(result.failure->message,
              HasSubstr("BackendError: gloo rendezvous at 127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(result.failure->message,
              HasSubstr("waiting for every rank to join: 2 of 4 ranks did not join within 2 s "
                        "(ranks 1, 3); expected one process per rank"));
  // One timeout (2 s), not c10d's wait for workers and then Gloo's own after it (4 s and more).
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3900ms);
}

TEST(GlooWorld, ADeadPeerFailsAnAllGatherWithBackendErrorLongBeforeTheTimeout) {
  // All-gather runs on the group's second Gloo context, not the process group: a peer that dies
  // after that context is connected must fail it as fast as the process group's ops.
  const std::int32_t port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const ir::Collective gather{.op = CollectiveOp::kAllGather, .bytes = 1 << 20};
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 2, 10s), {{0, 1}});
    world.collective(0, 0, gather);  // connects the second context on both ranks
    world.barrier();
    if (rank == 1) ::_exit(0);
    std::this_thread::sleep_for(100ms);
    rethrow_backend_error([&] { world.collective(0, 1, gather); });
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_EQ(result.failure->rank, 0);
  EXPECT_NE(result.failure->message.find(
                "rank 0: BackendError: gloo all-gather on group 0 (ordinal 1, 1048576 bytes): "),
            std::string::npos)
      << result.failure->message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // the op timeout is 10 s
}

TEST(GlooWorld, ADeadPeerFailsTheCollectiveWithBackendErrorLongBeforeTheTimeout) {
  const std::int32_t port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = launch(2, [&](std::int32_t rank, WorkerChannel&) {
    GlooWorld world(rendezvous(port, rank, 2, 10s), {{0, 1}});
    world.barrier();
    if (rank == 1) ::_exit(0);  // gone without a word: the launcher sees a clean exit
    std::this_thread::sleep_for(100ms);
    rethrow_backend_error(
        [&] { world.collective(0, 0, {.op = CollectiveOp::kAllReduce, .bytes = 1 << 20}); });
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, FailureKind::kError);
  EXPECT_EQ(result.failure->rank, 0);
  EXPECT_NE(result.failure->message.find(
                "rank 0: BackendError: gloo all-reduce on group 0 (ordinal 0, 1048576 bytes): "),
            std::string::npos)
      << result.failure->message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // the op timeout is 10 s
}

}  // namespace
}  // namespace metron::exec
