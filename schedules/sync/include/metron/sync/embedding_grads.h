#pragma once
// The gradient sum of tied word embeddings across the pipeline. Note [embedding gradients]:
//
//   A model whose LM head reuses the word embeddings (ModelSpec::tied_embeddings) keeps, when
//   pipelined, a copy of them on the rank of the last model stage as its output layer
//   (models/parameter_tensors.h: both copies flagged shared_embedding). The copies stay equal
//   only if both step with the sum of their gradients. Megatron-LM does it in
//   finalize_model_grads (megatron/core/distributed/finalize_model_grads.py,
//   _allreduce_word_embedding_grads): after finish_grad_sync, the data-parallel reduction, it
//   all-reduces the word embedding's main_grad (whole, in the gradient buffer's dtype) over the
//   embedding group, the first and the last rank of each pipeline (parallel_state's
//   _EMBEDDING_GROUP), and only then steps. DeepSpeed's pipeline engine does the same for any
//   TiedLayerSpec (ReduceTiedGrads before ReduceGrads).
//
//   add_embedding_grad_sum adds it as Megatron orders it: on each of the two ranks, one
//   all-reduce over the pair of the same data-parallel replica (group kind "embedding", its own
//   stream), of the bytes of the rank's copy, waiting for everything the optimizer step waits
//   for (the data-parallel reductions) and for the compute before the step; the step waits for
//   it. Reductions are linear, so the sum of the copies' reduced gradients is the reduced sum,
//   provided both copies reduce the same elements on the same data-parallel rank: Megatron
//   gives each shared_embedding tensor a bucket of its own, so a distributed optimizer shards
//   the two copies alike.
//
//   Where one rank holds both ends in different chunks (the V schedules, DualPipe) the copies
//   meet on one rank and the sum moves nothing between ranks: not added here (InvalidConfig);
//   the rank adds them up itself (the model payload does at its optimizer step), an element-wise
//   addition the step's costs leave out.

#include "metron/ir/graph_builder.h"
#include "metron/sync/sync_policy.h"

namespace metron::sync {

/// Adds Note [embedding gradients]'s all-reduces to a lowered step, after add_sync_policy if a
/// policy runs. `input.params` lists every pipeline rank's chunks and `input.grad_bytes` the bytes
/// of a gradient element. Throws InvalidConfig unless exactly two pipeline ranks hold one
/// shared_embedding tensor each, of the same size, and both have an optimizer step.
void add_embedding_grad_sum(ir::GraphBuilder& builder, const SyncInput& input);

}  // namespace metron::sync
