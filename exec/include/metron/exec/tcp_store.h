#pragma once
// metron's own rendezvous store over TCP, without libtorch: what the CUDA backend's ranks meet
// through, so that `metron run --backend cuda` runs where only CUDA and NCCL are installed.
//
// Note [tcp store]
//   - Rank 0 serves: a thread of its own listens on the rendezvous port (on the loopback address
//     when the rendezvous host is one, so a local run opens nothing to the network; else on every
//     IPv4 address, as c10d's TCPStore does) and answers every connection from one poll loop.
//     Every rank, rank 0 included, is a client with one connection, retried until the timeout
//     while rank 0 is still starting.
//   - Frames: a request is an op byte ('s' set, 'g' get, 'a' add), the key's length (4 bytes,
//     network order), the key, the value's length and the value; get and add are answered with a
//     length and a value. A get of a key nobody set yet is held by the server until a set of it
//     arrives, so a waiting rank costs nothing; the client gives up after the timeout, naming the
//     key.
//   - The barrier is an add and a get: barrier k adds 1 to "barrier/k"; the rank whose add makes
//     it the world size sets "barrier/k/open", which every rank waits for.
//   - Limits: a key of at most 4 KiB, a value of at most 1 GiB. A connection that sends anything
//     else (a stray client on the port) is closed; the run goes on.
//   - Rank 0's server ends with its TcpStore, but not before every rank has closed its
//     connection (or the timeout passed): a rank released by the last barrier of a run may not
//     have read its reply yet when rank 0 leaves the same barrier. A connection that never sent
//     a valid request is not waited for.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "metron/exec/rank_store.h"

namespace metron::exec {

/// The rendezvous store of Note [tcp store]. Thread-safe: calls from several threads are served
/// one at a time.
/// @code
///   exec::TcpStore store({.host = "127.0.0.1", .port = 29500, .rank = r, .world_size = 2});
///   if (r == 0) store.store_set("id", "42");
///   const std::string id = store.store_get("id");   // "42" on every rank
///   store.barrier();
/// @endcode
class TcpStore final : public RankStore {
 public:
  /// Rank 0 starts the server; every rank connects. Throws BackendError naming host:port when
  /// the port cannot be served or nobody answers within the timeout, InvalidConfig for a rank
  /// outside [0, world_size) or a port outside [1, 65535].
  explicit TcpStore(const Rendezvous& rendezvous);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;
  TcpStore(TcpStore&&) = delete;
  TcpStore& operator=(TcpStore&&) = delete;

  void barrier() override;
  void store_set(const std::string& key, const std::string& value) override;
  [[nodiscard]] std::string store_get(const std::string& key) override;
  /// Adds `delta` to the integer under `key` (0 when unset) and returns the sum.
  std::int64_t add(const std::string& key, std::int64_t delta);

  static constexpr std::size_t kMaxKeyBytes = 4096;
  static constexpr std::size_t kMaxValueBytes = std::size_t{1} << 30;

 private:
  class Server;
  std::string request(char op, const std::string& key, const std::string& value, bool has_reply);

  Rendezvous rendezvous_;
  std::unique_ptr<Server> server_;  // rank 0 only
  int fd_ = -1;
  std::mutex mutex_;
  std::atomic<std::int64_t> barriers_{0};
};

}  // namespace metron::exec
