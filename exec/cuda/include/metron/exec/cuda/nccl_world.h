#pragma once
// The CUDA backend's communication: one NCCL communicator over all ranks, one per IR group split
// from it, collectives and transfers on the task's stream. NCCL types stay out of this header.
//
// Note [nccl world]:
//   - The world communicator comes from a unique id that rank 0 makes and the others receive
//     through the launcher's store (`exchange`); a world of one rank needs no store. Every rank
//     then calls ncclCommSplit once per IR group, in group order, with the group's index as the
//     colour where it is a member (NCCL_SPLIT_NOCOLOR elsewhere) and its rank as the key, so a
//     group's communicator ranks its members as the IR does.
//   - Transfers: one communicator of two ranks per direction between two ranks that transfer
//     (sender rank 0, receiver rank 1), from a unique id the sender makes and puts in the store.
//     NCCL runs the operations of one communicator one after another, in issue order: with one
//     communicator for both directions, 1F1B's two stages would each wait in a send for a
//     receive queued behind the other's send (Megatron-LM batches the pair into one group call
//     for the same reason), while a direction's transfers are issued in one order on both ends.
//     Only the two ranks take part, so a pipeline of thousands of ranks needs no world-wide
//     call per pair.
//   - A collective's bytes become calls as Gloo's do (metron/exec/wire_layout.h): `count` calls
//     of bytes/count each, all-gather, reduce-scatter and all-to-all split into equal chunks.
//     bf16 and fp8 travel as ncclBfloat16 and ncclFloat8e4m3; reductions sum. All-to-all is a
//     grouped send and receive of one chunk with every member.
//   - NCCL matches a communicator's calls by issue order, and the host issues a stream's tasks
//     without waiting for them: a collective whose ordinal is not the next of its group (Note
//     [rank program]) is refused with BackendError rather than left to mismatch. A transfer
//     pairs by its place among its direction's transfers, so both ends must issue them in one
//     order: the schedules' issue orders do (activations and gradients flow microbatch by
//     microbatch), but unlike Gloo's, which pair by tag, nothing here checks it.
//   - Data: one device buffer as large as the largest call needs, reused by every call (the
//     executor measures time, not values).
//   - Failure: async_error() polls ncclCommGetAsyncError on every communicator, abort() calls
//     ncclCommAbort on each so that a stream blocked in a collective whose peer died ends.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/ir/task.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*

namespace metron::exec::cuda {

/// The communicators of one rank (Note [nccl world]).
class NcclWorld {
 public:
  /// Shares a communicator's unique id under `key` ("world", "p2p/3/4"): the rank that made it
  /// passes its serialized bytes and gets them back, the others pass "" and get them (e.g.
  /// through a store, blocking until the maker has put them there).
  using IdExchange = std::function<std::string(const std::string& key, const std::string& id)>;

  /// What one rank communicates: `groups[g]` lists group g's members (world ranks, for every
  /// group of the graph); `sends_to` and `receives_from` the ranks it transfers with.
  struct Plan {
    std::vector<std::vector<std::int32_t>> groups;
    std::vector<std::int32_t> sends_to;
    std::vector<std::int32_t> receives_from;
  };

  /// The plan of `rank` in `graph`'s communication.
  static Plan plan_of(const ir::Graph& graph, std::int32_t rank);

  /// Makes `device` current and creates the communicators. Throws BackendError naming the NCCL
  /// call that failed, InvalidConfig for a rank outside the world.
  NcclWorld(std::int32_t rank, std::int32_t world_size, const Plan& plan,
            const IdExchange& exchange, int device);
  ~NcclWorld();
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;
  NcclWorld(NcclWorld&&) = delete;
  NcclWorld& operator=(NcclWorld&&) = delete;

  /// Grows the shared buffer to what `collective` on `group` needs (before the timed
  /// iterations: an allocation may synchronize the device). Throws InvalidConfig when this rank
  /// is not a member.
  void prepare_collective(std::int32_t group, const ir::Collective& collective);
  /// The same for a transfer of `bytes`.
  void prepare_transfer(std::int64_t bytes);

  /// Enqueues `collective` on `stream`: its `count` calls on group `group`'s communicator.
  /// `ordinal` must be the group's next (Note [nccl world]).
  void collective(std::int32_t group, std::int64_t ordinal, const ir::Collective& collective,
                  CUstream_st* stream);
  void send(std::int32_t peer, std::int64_t bytes, CUstream_st* stream);
  void recv(std::int32_t peer, std::int64_t bytes, CUstream_st* stream);

  /// "" when no communicator reports an asynchronous error, else which and why.
  [[nodiscard]] std::string async_error() const;
  /// Aborts every communicator (ncclCommAbort): blocked NCCL kernels end, the world is unusable.
  void abort() noexcept;

 private:
  /// The two-rank communicators of `plan`'s transfers (Note [nccl world]).
  void connect_transfers(const Plan& plan, const IdExchange& exchange);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace metron::exec::cuda
