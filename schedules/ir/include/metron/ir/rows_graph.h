#pragma once
// Conversion between per-rank action rows and task graphs.
//
// graph_to_rows is a projection: it keeps each rank's issue order and the tags the text form has
// words for, and drops what it has none for (work, bytes of p2p, buffers, stream names of compute
// and p2p). rows_to_graph rebuilds a graph with the conventions below, so
// graph_to_rows(rows_to_graph(r)) == r for rows without idle slots, and for any graph g,
// rows_to_graph(graph_to_rows(g)) has the same rows as g. Note [rows to graph]:
//
//  - one rank per row (hardware_queues from the options); a stream per role, created on first use:
//    compute actions on "compute", SEND_* on "pp-send-<peer>", RECV_* on "pp-recv-<peer>" (one
//    FIFO per peer, as each pair of ranks has its own NCCL communicator: a receive from one
//    neighbour must not queue behind one from the other), collectives on their `stream=` or
//    "comm"; WAIT on no stream;
//  - stage s is owned by the ranks whose rows compute it; a rank's chunk of stage s is the position
//    of s among its own stages in ascending order;
//  - a p2p action's peer is its `@peer`, else the one owner of the neighbouring stage (s+1 for
//    SEND_F / RECV_B, s-1 for RECV_F / SEND_B); its tag is 2·(2^20·sender_stage + mb) + (0 for
//    activations, 1 for gradients), so each send meets the receive of the same tensor;
//  - same-rank dependencies, always on the latest earlier matching action of the row:
//      F(s,mb)      <- RECV_F(s,mb), else F(s-1,mb)
//      I/B(s,mb)    <- F(s,mb) and RECV_B(s,mb), else I/B(s+1,mb)
//      W(s,mb)      <- I(s,mb)
//      SEND_F(s,mb) <- F(s,mb);  SEND_B(s,mb) <- I/B(s,mb)   (OVERLAP_F_B counts as both halves)
//      collective   <- the latest compute action before it (the gradients it reduces are ready)
//      STEP         <- every collective before it (the optimizer needs the reduced gradients)
//  - UNSHARD, RESHARD and REDUCE_GRAD carry no group or size, so they have no graph form: write
//    the collectives they stand for instead.

#include <cstdint>

#include "metron/ir/action_rows.h"
#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"

namespace metron::ir {

/// The tag rows_to_graph gives a p2p transfer: distinct per (sending stage, microbatch, kind), so
/// each send meets the receive of the same tensor. Graphs built by hand may use it too, so that
/// their text form converts back to the same tags.
inline std::int64_t p2p_tag(std::int32_t sender_stage, std::int32_t microbatch, P2PKind what) {
  return 2 * ((std::int64_t{1} << 20) * sender_stage + microbatch) +
         (what == P2PKind::kGradient ? 1 : 0);
}

struct RowsToGraphOptions {
  std::int32_t hardware_queues = 8;
  /// Size of every p2p transfer: the text form has no place for it.
  std::int64_t p2p_bytes = 0;
  /// The rows are one pipeline: row r is pipeline rank r (RankCoords.pp = r). Off for rows that
  /// hold data-parallel replicas too, whose layout the text form does not say.
  bool pipeline_coords = false;
};

/// Builds and validates the graph the rows describe. Throws InvalidGraph listing every action
/// that cannot be converted (undeclared group, peer that cannot be inferred, ...) or every
/// problem the validator finds.
Graph rows_to_graph(const ActionRows& rows, const RowsToGraphOptions& options = {});

/// rows_to_graph before its validation: the builder, for passes that add to it and then validate
/// the result once (each build() validates the whole graph). Throws InvalidGraph for actions that
/// cannot be converted.
GraphBuilder rows_to_builder(const ActionRows& rows, const RowsToGraphOptions& options = {});

/// The rows of a graph (no idle slots). Throws InvalidConfig naming a task that has no text form
/// (a compute task without stage and microbatch, a p2p transfer of kind "other").
ActionRows graph_to_rows(const Graph& graph);

}  // namespace metron::ir
