// Note [model rank] (model_rank.h).

#include "metron/exec/model_rank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

#include "metron/base/error.h"
#include "metron/exec/adam.h"
#include "metron/lowering/comm_groups.h"

namespace metron::exec {

namespace {

constexpr float kNoLoss = std::numeric_limits<float>::quiet_NaN();

std::string task_name(const ir::Task& task) {
  std::string name = std::string(ir::to_string(task.kind()));
  if (const auto* c = std::get_if<ir::Compute>(&task.op)) name = ir::to_string(c->phase);
  if (task.stage.valid()) name += " of stage " + std::to_string(task.stage.value());
  if (task.microbatch.valid()) name += ", microbatch " + std::to_string(task.microbatch.value());
  return name + " on rank " + std::to_string(task.rank.value());
}

/// The backward half of a DualPipe F&B unit as a task of its own: its tags, the unit's rank and
/// label (the payload runs the unit's two halves one after the other).
ir::Task overlapped_part(const ir::Task& unit, const ir::OverlapPart& part) {
  ir::Task out;
  out.rank = unit.rank;
  out.stage = part.stage;
  out.chunk = part.chunk;
  out.microbatch = part.microbatch;
  out.layers = part.layers;
  out.label = unit.label;
  out.op = ir::Compute{.phase = part.phase};
  return out;
}

/// One stage the rank holds, with its optimizer state. A stage is run by one task at a time
/// (its mutex), whichever stream the graph puts its tasks on.
struct HeldStage {
  HeldStage(const GptConfig& config, const StageSlice& slice) : stage(config, slice) {
    exp_avg.assign(stage.flat_parameters().size(), 0.0F);
    exp_avg_sq.assign(stage.flat_parameters().size(), 0.0F);
    stale.assign(stage.flat_parameters().size(), false);
    reduced.assign(stage.flat_parameters().size(), 0.0F);
  }
  std::mutex mutex;
  GptStage stage;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  /// By flat parameter: stepped by another replica and not gathered or broadcast here since.
  std::vector<bool> stale;
  /// Gradients synced over the replicas: the sum of what this step's collectives brought back
  /// (Note [model rank]); the optimizer steps with these when `synced`.
  std::vector<float> reduced;
  bool synced = false;  ///< a bucket reduces the stage's gradients
};

/// Where a bucket's buffer element lives: a stage's flat parameters and gradients; padding
/// has no stage.
struct Slot {
  std::int32_t stage = -1;
  std::int64_t index = -1;
};

/// One bucket of the rank's data-parallel sync as the payload packs it (Note [model rank]).
struct SyncBucket {
  std::int64_t length = 0;           ///< elements of its collectives' buffer (bytes / 4)
  std::vector<Slot> slots;           ///< by buffer element
  std::vector<std::int32_t> stages;  ///< the stages its slots name, each once
  /// The buffer elements whose reduced gradients this rank's optimizer steps: its chunk after
  /// a reduce-scatter, everything after a reduce to it, nothing after a reduce to another.
  std::int64_t owned_begin = 0;
  std::int64_t owned_end = 0;
  /// A reduce-scatter, reduce or all-gather: only the owners of its elements step them.
  bool shards_optimizer = false;
  /// An all-reduce, reduce-scatter or reduce: its stages' gradients are synced.
  bool reduces = false;
  std::int32_t group_size = 1;         ///< members of its collectives' group
  bool per_tensor_partitions = false;  ///< sync::PlannedBucket's layout
};

/// What a stage hands on: (stage, microbatch, what) → values (Note [model rank]).
using MailKey = std::tuple<std::int32_t, std::int32_t, ir::P2PKind>;

}  // namespace

struct ModelRank::Impl {
  const ir::Graph& graph;
  ir::RankId rank;
  std::int32_t replica = 0;
  std::int32_t replicas = 1;
  std::int64_t microbatches = 0;  // M: one replica's microbatches per step
  TrainingSetup setup;
  std::vector<StageSlice> slices;
  std::map<std::int32_t, std::int32_t> stage_rank;  // the replica's rank running each stage
  std::map<std::int32_t, std::unique_ptr<HeldStage>> stages;
  std::map<std::int32_t, std::int32_t> chunk_stage;  // this rank's chunks
  std::int32_t optimizer_tasks = 0;                  // per step, on this rank
  ModelSync sync;
  std::map<std::int32_t, SyncBucket> buckets;  // by bucket id (ir::Task::bucket)
  /// Groups of DualPipe's sums over stage copies (Note [stage copies]), by GroupId value.
  std::set<std::int32_t> copy_groups;
  /// Groups of the tied embeddings' gradient sum (Note [embedding gradients]), by GroupId value.
  std::set<std::int32_t> embedding_groups;
  std::int32_t highest_stage = -1;  // of this rank's tasks
  ModelTransport transport;

  std::mutex mutex;  // everything below
  std::int64_t step = 0;
  std::int32_t optimizer_done = 0;
  std::set<std::tuple<std::int32_t, std::int32_t, ir::Phase>> ran;  // this step's pieces
  std::map<MailKey, std::vector<float>> outbox;
  std::map<MailKey, std::vector<float>> inbox;
  std::vector<std::vector<float>> losses;  // [step][global microbatch]

  /// `build`: false checks the rank's tasks without building its stages.
  Impl(const ir::Graph& g, ir::RankId r, std::int32_t pipeline_ranks, const TrainingSetup& s,
       std::vector<StageSlice> stage_slices, ModelSync sync_plan, bool build)
      : graph(g), rank(r), setup(s), slices(std::move(stage_slices)), sync(std::move(sync_plan)) {
    validate(setup);
    if (pipeline_ranks < 1 || g.num_ranks() % pipeline_ranks != 0) {
      throw InvalidConfig("model payload: " + std::to_string(g.num_ranks()) +
                          " ranks are not replicas of " + std::to_string(pipeline_ranks) +
                          " pipeline ranks");
    }
    replica = r.value() / pipeline_ranks;
    replicas = g.num_ranks() / pipeline_ranks;
    microbatches = replica_microbatches(g);
    for (std::int32_t t = 0; t < g.num_tasks(); ++t) index(g.task(ir::TaskId{t}), pipeline_ranks);
    if (highest_stage >= std::ssize(slices) && copy_groups.empty()) {
      throw InvalidConfig(
          "model payload: rank " + std::to_string(r.value()) + " runs stage " +
          std::to_string(highest_stage) + ", a copy of model stage " +
          std::to_string(highest_stage % std::ssize(slices)) +
          " (DualPipe's second direction), and the graph has no collective that sums the copies' "
          "gradients: the copies would train apart");
    }
    if (setup.microbatches != replicas * microbatches) {
      throw InvalidConfig("model payload: the setup trains " + std::to_string(setup.microbatches) +
                          " microbatches per step; the graph runs " + std::to_string(microbatches) +
                          " on each of " + std::to_string(replicas) + " replicas");
    }
    if (optimizer_tasks == 0) {
      throw InvalidConfig("model payload: rank " + std::to_string(r.value()) +
                          " has no optimizer step; expected a step graph that trains");
    }
    for (const auto& [stage, holder] : stage_rank) {
      if (holder != r.value() || !build) continue;
      stages.emplace(stage, std::make_unique<HeldStage>(setup.model, slice_of(stage)));
    }
    check_tied_copies();
    if (build) lay_out_buckets(pipeline_ranks);
    if (build && !copy_groups.empty()) check_copy_sums();
    if (build && !embedding_groups.empty()) check_embedding_sums();
    losses.assign(static_cast<std::size_t>(setup.steps),
                  std::vector<float>(static_cast<std::size_t>(setup.microbatches), kNoLoss));
  }

  /// Checks one task of the graph and notes what the rank needs to know of it.
  void index(const ir::Task& task, std::int32_t pipeline_ranks) {
    const bool mine = task.rank == rank;
    const bool my_replica = task.rank.value() / pipeline_ranks == replica;
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      if (c->phase == ir::Phase::kOptimizer) {
        optimizer_tasks += mine ? 1 : 0;
        return;
      }
      if (!task.stage.valid()) return;
      if (c->overlapped) index(overlapped_part(task, *c->overlapped), pipeline_ranks);
      // DualPipe numbers its second direction's copies of the model stages past the model's
      // end (Note [dualpipe stage ids]): stage N + k runs model stage k again.
      if (task.stage.value() >= 2 * std::ssize(slices)) {
        throw InvalidConfig("model payload: " + task_name(task) + " runs stage " +
                            std::to_string(task.stage.value()) + "; the model has " +
                            std::to_string(slices.size()) + " stages (and DualPipe copies them " +
                            "once, as stages " + std::to_string(slices.size()) + " to " +
                            std::to_string(2 * slices.size() - 1) + ")");
      }
      if (mine) highest_stage = std::max(highest_stage, task.stage.value());
      if (my_replica) stage_rank[task.stage.value()] = task.rank.value();
      if (mine && task.chunk.valid()) chunk_stage[task.chunk.value()] = task.stage.value();
      return;
    }
    if (!mine) return;
    if (const auto* c = std::get_if<ir::Collective>(&task.op)) {
      index_collective(task, *c, pipeline_ranks);
      return;
    }
    const auto floats = setup.model.microbatch_size * setup.model.seq_len * setup.model.hidden;
    std::int64_t bytes = -1;
    if (const auto* s = std::get_if<ir::Send>(&task.op)) bytes = s->bytes;
    if (const auto* v = std::get_if<ir::Recv>(&task.op)) bytes = v->bytes;
    if (bytes >= 0 && bytes != floats * 4) {
      throw InvalidConfig("model payload: " + task_name(task) + " moves " + std::to_string(bytes) +
                          " bytes; the stage boundary holds " + std::to_string(floats) +
                          " fp32 values: expected a graph built for a model of dtype fp32");
    }
  }

  [[noreturn]] static void refuse(const ir::Task& task, const std::string& why) {
    throw InvalidConfig("model payload: " + task_name(task) + " (" + task.label + ") " + why);
  }

  /// Checks a collective of this rank against the bucket plan (Note [model rank]).
  void index_collective(const ir::Task& task, const ir::Collective& c,
                        std::int32_t pipeline_ranks) {
    // The sums of two copies' gradients: DualPipe's stage copies, tied embeddings.
    const std::optional<lowering::GroupKind> kind = lowering::group_kind(graph.group(c.group).name);
    if (kind == lowering::GroupKind::kStageCopies || kind == lowering::GroupKind::kEmbedding) {
      const bool stage_copies = kind == lowering::GroupKind::kStageCopies;
      if (c.op != ir::CollectiveOp::kAllReduce || c.dtype != ir::DType::kFp32 || c.bytes % 4 != 0 ||
          c.count != 1) {
        refuse(task, std::string(stage_copies ? "sums DualPipe's stage copies"
                                              : "sums the tied embeddings' copies") +
                         " as a " + std::string(ir::to_string(c.op)) + " of " +
                         std::string(ir::to_string(c.dtype)) +
                         "; expected one all-reduce of fp32 gradients");
      }
      (stage_copies ? copy_groups : embedding_groups).insert(c.group.value());
      return;
    }
    if (!task.bucket.valid()) {
      refuse(task,
             "is a collective inside the layers (tensor, context or expert parallelism); "
             "the model payload runs data-parallel buckets only so far: expected tp 1");
    }
    if (c.dtype != ir::DType::kFp32 || c.bytes % 4 != 0) {
      refuse(task, "carries " + std::string(ir::to_string(c.dtype)) +
                       "; the model payload moves its fp32 gradients and parameters as they are "
                       "(no compression hook, no fp16 broadcast)");
    }
    const bool sharded =
        c.op == ir::CollectiveOp::kReduceScatter || c.op == ir::CollectiveOp::kAllGather;
    if (sharded && c.count != 1) {
      refuse(task, "is " + std::to_string(c.count) +
                       " calls (one per tensor, or per optimizer instance); the model payload "
                       "shards a bucket in one call");
    }
    const auto& planned = sync.buckets;
    const auto pipeline_rank = static_cast<std::size_t>(rank.value() % pipeline_ranks);
    const sync::PlannedBucket* bucket = nullptr;
    if (pipeline_rank < planned.size()) {
      for (const sync::PlannedBucket& b : planned[pipeline_rank]) {
        if (b.id == task.bucket.value()) bucket = &b;
      }
    }
    if (bucket == nullptr) {
      refuse(task, "names bucket " + std::to_string(task.bucket.value()) +
                       ", which the sync policy's bucket plan does not have for this rank");
    }
    check_role(task, c, *bucket);
    const std::int64_t length = c.bytes / 4;
    const auto& group = graph.data().groups[c.group.index()].ranks;
    const auto members = std::ssize(group);
    if (length < bucket->bucket.numel || (sharded && length % members != 0)) {
      refuse(task, "moves " + std::to_string(length) + " values for a bucket of " +
                       std::to_string(bucket->bucket.numel) + " over " + std::to_string(members) +
                       " ranks; expected at least the bucket" +
                       (sharded ? ", in equal chunks" : ""));
    }
    SyncBucket& b = buckets[task.bucket.value()];
    b.per_tensor_partitions = bucket->per_tensor_partitions;
    b.group_size = static_cast<std::int32_t>(members);
    b.reduces = b.reduces || c.op == ir::CollectiveOp::kAllReduce ||
                c.op == ir::CollectiveOp::kReduceScatter || c.op == ir::CollectiveOp::kReduce;
    if (b.length != 0 && b.length != length) {
      refuse(task, "moves " + std::to_string(length) +
                       " values; another collective of its bucket moves " +
                       std::to_string(b.length));
    }
    b.length = length;
    if (sharded) {
      // A reduce-scatter hands the rank its share to step; a gather after the step takes each
      // rank's share from it (ZeRO-1/2, whose all-reduce shards nothing): the same share.
      const auto me = std::find(group.begin(), group.end(), rank) - group.begin();
      b.shards_optimizer = true;
      b.owned_begin = me * (length / members);
      b.owned_end = b.owned_begin + length / members;
    }
    if (c.op == ir::CollectiveOp::kReduce) {
      b.shards_optimizer = true;
      b.owned_end = c.root == rank ? length : 0;
    }
  }

  /// The collective's op must be one that does what its planned bucket is for.
  static void check_role(const ir::Task& task, const ir::Collective& c,
                         const sync::PlannedBucket& bucket) {
    using Op = ir::CollectiveOp;
    bool fits = false;
    std::string expected;
    switch (bucket.role) {
      case sync::BucketRole::kGradients:
        fits = c.op == Op::kAllReduce || c.op == Op::kReduceScatter || c.op == Op::kAllGather;
        expected = "an all-reduce, reduce-scatter or all-gather";
        break;
      case sync::BucketRole::kReduceToOwner:
        fits = c.op == Op::kReduce;
        expected = "a reduce to the bucket's owner";
        break;
      case sync::BucketRole::kBroadcastParameters:
        fits = c.op == Op::kBroadcast;
        expected = "a broadcast of parameters";
        break;
    }
    if (!fits) {
      refuse(task, "is a " + std::string(ir::to_string(c.op)) + " of bucket " +
                       std::to_string(bucket.id) + ", which the sync policy's plan syncs by " +
                       expected);
    }
  }

  /// Where each bucket's elements live in the rank's stages (Note [model rank]).
  void lay_out_buckets(std::int32_t pipeline_ranks) {
    if (buckets.empty()) return;
    const auto pipeline_rank = static_cast<std::size_t>(rank.value() % pipeline_ranks);
    const std::vector<sync::ChunkParams>& chunks = sync.input.params[pipeline_rank];
    std::map<std::int32_t, std::map<std::string, const ParameterSlot*>> slots;  // by stage
    for (const auto& [index, held_stage] : stages) {
      for (const ParameterSlot& slot : held_stage->stage.parameter_layout()) {
        slots[index][slot.name] = &slot;
      }
    }
    for (const sync::PlannedBucket& planned : sync.buckets[pipeline_rank]) {
      const auto found = buckets.find(planned.id);
      if (found == buckets.end()) continue;  // no collective carries it on this rank
      SyncBucket& b = found->second;
      std::vector<Slot> members;  // each member's first element
      std::vector<std::int64_t> sizes;
      for (const sync::TensorRef& ref : sync::bucket_members(chunks, planned)) {
        const sync::ChunkParams& chunk = chunks.at(static_cast<std::size_t>(ref.chunk));
        const sync::ParamTensor& tensor = chunk.tensors.at(static_cast<std::size_t>(ref.tensor));
        const auto stage_slots = slots.find(chunk.stage);
        if (stage_slots == slots.end()) {
          throw InvalidConfig("model payload: bucket " + std::to_string(planned.id) +
                              " holds stage " + std::to_string(chunk.stage) + ", which rank " +
                              std::to_string(rank.value()) + " does not hold");
        }
        const auto slot = stage_slots->second.find(tensor.name);
        if (slot == stage_slots->second.end() || slot->second->numel != tensor.numel) {
          throw InvalidConfig("model payload: bucket " + std::to_string(planned.id) + " holds " +
                              tensor.name + " of " + std::to_string(tensor.numel) +
                              " elements, which stage " + std::to_string(chunk.stage) +
                              " does not hold so");
        }
        if (std::find(b.stages.begin(), b.stages.end(), chunk.stage) == b.stages.end()) {
          b.stages.push_back(chunk.stage);
        }
        members.push_back({.stage = chunk.stage, .index = slot->second->offset});
        sizes.push_back(tensor.numel);
      }
      b.slots = b.per_tensor_partitions ? partitioned_slots(members, sizes, b.group_size)
                                        : concatenated_slots(members, sizes);
      if (std::ssize(b.slots) > b.length ||
          (b.per_tensor_partitions && std::ssize(b.slots) != b.length)) {
        throw InvalidConfig("model payload: bucket " + std::to_string(planned.id) + " lays out " +
                            std::to_string(b.slots.size()) + " elements; its collectives move " +
                            std::to_string(b.length));
      }
      b.slots.resize(static_cast<std::size_t>(b.length));
      for (const std::int32_t stage : b.stages) {
        if (b.reduces) stages.at(stage)->synced = true;
      }
    }
  }

  /// Members one after another (`members[i]` is the first element of tensor i).
  static std::vector<Slot> concatenated_slots(const std::vector<Slot>& members,
                                              const std::vector<std::int64_t>& sizes) {
    std::vector<Slot> out;
    for (std::size_t i = 0; i < members.size(); ++i) {
      for (std::int64_t e = 0; e < sizes[i]; ++e) {
        out.push_back({.stage = members[i].stage, .index = members[i].index + e});
      }
    }
    return out;
  }

  /// sync::PlannedBucket::per_tensor_partitions: share r holds partition r of every member.
  static std::vector<Slot> partitioned_slots(const std::vector<Slot>& members,
                                             const std::vector<std::int64_t>& sizes,
                                             std::int32_t shares) {
    std::vector<Slot> out;
    for (std::int64_t r = 0; r < shares; ++r) {
      for (std::size_t i = 0; i < members.size(); ++i) {
        const std::int64_t part = (sizes[i] + shares - 1) / shares;
        for (std::int64_t e = r * part; e < (r + 1) * part; ++e) {
          out.push_back(e < sizes[i]
                            ? Slot{.stage = members[i].stage, .index = members[i].index + e}
                            : Slot{});
        }
      }
    }
    return out;
  }

  /// The rank's stages in model-stage order: the layout of DualPipe's copy sums, alike on the
  /// two ranks of a pair (Note [stage copies]).
  std::vector<HeldStage*> by_model_stage() {
    std::vector<std::pair<std::int64_t, HeldStage*>> order;
    for (auto& [index, s] : stages) order.emplace_back(index % std::ssize(slices), s.get());
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<HeldStage*> out;
    for (const auto& [model_stage, s] : order) out.push_back(s);
    return out;
  }

  /// The gradients the optimizer steps with: synced ones where buckets reduce the stage.
  static std::span<float> step_gradients(HeldStage& s) {
    return s.synced ? std::span<float>(s.reduced) : s.stage.flat_gradients();
  }

  void check_copy_sums() {
    std::int64_t held = 0;
    for (HeldStage* s : by_model_stage()) held += std::ssize(s->stage.flat_parameters());
    for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
      const ir::Task& task = graph.task(ir::TaskId{t});
      const auto* c = std::get_if<ir::Collective>(&task.op);
      if (task.rank != rank || c == nullptr || !copy_groups.contains(c->group.value())) continue;
      if (c->bytes / 4 != held) {
        refuse(task, "sums " + std::to_string(c->bytes / 4) +
                         " gradients of DualPipe's stage copies; the rank's stages hold " +
                         std::to_string(held));
      }
    }
  }

  /// The rank's stages that hold a copy of the tied word embeddings (one end of the model, not
  /// both), with the copy's slot name.
  [[nodiscard]] std::vector<std::pair<std::int32_t, std::string>> tied_copies() const {
    std::vector<std::pair<std::int32_t, std::string>> out;
    if (!setup.model.tied_embeddings) return out;
    for (const auto& [stage, holder] : stage_rank) {
      const StageSlice& s = slice_of(stage);
      if (holder != rank.value() || s.first == s.last) continue;
      out.emplace_back(stage, s.first ? kWordEmbeddings : kTiedHeadCopy);
    }
    return out;
  }

  /// A rank holding one copy of tied embeddings needs the graph's sum (Note [embedding
  /// gradients]); one holding both ends in two stages (the V schedules, DualPipe) sums them on
  /// the rank, at the start of its optimizer step (after the data-parallel and stage-copy sums,
  /// which the step waits for): an addition of two of its own tensors, which moves nothing
  /// between ranks.
  void check_tied_copies() const {
    const auto copies = tied_copies();
    const std::string where = "model payload: rank " + std::to_string(rank.value()) + " ";
    if (copies.size() == 1 && embedding_groups.empty()) {
      throw InvalidConfig(where + "holds a copy of the tied word embeddings (" + copies[0].second +
                          " of stage " + std::to_string(copies[0].first) +
                          ") and the graph has no collective that sums the copies' gradients: "
                          "the copies would train apart");
    }
    if (copies.size() != 1 && !embedding_groups.empty()) {
      throw InvalidConfig(where + "sums tied embeddings' gradients with another rank but holds " +
                          std::to_string(copies.size()) + " copies of them; expected one");
    }
  }

  /// The rank's copies of the tied embeddings: their stages and slots.
  std::vector<std::pair<HeldStage*, const ParameterSlot*>> tied_copy_slots() {
    std::vector<std::pair<HeldStage*, const ParameterSlot*>> out;
    for (const auto& copy : tied_copies()) {
      const std::int32_t stage = copy.first;
      const std::string& name = copy.second;
      HeldStage& s = *stages.at(stage);
      const auto& layout = s.stage.parameter_layout();
      const auto slot = std::find_if(layout.begin(), layout.end(),
                                     [&](const ParameterSlot& p) { return p.name == name; });
      if (slot == layout.end()) {
        throw BackendError("model payload: stage " + std::to_string(stage) + " lacks " + name);
      }
      out.emplace_back(&s, &*slot);
    }
    return out;
  }

  /// The gradients of a copy as the optimizer steps with them.
  static std::span<float> copy_gradients(HeldStage& s, const ParameterSlot& slot) {
    return step_gradients(s).subspan(static_cast<std::size_t>(slot.offset),
                                     static_cast<std::size_t>(slot.numel));
  }

  /// Both copies on this rank: each takes their sum.
  void local_tied_sum() {
    const auto copies = tied_copy_slots();
    if (copies.size() != 2) return;
    const std::scoped_lock lock(copies[0].first->mutex, copies[1].first->mutex);
    const std::span<float> a = copy_gradients(*copies[0].first, *copies[0].second);
    const std::span<float> b = copy_gradients(*copies[1].first, *copies[1].second);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] += b[i];
      b[i] = a[i];
    }
  }

  void check_embedding_sums() {
    const std::int64_t held = tied_copy_slots().front().second->numel;
    for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
      const ir::Task& task = graph.task(ir::TaskId{t});
      const auto* c = std::get_if<ir::Collective>(&task.op);
      if (task.rank != rank || c == nullptr || !embedding_groups.contains(c->group.value())) {
        continue;
      }
      if (c->bytes / 4 != held) {
        refuse(task, "sums " + std::to_string(c->bytes / 4) +
                         " gradients of the tied embeddings; the rank's copy holds " +
                         std::to_string(held));
      }
    }
  }

  /// Note [embedding gradients]: the gradient of the rank's copy of the tied embeddings (the
  /// synced one where buckets reduce the stage), summed with the other end's, replacing its own.
  void embedding_sum(const Launch& launch, const ir::Collective& c) {
    const auto [s, slot] = tied_copy_slots().front();
    const std::lock_guard lock(s->mutex);
    const std::span<float> g = copy_gradients(*s, *slot);
    std::vector<float> buffer(g.begin(), g.end());
    transport.collective(c.group.value(), launch.ordinal, c, buffer);
    std::copy(buffer.begin(), buffer.end(), g.begin());
  }

  /// Note [stage copies]: the gradients of both of the rank's stages, in model-stage order,
  /// summed with the mirror rank's copies of the same stages, replacing the rank's own.
  void copy_sum(const Launch& launch, const ir::Collective& c) {
    const std::vector<HeldStage*> order = by_model_stage();
    std::vector<float> buffer;
    buffer.reserve(static_cast<std::size_t>(c.bytes / 4));
    for (HeldStage* s : order) {
      const std::lock_guard lock(s->mutex);
      const std::span<float> g = step_gradients(*s);
      buffer.insert(buffer.end(), g.begin(), g.end());
    }
    transport.collective(c.group.value(), launch.ordinal, c, buffer);
    std::size_t at = 0;
    for (HeldStage* s : order) {
      const std::lock_guard lock(s->mutex);
      const std::span<float> g = step_gradients(*s);
      std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(at), g.size(), g.begin());
      at += g.size();
    }
  }

  /// A bucket's collective on real gradients or parameters (Note [model rank]): packed from
  /// each of its stages (under that stage's lock), run, and the rank's part unpacked.
  void collective(const Launch& launch, const ir::Collective& c) {
    if (copy_groups.contains(c.group.value())) {
      copy_sum(launch, c);
      return;
    }
    if (embedding_groups.contains(c.group.value())) {
      embedding_sum(launch, c);
      return;
    }
    const ir::Task& task = *launch.task;
    SyncBucket& b = buckets.at(task.bucket.value());
    const bool parameters =
        c.op == ir::CollectiveOp::kAllGather || c.op == ir::CollectiveOp::kBroadcast;
    const float scale = parameters ? 1.0F : 1.0F / static_cast<float>(replicas);
    const auto values_of = [parameters](HeldStage& s) {
      return parameters ? s.stage.flat_parameters() : s.stage.flat_gradients();
    };
    std::vector<float> buffer(b.slots.size(), 0.0F);
    for (const std::int32_t stage : b.stages) {
      HeldStage& s = *stages.at(stage);
      const std::lock_guard lock(s.mutex);
      const std::span<float> values = values_of(s);
      for (std::size_t i = 0; i < buffer.size(); ++i) {
        if (b.slots[i].stage != stage) continue;
        const auto at = static_cast<std::size_t>(b.slots[i].index);
        buffer[i] = values[at] * scale;
        // A gradient leaves with its collective: what the backward adds later goes with the
        // next one (ZeRO's per-microbatch reductions), and the result builds up in `reduced`.
        if (!parameters) values[at] = 0.0F;
      }
    }
    transport.collective(c.group.value(), launch.ordinal, c, buffer);
    std::size_t first = 0;
    std::size_t last = buffer.size();
    if (c.op == ir::CollectiveOp::kReduceScatter || c.op == ir::CollectiveOp::kReduce) {
      first = static_cast<std::size_t>(b.owned_begin);
      last = static_cast<std::size_t>(b.owned_end);
    }
    for (const std::int32_t stage : b.stages) {
      HeldStage& s = *stages.at(stage);
      const std::lock_guard lock(s.mutex);
      const std::span<float> values = values_of(s);
      for (std::size_t i = first; i < last; ++i) {
        if (b.slots[i].stage != stage) continue;
        const auto at = static_cast<std::size_t>(b.slots[i].index);
        if (parameters) {
          values[at] = buffer[i];
          s.stale[at] = false;
        } else {
          s.reduced[at] += buffer[i];
        }
      }
    }
  }

  /// The model stage a graph stage runs: itself, or for DualPipe's copies (stages past the
  /// model's end) the stage they copy.
  [[nodiscard]] const StageSlice& slice_of(std::int32_t stage) const {
    return slices[static_cast<std::size_t>(stage) % slices.size()];
  }

  HeldStage& held(const ir::Task& task) {
    const auto found = stages.find(task.stage.value());
    if (found == stages.end()) {
      throw BackendError("model payload: " + task_name(task) + ": the rank holds no such stage");
    }
    return *found->second;
  }

  /// Whether the task runs its stage's last layer (or names no layers): the last piece of a
  /// forward cut into pieces.
  bool ends_stage(const ir::Task& task) const {
    const StageSlice& slice = slice_of(task.stage.value());
    // DualPipe's copies number their layers past the model's end too.
    const std::int64_t past = task.stage.value() >= std::ssize(slices) ? setup.model.layers : 0;
    return task.layers.empty() || task.layers.last == past + slice.first_layer + slice.layers;
  }

  /// True the first time this step that a piece of (stage, microbatch, phase) runs.
  bool first_piece(const ir::Task& task, ir::Phase phase) {
    const std::lock_guard lock(mutex);
    return ran.emplace(task.stage.value(), task.microbatch.value(), phase).second;
  }

  std::vector<float> take(std::map<MailKey, std::vector<float>>& box, const MailKey& key,
                          const ir::Task& task) {
    const std::lock_guard lock(mutex);
    const auto found = box.find(key);
    if (found == box.end()) {
      throw BackendError("model payload: " + task_name(task) + ": nothing to take from stage " +
                         std::to_string(std::get<0>(key)) + " for microbatch " +
                         std::to_string(std::get<1>(key)) + " (" +
                         std::string(ir::to_string(std::get<2>(key))) + ")");
    }
    std::vector<float> values = std::move(found->second);
    box.erase(found);
    return values;
  }

  void put(std::map<MailKey, std::vector<float>>& box, const MailKey& key,
           std::vector<float> values) {
    const std::lock_guard lock(mutex);
    box[key] = std::move(values);
  }

  /// What stage `stage` receives from its neighbour `from` (Note [model rank]).
  std::vector<float> input_from(const ir::Task& task, std::int32_t from, ir::P2PKind what) {
    const std::int32_t stage = task.stage.value();
    const std::int32_t mb = task.microbatch.value();
    const auto holder = stage_rank.find(from);
    if (holder != stage_rank.end() && holder->second == rank.value()) {
      return take(outbox, {from, mb, what}, task);
    }
    return take(inbox, {stage, mb, what}, task);
  }

  std::int64_t global_microbatch(const ir::Task& task) const {
    return task.microbatch.value() * replicas + replica;
  }

  /// A compute task; a DualPipe F&B unit runs its forward, then its backward half.
  void compute(const ir::Task& task, const ir::Compute& c) {
    run_phase(task, c.phase);
    if (c.overlapped) run_phase(overlapped_part(task, *c.overlapped), c.overlapped->phase);
  }

  void run_phase(const ir::Task& task, ir::Phase phase) {
    switch (phase) {
      case ir::Phase::kForward:
        // A forward cut at parameter-gather points runs at its last piece, after every gather
        // its pieces wait for (Note [model rank]).
        if (ends_stage(task) && first_piece(task, phase)) forward(task);
        return;
      case ir::Phase::kBackward:
      case ir::Phase::kBackwardInput:
        if (first_piece(task, phase)) backward(task, phase == ir::Phase::kBackward);
        return;
      case ir::Phase::kBackwardWeight:
        if (first_piece(task, phase)) {
          HeldStage& s = held(task);
          const std::lock_guard lock(s.mutex);
          s.stage.backward_weight(task.microbatch.value());
        }
        return;
      case ir::Phase::kOptimizer:
        optimizer_step(task);
        return;
      case ir::Phase::kRecompute:
      case ir::Phase::kOther:
        return;
    }
  }

  void forward(const ir::Task& task) {
    HeldStage& s = held(task);
    const StageSlice& slice = slice_of(task.stage.value());
    std::int64_t current = 0;
    {
      const std::lock_guard lock(mutex);
      current = step;
    }
    if (current >= setup.steps) {
      throw BackendError("model payload: " + task_name(task) + ": step " +
                         std::to_string(current + 1) + " of a run set up for " +
                         std::to_string(setup.steps));
    }
    const std::int64_t global = global_microbatch(task);
    const MicrobatchData data = step_microbatch(setup, current, global);
    std::vector<float> activation;
    if (!slice.first) {
      activation = input_from(task, task.stage.value() - 1, ir::P2PKind::kActivation);
    }
    StageInput input{.tokens = data.tokens, .activation = activation, .labels = {}};
    if (slice.last) input.labels = data.labels;
    std::vector<float> out;
    {
      const std::lock_guard lock(s.mutex);
      out = s.stage.forward(task.microbatch.value(), input);
    }
    if (slice.last) {
      const std::lock_guard lock(mutex);
      losses[static_cast<std::size_t>(current)][static_cast<std::size_t>(global)] = out.at(0);
      return;
    }
    put(outbox, {task.stage.value(), task.microbatch.value(), ir::P2PKind::kActivation},
        std::move(out));
  }

  void backward(const ir::Task& task, bool with_weights) {
    HeldStage& s = held(task);
    const StageSlice& slice = slice_of(task.stage.value());
    std::vector<float> grad;
    if (slice.last) {
      grad = {1.0F / static_cast<float>(microbatches)};
    } else {
      grad = input_from(task, task.stage.value() + 1, ir::P2PKind::kGradient);
    }
    std::vector<float> out;
    {
      const std::lock_guard lock(s.mutex);
      out = with_weights ? s.stage.backward(task.microbatch.value(), grad)
                         : s.stage.backward_input(task.microbatch.value(), grad);
    }
    if (slice.first) return;
    put(outbox, {task.stage.value(), task.microbatch.value(), ir::P2PKind::kGradient},
        std::move(out));
  }

  /// The optimizer task: every stage of the rank, or with one task per chunk (Megatron's
  /// chained optimizer) the task's chunk's; the step ends with the rank's last one.
  void optimizer_step(const ir::Task& task) {
    std::int64_t current = 0;
    bool first = false;
    {
      const std::lock_guard lock(mutex);
      current = step;
      first = optimizer_done == 0;
    }
    if (first) local_tied_sum();
    std::optional<std::int32_t> only;  // the task's chunk's stage, with one task per chunk
    if (optimizer_tasks > 1) {
      const auto found = chunk_stage.find(task.chunk.value());
      if (found == chunk_stage.end()) {
        throw BackendError("model payload: " + task_name(task) + " names no chunk of the rank");
      }
      only = found->second;
    }
    for (auto& [index, s] : stages) {
      if (only && *only != index) continue;
      const std::lock_guard lock(s->mutex);
      step_stage(index, *s, current + 1);
      s->stage.zero_gradients();
      std::fill(s->reduced.begin(), s->reduced.end(), 0.0F);
    }
    const std::lock_guard lock(mutex);
    if (++optimizer_done < optimizer_tasks) return;
    optimizer_done = 0;
    ran.clear();
    ++step;
  }

  /// AdamW on the stage, or, where its buckets shard the optimizer (reduce-scatter, reduce to
  /// an owner), on the elements this rank owns: possibly none.
  void step_stage(std::int32_t index, HeldStage& s, std::int64_t t) {
    bool sharded = false;
    std::vector<std::int64_t> shard;
    for (const auto& [id, b] : buckets) {
      if (!b.shards_optimizer ||
          std::find(b.stages.begin(), b.stages.end(), index) == b.stages.end()) {
        continue;
      }
      sharded = true;
      for (std::int64_t i = 0; i < std::ssize(b.slots); ++i) {
        const Slot& slot = b.slots[static_cast<std::size_t>(i)];
        if (slot.stage != index) continue;
        if (i >= b.owned_begin && i < b.owned_end) shard.push_back(slot.index);
      }
    }
    // An element can be owned through two buckets (ZeRO-3's reduce-scatter and gather of it).
    std::sort(shard.begin(), shard.end());
    shard.erase(std::unique(shard.begin(), shard.end()), shard.end());
    // What the rank does not own, its owner steps: stale here until gathered.
    for (const auto& [id, b] : buckets) {
      if (!b.shards_optimizer) continue;
      for (std::int64_t i = 0; i < std::ssize(b.slots); ++i) {
        const Slot& slot = b.slots[static_cast<std::size_t>(i)];
        if (slot.stage == index && !std::binary_search(shard.begin(), shard.end(), slot.index)) {
          s.stale[static_cast<std::size_t>(slot.index)] = true;
        }
      }
    }
    const std::span<float> params = s.stage.flat_parameters();
    const std::span<float> grads = step_gradients(s);
    if (!sharded) {
      adam_step(params, grads, s.exp_avg, s.exp_avg_sq, t, setup.adam);
      return;
    }
    if (shard.empty()) return;
    const auto gather = [&](std::span<const float> from) {
      std::vector<float> out;
      out.reserve(shard.size());
      for (const std::int64_t at : shard) out.push_back(from[static_cast<std::size_t>(at)]);
      return out;
    };
    std::vector<float> p = gather(params);
    std::vector<float> m = gather(s.exp_avg);
    std::vector<float> v = gather(s.exp_avg_sq);
    adam_step(p, gather(grads), m, v, t, setup.adam);
    for (std::size_t i = 0; i < shard.size(); ++i) {
      const auto at = static_cast<std::size_t>(shard[i]);
      params[at] = p[i];
      s.exp_avg[at] = m[i];
      s.exp_avg_sq[at] = v[i];
    }
  }

  void send(const ir::Task& task, const ir::Send& s, std::int32_t tag) {
    const std::vector<float> values =
        take(outbox, {task.stage.value(), task.microbatch.value(), s.what}, task);
    transport.send(s.peer.value(), values, tag);
  }

  void recv(const ir::Task& task, const ir::Recv& r, std::int32_t tag) {
    std::vector<float> values(static_cast<std::size_t>(r.bytes / 4));
    transport.recv(r.peer.value(), values, tag);
    put(inbox, {task.stage.value(), task.microbatch.value(), r.what}, std::move(values));
  }
};

ModelRank::ModelRank(const ir::Graph& graph, ir::RankId rank, std::int32_t pipeline_ranks,
                     const TrainingSetup& setup, std::vector<StageSlice> slices, ModelSync sync)
    : impl_(std::make_unique<Impl>(graph, rank, pipeline_ranks, setup, std::move(slices),
                                   std::move(sync), true)) {}

void check_model_payload(const ir::Graph& graph, std::int32_t pipeline_ranks,
                         const TrainingSetup& setup, const std::vector<StageSlice>& slices,
                         const ModelSync& sync) {
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const ModelRank::Impl checked(graph, ir::RankId{r}, pipeline_ranks, setup, slices, sync, false);
  }
}

ModelRank::~ModelRank() = default;

CpuWork ModelRank::work(ModelTransport transport) {
  impl_->transport = std::move(transport);
  Impl& impl = *impl_;
  return {
      .compute = [&impl](const Launch& launch,
                         const ir::Compute& c) { impl.compute(*launch.task, c); },
      .collective = [&impl](const Launch& launch,
                            const ir::Collective& c) { impl.collective(launch, c); },
      .send = [&impl](const Launch& launch,
                      const ir::Send& s) { impl.send(*launch.task, s, launch.tag); },
      .recv = [&impl](const Launch& launch,
                      const ir::Recv& r) { impl.recv(*launch.task, r, launch.tag); },
  };
}

RankRecord ModelRank::record() const {
  RankRecord out{.replica = impl_->replica};
  {
    const std::lock_guard lock(impl_->mutex);
    out.record.losses = impl_->losses;
  }
  // DualPipe's copies (stages past the model's end) under kStageCopyPrefix'd names.
  std::vector<GptStage*> originals;
  std::vector<GptStage*> copies;
  for (auto& [index, s] : impl_->stages) {
    const bool copy = index >= std::ssize(impl_->slices);
    (copy ? copies : originals).push_back(&s->stage);
    const std::string prefix = copy ? std::string(kStageCopyPrefix) : std::string();
    for (const ParameterSlot& slot : s->stage.parameter_layout()) {
      std::vector<std::int64_t> stale;
      for (std::int64_t e = 0; e < slot.numel; ++e) {
        if (s->stale[static_cast<std::size_t>(slot.offset + e)]) stale.push_back(e);
      }
      if (!stale.empty()) out.stale[prefix + slot.name] = std::move(stale);
    }
  }
  out.record.parameters = parameters_by_name(originals);
  for (auto& [name, values] : parameters_by_name(copies)) {
    out.record.parameters.emplace(std::string(kStageCopyPrefix) + name, std::move(values));
  }
  return out;
}

std::int64_t replica_microbatches(const ir::Graph& graph) {
  std::int64_t out = 0;
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const ir::Task& task = graph.task(ir::TaskId{t});
    if (task.kind() == ir::TaskKind::kCompute && task.microbatch.valid()) {
      out = std::max<std::int64_t>(out, task.microbatch.value() + 1);
    }
  }
  return out;
}

}  // namespace metron::exec
