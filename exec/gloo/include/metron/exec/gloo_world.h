#pragma once
// The CPU backend's communication: Gloo process groups (through libtorch's c10d) that move real
// bytes for a graph's collectives and point-to-point transfers, one GlooWorld per rank process.
// No torch or Gloo type appears here (clang cannot parse libtorch 1.13's headers in C++20).
//
// Note [gloo world]
//   - Rank 0 hosts a c10d::TCPStore on the rendezvous host:port; every rank connects to it. Group
//     g gets one ProcessGroupGloo on a PrefixStore "group/<g>/", created in group order by its
//     members only; send/recv and barrier() use a world group on "world/"; store_set/store_get
//     use "user/". All groups share one Gloo TCP device: bound to the rendezvous host when it is a
//     loopback address (local runs), else Gloo's default device (this host's resolved address).
//   - Gloo matches collectives by the order in which a process issues them to a group, so
//     collective() takes a per-group turn: the call with ordinal k waits until ordinals 0..k-1
//     were issued by this process, issues its own calls, then passes the turn and waits for
//     completion outside it. Streams (threads) may thus call in any order and still issue the
//     same sequence on every member.
//   - ProcessGroupGloo 1.13 has no reduce-scatter: it runs gloo's own ReduceScatterHalvingDoubling
//     on a second Gloo context of the group ("group/<g>/rs/", created at the group's first
//     reduce-scatter or all-gather). That algorithm is synchronous, so a reduce-scatter completes
//     while it holds the turn; its result lands at the start of the buffer, not at the rank's
//     offset.
//   - All-gather runs gloo::allgather on that context too, straight into the pooled output, with
//     tags taken under the turn (so gathers may run at once, as before). ProcessGroupGloo 1.13's
//     allgather runs the same algorithm into a new flat tensor and copies it out, which cost a
//     fresh allocation of the whole output per call: on this 2-core VM a fresh 80 MB costs
//     ~45 ms of page faults, and the faults varied from iteration to iteration of a run.
//   - Wire dtypes: Gloo has fp16 but no bf16 or fp8, so bf16 travels as fp16 (same size, and sums
//     are computed as fp16) and fp8 as uint8; the others travel as themselves. Only sizes matter to
//     a measurement: the payload is whatever the buffers hold.
//   - Sizes round up to whole elements: per call, bytes/count; all-gather, reduce-scatter and
//     all-to-all round the per-member chunk up so that the buffer divides evenly among members.
//   - Buffers are pooled per (group, op, wire dtype, bytes, count) and per size for send/recv: a
//     call takes a free set (or allocates one) and returns it when done, so concurrent calls never
//     share memory and a steady-state run allocates nothing.
//   - Failures: after one Gloo timeout a group is closed for good, and a dead peer shows up within
//     milliseconds as "Connection closed by peer". Messages name the group and op but no task:
//     the caller adds that.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "metron/exec/rank_store.h"
#include "metron/ir/task.h"

namespace metron::exec {

struct GlooWorldTestAccess;

/// Gloo process groups for one rank of a graph run (Note [gloo world]). Thread-safe: any thread
/// (one per stream) may call any member.
/// @code
///   exec::GlooWorld world({.host = "127.0.0.1", .port = 29500, .rank = r, .world_size = 2},
///                         {{0, 1}});                   // group 0 = ranks {0, 1}
///   world.collective(0, /*ordinal=*/0, ir::Collective{.op = ir::CollectiveOp::kAllReduce,
///                                                     .bytes = 1 << 20});
///   if (r == 0) world.send(1, 4096, /*tag=*/7); else world.recv(0, 4096, /*tag=*/7);
///   world.barrier();
/// @endcode
class GlooWorld final : public RankStore {
 public:
  /// Connects. `groups[g]` are the member ranks of group g in group order (ir::Group::ranks as
  /// ints); the rank creates a process group for each group it belongs to (non-members skip it).
  /// Throws BackendError naming the host:port on a store failure or timeout, InvalidConfig for a
  /// rank outside [0, world_size) or listed twice in a group.
  GlooWorld(const Rendezvous& rendezvous, const std::vector<std::vector<std::int32_t>>& groups);
  ~GlooWorld() override;
  GlooWorld(const GlooWorld&) = delete;
  GlooWorld& operator=(const GlooWorld&) = delete;
  GlooWorld(GlooWorld&&) = delete;
  GlooWorld& operator=(GlooWorld&&) = delete;

  /// Runs this rank's part of a collective on group `group` and blocks until it completes.
  /// `ordinal` is this collective's position among this rank's collectives on the group (0, 1,
  /// 2, ...), the same on every member: the call waits until every lower ordinal of the group was
  /// ISSUED to Gloo (not completed) by this process. `count` > 1 issues `count` back-to-back calls
  /// of bytes/count each (all issued while holding the turn, then waited for). `bytes` is the full
  /// buffer: all-reduce's buffer, all-gather's OUTPUT (input = bytes/size), reduce-scatter's INPUT
  /// (output = bytes/size), the reduce/broadcast buffer with `root` (a graph rank), all-to-all's
  /// buffer in equal splits. 0 bytes takes the turn and moves nothing. Throws BackendError with
  /// Gloo's message on failure, InvalidConfig for an unknown group, a group this rank is not in,
  /// a root outside the group or count < 1.
  void collective(std::int32_t group, std::int64_t ordinal, const ir::Collective& collective);

  /// Point-to-point on the world group: blocks until done. `tag` is unique among this pair's
  /// transfers in flight (the caller passes the graph's communication instance index). `bytes` as
  /// in ir::Send/Recv. Throws BackendError with Gloo's message on failure.
  void send(std::int32_t peer, std::int64_t bytes, std::int32_t tag);
  void recv(std::int32_t peer, std::int64_t bytes, std::int32_t tag);

  /// A collective over real values (the model payload, issue 21), otherwise as collective():
  /// `data` holds the whole buffer in fp32 (collective.bytes / 4 values, one call): all-reduce,
  /// reduce and broadcast work on it in place; all-gather sends this member's chunk of it (at its
  /// index in the group) and fills the rest; reduce-scatter reduces all of it and writes the
  /// reduced chunk back to this member's chunk (the rest keeps what it held). Throws
  /// InvalidConfig for another dtype, count > 1, all-to-all or a length that does not match.
  void collective_floats(std::int32_t group, std::int64_t ordinal, const ir::Collective& collective,
                         std::span<float> data);

  /// Point-to-point of real values (the model payload, issue 21): `data` is sent as it is, or
  /// received into `data`, which must have the sender's length. Otherwise as send/recv.
  void send_floats(std::int32_t peer, std::span<const float> data, std::int32_t tag);
  void recv_floats(std::int32_t peer, std::span<float> data, std::int32_t tag);

  /// A barrier over every rank (world group).
  void barrier() override;

  /// The store, for small control messages (gathering per-rank results at rank 0): set, and a get
  /// that blocks until the key is set or the timeout passes (BackendError naming the key).
  void store_set(const std::string& key, const std::string& value) override;
  [[nodiscard]] std::string store_get(const std::string& key) override;

 private:
  friend struct GlooWorldTestAccess;  // the tests' view of buffer contents (src/)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace metron::exec
