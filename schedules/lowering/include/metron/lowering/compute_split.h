#pragma once
// Splitting a stage's compute task at layer boundaries, so that communication can start where a
// real framework's hook fires: after the backward of the layers that complete a bucket, before
// the forward of the layers a gathered unit holds. Note [compute pieces]:
//
//   A task covering layers [a, b) cut at a < c1 < ... < ck < b becomes k+1 pieces on the same
//   stream, issued back to back in execution order: the forward runs [a, c1), [c1, c2), ...,
//   [ck, b); a backward (B, I, W) runs them from the top, [ck, b) first. The last piece keeps the
//   task's id, so everything that depended on the task still waits for all of it; the first piece
//   takes the task's dependencies and buffer allocations (later pieces follow it by stream FIFO
//   and need neither). Each piece keeps the task's tags, stream, uses and label (plus its layers,
//   " [L3-5]" for [3, 6)) and carries its own layer range, from which a cost model charges its
//   part of the task's time (its layers' ops, and the embedding or head where it holds them); flops
//   and bytes_moved are shared out by layer count, so the pieces together do the task's work.
//   Recompute runs forward order.

#include <cstdint>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/ir/ids.h"

namespace metron::lowering {

/// One task to split and where.
struct SplitRequest {
  ir::TaskId task;
  std::vector<std::int32_t> cuts;  ///< layer indices; those outside (a, b) and repeats are ignored
};

/// Splits every requested task (Note [compute pieces]) and returns, per request, its pieces in
/// execution order (one piece, the task itself, when no cut falls inside its range). Tasks that
/// are not compute, have no layers, or are DualPipe's overlapped F&B units are left whole.
/// Requests naming the same task are merged (the union of their cuts) and each gets the same
/// pieces. Each touched rank's issue order is rebuilt once. Throws InvalidConfig for a task id
/// that does not exist.
/// @code
///   // F covering layers [0, 8), cut at 2 and 5: [0,2) [2,5) [5,8), the last keeping f's id.
///   auto pieces = split_compute(builder, {{.task = f, .cuts = {5, 2}}})[0];
/// @endcode
std::vector<std::vector<ir::TaskId>> split_compute(ir::GraphBuilder& builder,
                                                   const std::vector<SplitRequest>& requests);

/// Whether a phase runs its layers top down (B, I, W).
bool runs_backward(ir::Phase phase) noexcept;

}  // namespace metron::lowering
