#pragma once
// DualPipe's gradient sum over the copies of a model stage. Note [stage copies]:
//
//   DualPipe (docs/SCHEDULES.md §4.2) feeds half of the microbatches in at each end of the
//   pipeline: pipeline rank r runs model stage r for the first direction and a copy of model
//   stage P-1-r for the second, so ranks r and P-1-r hold the same two model stages, each
//   computing their gradients from its own half of the microbatches. The copies stay equal only
//   if both step with the sum of the two: DeepSeek's example (deepseek-ai/DualPipe,
//   examples/example_dualpipe.py) adds each module's gradient to its copy's, fetched from the
//   mirror rank, before it compares them with the single-process reference. The schedule itself
//   leaves that sum to the user, so a step graph without it trains two diverging models.
//
//   add_stage_copy_sum adds it: on every rank, one all-reduce over the pair {r, P-1-r} of the
//   same data-parallel replica (group kind "pp-copies", its own stream), carrying the gradients
//   of both of the rank's stages, whole, in model-stage order (so both ranks lay them out
//   alike). It waits for everything the optimizer step waits for (the data-parallel reductions)
//   and for the compute the step follows on its stream, is issued just before the step, and the
//   step waits for it. Reductions are linear, so summing the copies' reduced gradients after
//   them gives the sum of all, provided the two copies of a stage reduce the same elements on
//   the same data-parallel rank: under SyncInput::stage_copies a copy is bucketed as its
//   original (Megatron would bucket only pipeline rank 0's first chunk) and fairscale's OSS
//   registers a rank's stages in model-stage order (it assigns owners in registration order).
//   It carries whole gradients even where the optimizer steps a shard, as DeepSeek's example
//   sums whole ones. Both ranks of a pair hold the same two model stages, so
//   they agree on the bytes.

#include <cstdint>

#include "metron/ir/graph_builder.h"
#include "metron/sync/sync_policy.h"

namespace metron::sync {

/// Adds Note [stage copies]'s all-reduces to a lowered DualPipe step, after add_sync_policy if a
/// policy runs. `input.params` lists every pipeline rank's chunks (its two stages) and
/// `input.grad_bytes` the bytes of a gradient element. Throws InvalidConfig for an odd number of
/// pipeline ranks, a rank without an optimizer step, or a pair of ranks whose stages differ in
/// size.
void add_stage_copy_sum(ir::GraphBuilder& builder, const SyncInput& input);

}  // namespace metron::sync
