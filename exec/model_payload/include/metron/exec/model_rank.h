#pragma once
// The model payload on one rank of a step's graph (issue 21): the rank's pipeline stages of the
// GPT (gpt_stage.h), and what each of its tasks computes or moves with them, as a CpuWork for the
// CPU backend. Torch-free: the stages are behind GptStage's pimpl.
//
// Note [model rank]:
//   - Each iteration of the graph is one training step. Replica d of the graph (its ranks
//     d·pipeline_ranks onwards) trains its microbatch k on the step's global microbatch k·dp + d
//     (Megatron's sampler hands each data-parallel rank every dp-th microbatch), so the dp·M
//     microbatches of a step are those of the single-process reference (training_check.h).
//   - F of stage s, microbatch k takes the tokens (first stage) or the activation of stage s − 1;
//     the last stage records the loss. B or I takes the gradient of stage s + 1, or on the last
//     stage the loss's factor 1/M: the step's loss is the mean over the replica's M
//     microbatches, and the data-parallel sync averages over the replicas. What a stage hands on
//     waits in an outbox keyed by (stage, microbatch, activation or gradient) until its Send
//     takes it, or, where the next stage is on the same rank (the V schedules' turn), until
//     that stage's task does; a Recv puts what it received in the inbox under the receiving
//     stage. The graph's transfer sizes must be the floats moved (a model of dtype fp32).
//   - A DualPipe F&B unit (ir::OverlapPart) runs its forward, then its backward half, each as
//     the task its tags describe (the two are different microbatches, independent).
//   - W runs the deferred weight gradients; the optimizer task runs AdamW (adam.h) on the
//     rank's stages and clears their gradients. Recomputation changes when activations are
//     kept, not their values: it computes nothing here.
//   - A sync policy cuts a backward at bucket boundaries into pieces (compute_split.h). The
//     stage's backward is one piece of work here, so the first piece of a (stage, microbatch,
//     phase) runs all of it and the later pieces nothing: every gradient a bucket's collective
//     reads after its piece exists by then, as it does in the real system. A forward cut at
//     parameter gathers (FSDP's units, Megatron's overlap_param_gather) runs whole at its last
//     piece instead, which waits, through the pieces before it, for every gather of its
//     stage's parameters; a backward then finds them still gathered (parameters do not change
//     within a step), so the payload never drops a gathered unit's values (no reshard).
//   - Data-parallel sync (ddp, megatron-ddp, megatron-distopt, fairscale-sdp, zero1-3, fsdp1,
//     fsdp2 with its shard group the whole dp group): a collective's bucket tag names one of
//     the buckets of the plan the graph's sync pass returned (Step::sync_plan: sync::
//     policy_buckets, and ZeRO-3's per-layer gathers as its walk issued them), and its role
//     (bucket_plan.h) must be what the collective's op does. Its
//     members' gradients (or parameters, for a gather or broadcast) are packed one after another
//     into a flat fp32 buffer of the collective's size (what is left is padding, zeros), from
//     every stage they belong to (an OSS owner's tensors span the rank's chunks), gradients
//     divided by dp first (DDP's default hook, Megatron's gradient scaling and ShardedDDP's
//     world-size scaling all average that way), run, and unpacked: all of it after an
//     all-reduce, gather or broadcast, the rank's chunk after a reduce-scatter, everything on
//     the root after a reduce and nothing elsewhere. A gradient leaves the stage with its
//     collective (packed, then zeroed) and what comes back is added to the stage's reduced
//     gradients, which the optimizer steps with: a policy that reduces once per step sees the
//     same sums, and ZeRO-3's reduce-scatter after every microbatch sums each microbatch once.
//     The layout inside a bucket is the payload's (Megatron aligns each tensor to 64
//     elements; sums and shards are the same whatever the order, as long as every replica
//     packs alike), except ZeRO-3's per-tensor partitions (PlannedBucket::
//     per_tensor_partitions), where a rank's share of every bucket and of the after-step
//     gather must be its partition of each tensor.
//   - Where a stage's buckets shard the optimizer, the rank steps only what it owns (AdamW's
//     state kept for those elements): its share of each reduce-scattered or after-step gathered
//     bucket (Megatron's distributed optimizer, FSDP's units, ZeRO's partitions; ZeRO-1/2
//     all-reduce the gradients and shard only the step and its gather), the buckets reduced to
//     it (fairscale's OSS).
//     Otherwise the whole stage steps. The other elements are then stale here until a gather
//     or broadcast brings the owner's values: right after the step (distopt, OSS) or in the
//     next step's forward (FSDP, overlap_param_gather), so after a run's last step a rank may
//     hold only its shard current. The record lists the stale elements, and replica_record
//     takes each from the replica that holds it current (rank_record.h), as consolidating a
//     sharded checkpoint does.
//   - Not run yet, and refused by name (the CLI before start, ModelRank at construction): HSDP's
//     all-reduce of shards, fp16 broadcasts
//     and compression hooks, tensor-parallel collectives (the graph's intra-layer collectives do
//     not say which tensor they carry), a graph that runs DualPipe's copies without their sum,
//     and a copy of tied embeddings that the graph does not sum.
//   - Tied embeddings (Note [gpt stage]): the "embedding" all-reduce sums the gradient of the
//     rank's copy, the first stage's word embeddings or the last stage's head copy (synced
//     ones where buckets reduce the stage), with the other end's (Note [embedding gradients]
//     in sync/embedding_grads.h). A rank holding both ends (the V schedules; DualPipe, after
//     its stage-copy sum) adds the two copies' gradients itself when its optimizer step
//     starts. The record lists the head copy as kTiedHeadCopy, and the check compares it with
//     the reference's word embeddings.
//   - DualPipe's second direction runs stages past the model's end, copies of the model stages
//     (stage P + k runs slice k, its layer numbers past the model's end too); the "pp-copies"
//     all-reduce sums both of the rank's stages' gradients (synced ones where buckets reduce
//     them), in model-stage order, with the mirror rank's (Note [stage copies] in
//     sync/stage_copies.h). The record lists a copy's parameters under kStageCopyPrefix, and the
//     check compares both copies with the reference.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "metron/exec/cpu_backend.h"
#include "metron/exec/gpt_stage.h"
#include "metron/exec/rank_record.h"
#include "metron/exec/training_check.h"
#include "metron/ir/graph.h"
#include "metron/sync/bucket_plan.h"

namespace metron::exec {

/// How the rank's transfers move real values: blocking, matched by (peer, tag) as
/// GlooWorld::send_floats / recv_floats are.
struct ModelTransport {
  std::function<void(std::int32_t peer, std::span<const float> data, std::int32_t tag)> send;
  std::function<void(std::int32_t peer, std::span<float> data, std::int32_t tag)> recv;
  /// GlooWorld::collective_floats: (group, ordinal, collective, the whole buffer).
  std::function<void(std::int32_t group, std::int64_t ordinal, const ir::Collective& collective,
                     std::span<float> data)>
      collective;
};

/// What the sync-policy pass built the graph's data-parallel collectives from (Step::
/// sync_input) and the plan it returned (Step::sync_plan); empty without data parallelism.
struct ModelSync {
  sync::SyncInput input;
  std::vector<std::vector<sync::PlannedBucket>> buckets;  ///< by pipeline rank
};

class ModelRank {
 public:
  /// The stages of `rank` in `graph` (Note [model rank]): `slices[s]` is model stage s (as
  /// ir::Task::stage), `pipeline_ranks` the ranks of one replica. Throws InvalidConfig naming
  /// what the payload cannot run: a task of a stage `slices` lacks, a collective, DualPipe's
  /// units, a setup whose microbatches are not the graph's dp·M.
  ModelRank(const ir::Graph& graph, ir::RankId rank, std::int32_t pipeline_ranks,
            const TrainingSetup& setup, std::vector<StageSlice> slices, ModelSync sync = {});
  ~ModelRank();
  ModelRank(const ModelRank&) = delete;
  ModelRank& operator=(const ModelRank&) = delete;
  ModelRank(ModelRank&&) = delete;
  ModelRank& operator=(ModelRank&&) = delete;

  /// What the rank's tasks do, for CpuBackend; `transport` outlives the backend's use of it.
  [[nodiscard]] CpuWork work(ModelTransport transport);

  /// The losses recorded and the parameters now (after the last step run).
  [[nodiscard]] RankRecord record() const;

 private:
  friend void check_model_payload(const ir::Graph&, std::int32_t, const TrainingSetup&,
                                  const std::vector<StageSlice>&, const ModelSync&);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What ModelRank's constructor checks, for every rank of `graph`, without building a stage:
/// a run is refused before any process starts. Throws InvalidConfig as the constructor does.
void check_model_payload(const ir::Graph& graph, std::int32_t pipeline_ranks,
                         const TrainingSetup& setup, const std::vector<StageSlice>& slices,
                         const ModelSync& sync = {});

/// M: the microbatches each replica of `graph` runs per step (the highest microbatch tag + 1).
std::int64_t replica_microbatches(const ir::Graph& graph);

}  // namespace metron::exec
