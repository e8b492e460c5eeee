#pragma once
// Where the ranks of a run meet, and what they share besides their backend's communication: a
// barrier before each iteration (its origin is the one instant they share) and a store of small
// text values (every rank's measurements gathered at rank 0, NCCL's unique ids). The CPU backend
// gets both from Gloo (gloo_world.h); the CUDA backend, which needs no libtorch, from metron's
// own TcpStore (tcp_store.h).

#include <chrono>
#include <cstdint>
#include <string>

namespace metron::exec {

/// Where the ranks meet: rank 0 hosts the store on host:port, the others connect.
struct Rendezvous {
  std::string host = "127.0.0.1";
  std::int32_t port = 0;
  std::int32_t rank = 0;
  std::int32_t world_size = 1;
  std::chrono::milliseconds timeout{30000};  ///< store connect, a get, a barrier (and Gloo's ops)
};

/// A barrier and a key-value store over every rank of a run.
class RankStore {
 public:
  RankStore() = default;
  virtual ~RankStore() = default;
  RankStore(const RankStore&) = delete;
  RankStore& operator=(const RankStore&) = delete;
  RankStore(RankStore&&) = delete;
  RankStore& operator=(RankStore&&) = delete;

  /// Returns once every rank has called its barrier as often as this one has.
  virtual void barrier() = 0;
  /// Sets `key` for every rank.
  virtual void store_set(const std::string& key, const std::string& value) = 0;
  /// Blocks until `key` is set, or the timeout passes (BackendError naming the key).
  [[nodiscard]] virtual std::string store_get(const std::string& key) = 0;
};

}  // namespace metron::exec
