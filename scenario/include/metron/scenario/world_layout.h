#pragma once
// The real world a step's graph stands for, for naming in traces. Note [world layout]:
//
//   The graph holds one pipeline (symmetric mode) or its data-parallel replicas (--full), never a
//   rank's tensor-, context- or expert-parallel peers (lowering/comm_groups.h); a "tp3" group has
//   graph rank 3 as its only member but stands for its real tensor-parallel group. Traces name
//   the real one: the world is tp·cp·dp·pp GPUs numbered as Megatron-LM's default order
//   "tp-cp-ep-dp-pp" numbers them, tensor-parallel fastest:
//
//     world rank = t + tp·(d + dp·cp·p),   d = c + cp·k   (t, c, k, p: tp, cp, dp, pp index)
//
//   and each group of the graph becomes the world ranks of the group of its kind that holds the
//   group's first member, built as Megatron's parallel_state builds it: tp varies t; cp varies c;
//   dp (with cp) varies d; ep takes blocks of ep consecutive d and edp the d with the same d mod
//   ep; a distributed-optimizer instance (dp-intra) takes blocks of the instance size and dp-inter
//   the d with the same offset in their block (the same rule over the expert data-parallel index
//   for edp-intra and edp-inter); DualPipe's pp-copies pair (sync/stage_copies.h) varies p between
//   p and pp-1-p; the embedding pair (sync/embedding_grads.h) is p = 0 and pp-1. Descriptions
//   are Megatron's group_desc strings (TENSOR_MODEL_PARALLEL_GROUP, EMBEDDING_GROUP, ...;
//   PIPELINE_STAGE_COPIES_GROUP, which Megatron lacks). A group no pass makes keeps its graph
//   members. Sends and
//   receives go through the rank's pipeline group (p varies), as Megatron's p2p does. Process
//   group names count distinct groups from "1" in graph order, pipeline groups last ("0" is
//   PyTorch's default group).
//   A CUDA device index is the world rank modulo the hardware's GPUs per node.

#include "metron/ir/graph.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"
#include "metron/sim/trace_export.h"
#include "metron/timelines/timeline.h"

namespace metron::scenario {

/// The world layout of `graph`, a step built from `scenario` (Note [world layout]).
timelines::WorldLayout world_layout(const Scenario& scenario, const ir::Graph& graph);

/// What the simulator's traces of `step` show beyond its result: the world layout above, and each
/// rank's weights, gradients and optimizer state under its HBM counter, so that the counter's
/// peak is the peak memory the result reports.
sim::TraceOptions trace_options(const Scenario& scenario, const Step& step);

}  // namespace metron::scenario
