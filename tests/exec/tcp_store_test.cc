// metron's own rendezvous store (exec/tcp_store.h, Note [tcp store]) over real sockets on the
// loopback interface, each rank a TcpStore of its own on a thread of this test (rank 0 serving):
// values cross ranks, a get waits for a later set, the barrier holds every rank until the last
// arrives, and what cannot succeed fails within its timeout naming the key or the address.

#include "metron/exec/tcp_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "metron/base/error.h"
#include "support/free_port.h"

namespace metron::exec {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::HasSubstr;

Rendezvous at(std::int32_t port, std::int32_t rank, std::int32_t world_size,
              milliseconds timeout = milliseconds(10000)) {
  return {.host = "127.0.0.1",
          .port = port,
          .rank = rank,
          .world_size = world_size,
          .timeout = timeout};
}

/// Runs `body(rank, store)` for every rank on a thread of its own, each with its own TcpStore;
/// returns what each threw ("" when nothing).
std::vector<std::string> on_every_rank(std::int32_t world_size,
                                       const std::function<void(std::int32_t, TcpStore&)>& body) {
  const std::int32_t port = testing::free_port();
  std::vector<std::string> errors(static_cast<std::size_t>(world_size));
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        TcpStore store(at(port, r, world_size));
        body(r, store);
        // Rank 0 serves: it stays until every rank is done with the store.
        store.barrier();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(TcpStore, AValueSetByOneRankIsReadByEveryOther) {
  const std::string big(std::size_t{3} << 20, 'x');  // several reads and writes of the socket
  std::vector<std::string> got(3);
  std::vector<std::string> got_big(3);
  const auto errors = on_every_rank(3, [&](std::int32_t rank, TcpStore& store) {
    if (rank == 2) {
      store.store_set("greeting", "hello from 2");
      store.store_set("big", big);
      store.store_set("empty", "");
    }
    got[static_cast<std::size_t>(rank)] = store.store_get("greeting");
    got_big[static_cast<std::size_t>(rank)] = store.store_get("big");
    EXPECT_EQ(store.store_get("empty"), "");
  });
  EXPECT_THAT(errors, ::testing::Each(""));
  EXPECT_THAT(got, ::testing::Each("hello from 2"));
  EXPECT_TRUE(std::ranges::all_of(got_big, [&](const std::string& v) { return v == big; }));
}

TEST(TcpStore, AGetWaitsForASetThatComesLater) {
  std::atomic<std::int64_t> set_at{0};
  std::atomic<std::int64_t> got_at{0};
  std::string value;
  const auto errors = on_every_rank(2, [&](std::int32_t rank, TcpStore& store) {
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(150));
      set_at = Clock::now().time_since_epoch().count();
      store.store_set("late", "here");
    } else {
      value = store.store_get("late");
      got_at = Clock::now().time_since_epoch().count();
    }
  });
  EXPECT_THAT(errors, ::testing::Each(""));
  EXPECT_EQ(value, "here");
  EXPECT_GE(got_at.load(), set_at.load());
}

TEST(TcpStore, TheBarrierHoldsEveryRankUntilTheLastArrives) {
  constexpr std::int32_t kRanks = 4;
  constexpr int kRounds = 3;
  // For each round: when the late rank entered, and when each rank left.
  std::vector<std::atomic<std::int64_t>> late_entered(kRounds);
  std::vector<std::vector<std::int64_t>> left(kRounds, std::vector<std::int64_t>(kRanks));
  const auto errors = on_every_rank(kRanks, [&](std::int32_t rank, TcpStore& store) {
    for (int round = 0; round < kRounds; ++round) {
      const std::int32_t late = round % kRanks;  // a different rank comes late each round
      if (rank == late) {
        std::this_thread::sleep_for(milliseconds(100));
        late_entered[static_cast<std::size_t>(round)] = Clock::now().time_since_epoch().count();
      }
      store.barrier();
      left[static_cast<std::size_t>(round)][static_cast<std::size_t>(rank)] =
          Clock::now().time_since_epoch().count();
    }
  });
  EXPECT_THAT(errors, ::testing::Each(""));
  for (int round = 0; round < kRounds; ++round) {
    for (const std::int64_t t : left[static_cast<std::size_t>(round)]) {
      EXPECT_GE(t, late_entered[static_cast<std::size_t>(round)].load()) << "round " << round;
    }
  }
}

TEST(TcpStore, RankZeroServesUntilEveryOtherRankHasLeft) {
  const std::int32_t port = testing::free_port();
  std::atomic<std::int64_t> rank0_gone{0};
  std::atomic<std::int64_t> rank1_read{0};
  std::string value;
  std::string error;
  std::thread rank1([&] {
    try {
      TcpStore store(at(port, 1, 2));
      store.store_set("k", "v");
      store.barrier();
      // Rank 0 has left the barrier and is ending its store; the server still answers.
      std::this_thread::sleep_for(milliseconds(150));
      value = store.store_get("k");
      rank1_read = Clock::now().time_since_epoch().count();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  {
    TcpStore store(at(port, 0, 2));
    store.barrier();
  }
  rank0_gone = Clock::now().time_since_epoch().count();
  rank1.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(value, "v");
  EXPECT_GE(rank0_gone.load(), rank1_read.load());
}

TEST(TcpStore, AddSumsWhatEveryRankAdds) {
  std::vector<std::int64_t> sums(3);
  const auto errors = on_every_rank(3, [&](std::int32_t rank, TcpStore& store) {
    sums[static_cast<std::size_t>(rank)] = store.add("counter", 5);
  });
  EXPECT_THAT(errors, ::testing::Each(""));
  std::ranges::sort(sums);
  EXPECT_THAT(sums, ::testing::ElementsAre(5, 10, 15));
}

TEST(TcpStore, AGetOfAKeyNobodySetsFailsWithinTheTimeoutNamingTheKey) {
  const std::int32_t port = testing::free_port();
  TcpStore store(at(port, 0, 1, milliseconds(200)));
  const auto start = Clock::now();
  try {
    static_cast<void>(store.store_get("nobody/sets/this"));
    FAIL() << "expected a timeout";
  } catch (const BackendError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'user/nobody/sets/this'"), HasSubstr("within 200 ms"),
                                HasSubstr("127.0.0.1:" + std::to_string(port))));
  }
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  // The connection is not used again: a late reply would answer the wrong request.
  EXPECT_THROW(store.store_set("after", "x"), BackendError);
}

TEST(TcpStore, ABarrierARankNeverReachesFailsWithinTheTimeoutCountingWhoArrived) {
  // A world of 3 in which only rank 0 ever starts.
  TcpStore store(at(testing::free_port(), 0, 3, milliseconds(200)));
  try {
    store.barrier();
    FAIL() << "expected a timeout";
  } catch (const BackendError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'barrier/0/open' within 200 ms"),
                                HasSubstr("1 of 3 ranks had reached this barrier")));
  }
}

TEST(TcpStore, ARankWhoseRankZeroNeverServesFailsNamingTheAddress) {
  const std::int32_t port = testing::free_port();
  try {
    const TcpStore store(at(port, 1, 2, milliseconds(300)));
    FAIL() << "expected no answer";
  } catch (const BackendError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("127.0.0.1:" + std::to_string(port)),
                                HasSubstr("did not answer within 300 ms")));
  }
}

TEST(TcpStore, RankZeroRefusesAPortSomebodyElseServes) {
  const std::int32_t port = testing::free_port();
  const TcpStore first(at(port, 0, 2));
  try {
    const TcpStore second(at(port, 0, 2));
    FAIL() << "expected the port to be taken";
  } catch (const BackendError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot serve the store on port " + std::to_string(port)),
                                HasSubstr("--store-port")));
  }
}

TEST(TcpStore, RefusesARankOutsideTheWorldAndABadPort) {
  EXPECT_THROW(TcpStore(at(testing::free_port(), 2, 2)), InvalidConfig);
  EXPECT_THROW(TcpStore(at(testing::free_port(), -1, 2)), InvalidConfig);
  EXPECT_THROW(TcpStore(at(0, 0, 1)), InvalidConfig);
  EXPECT_THROW(TcpStore(at(70000, 0, 1)), InvalidConfig);
}

TEST(TcpStore, AStrayConnectionSendingGarbageIsDroppedAndTheRanksGoOn) {
  const std::int32_t port = testing::free_port();
  TcpStore rank0(at(port, 0, 2));
  // Something that is not a rank: an op the protocol does not have, then a huge key length.
  for (const std::string& garbage :
       {std::string("GET / HTTP/1.1\r\n\r\n"), std::string("s\xff\xff\xff\xff", 5)}) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes sockaddr*
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(garbage.size()));
    // The server closes it: a read sees the end of the stream.
    char byte = 0;
    EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);
    ::close(fd);
  }
  TcpStore rank1(at(port, 1, 2));
  rank1.store_set("still", "working");
  EXPECT_EQ(rank0.store_get("still"), "working");
}

}  // namespace
}  // namespace metron::exec
