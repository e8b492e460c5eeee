#pragma once
// The collectives inside a layer: tensor parallelism's all-reduces (or, with sequence parallelism,
// all-gathers and reduce-scatters), context parallelism's ring exchange of keys and values, and
// expert parallelism's all-to-all dispatch and combine. Note [intra-layer collectives]:
//
//   For every compute task with a layer range, and every entry of its phase, one collective task
//   stands for the entry's `per_layer` collectives in each of the task's layers
//   (ir::Collective::count = per_layer · layers, bytes = count · entry bytes): a stage's forward
//   of 6 layers under tensor parallelism is one "tp all-reduce ×12". Aggregating keeps the graph
//   small for the planner while the cost model still charges count·α (plan/step_builder.h).
//
//   Blocking entries (TP, SP, EP: Megatron issues them between the layer's kernels and the next
//   kernel needs their result) run after the compute task on the group's stream; everything that
//   waited for the task (the next compute on its stream, sends of its output) waits for them too.
//   Overlapped entries (CP's ring: each step's exchange runs under the previous block's attention)
//   are issued with the compute task, depending on what it depends on, and the task's successors
//   wait for both.
//
//   Precisely, per rank in issue order: overlapped collectives go right before the task (with its
//   dependencies), blocking ones right after it, chained in entry order (the first depends on the
//   task and on the overlapped ones, whose keys and values the layer's later kernels consume;
//   each next one on the previous when on another stream, FIFO otherwise). The task's stream
//   successor and every task listing it in deps also wait for the last blocking collective (or,
//   with none, for the overlapped ones). A HostWait on the task is retargeted to the last
//   blocking collective, which implies the task; with only overlapped ones, one more HostWait per
//   collective is issued before it. Collectives carry the task's stage, chunk, microbatch and
//   layers, and a label like "tp all-reduce x12 (F mb3)"; reduce and broadcast have the rank as
//   root.
//
//   Groups are the rank's own ("tp3", comm_groups.h): the graph never holds a rank's tensor-,
//   context- or expert-parallel peers, and a cost model charges the real group.
//
// Note [pipeline scatter/gather]: Megatron-LM 2.x's --scatter-gather-tensors-in-pipeline (on by
//   default there; Narayanan et al. SC'21 §4.1; megatron/p2p_communication.py and mpu's
//   split_tensor_into_1d_equal_chunks / gather_split_1d_tensor). Without sequence parallelism
//   each of a stage's t tensor-parallel ranks holds the whole boundary tensor, and each of the
//   next stage's t ranks needs it whole. Rather than t copies over the pipeline's (inter-node)
//   link, each rank sends its 1/t piece, and the receiving stage all-gathers the pieces over its
//   tensor-parallel group, inside the node; activations forward and gradients backward alike.
//   The sends and receives are sized 1/t by the caller (models::boundary_bytes); the `received`
//   entries are issued once right after every receive, blocking like a layer's entries: the
//   first depends on the receive, and what waited for the receive (its dependents, the host
//   waits of Megatron's batched exchanges) waits for the last one too, since the receive alone
//   leaves a piece. The receive's stream successor does not: the next transfer needs no gather.

#include <cstdint>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/ir/task.h"
#include "metron/lowering/comm_groups.h"

namespace metron::lowering {

/// One kind of collective a layer issues in one phase.
struct LayerCollective {
  GroupKind group = GroupKind::kTensor;
  ir::CollectiveOp op = ir::CollectiveOp::kAllReduce;
  std::int64_t bytes = 0;      ///< one collective, in the nccl-tests convention of `op`
  std::int32_t per_layer = 1;  ///< collectives of this kind per layer
  bool overlapped = false;     ///< runs alongside the layer's compute (CP) instead of after it
  ir::DType dtype = ir::DType::kBf16;
  friend bool operator==(const LayerCollective&, const LayerCollective&) = default;
};

/// What one layer issues per phase. `backward` serves B tasks; I and W have their own lists
/// (Megatron issues the input-gradient collectives in I, none in W); recompute replays forward.
struct IntraLayerComm {
  std::vector<LayerCollective> forward;
  std::vector<LayerCollective> backward;
  std::vector<LayerCollective> backward_input;
  std::vector<LayerCollective> backward_weight;
  std::vector<LayerCollective> recompute;
  /// Issued `per_layer` times after every pipeline receive (Note [pipeline scatter/gather]).
  std::vector<LayerCollective> received;
  [[nodiscard]] bool empty() const {
    return forward.empty() && backward.empty() && backward_input.empty() &&
           backward_weight.empty() && recompute.empty() && received.empty();
  }
};

/// Adds Note [intra-layer collectives] to every compute task with a stage and a layer range
/// (DualPipe's overlapped F&B units get the forward entries for their layers and their backward
/// half's entries for its layers), and Note [pipeline scatter/gather] to every receive. Streams are
/// named after the group kind ("tp", "cp", "ep"); groups are group_name(kind, rank) with sequence
/// numbers rising in issue order (continuing an existing group of that name). Each rank's issue
/// order is rebuilt once. Throws InvalidConfig for an entry with per_layer < 1 or bytes < 0, or a
/// count beyond int32.
/// @code
///   LayerCollective tp{.group = GroupKind::kTensor, .op = ir::CollectiveOp::kAllReduce,
///                      .bytes = 16 << 20, .per_layer = 2};
///   add_intra_layer_collectives(builder, {.forward = {tp}, .backward = {tp}});
/// @endcode
void add_intra_layer_collectives(ir::GraphBuilder& builder, const IntraLayerComm& comm);

}  // namespace metron::lowering
