// SyncContext (sync_context.h): the bookkeeping the sync-policy passes share.

#include "sync_context.h"

#include <algorithm>
#include <map>
#include <string>
#include <variant>

#include "metron/base/error.h"
#include "metron/sync/bucket_plan.h"

namespace metron::sync::detail {
namespace {

void set_at(std::vector<ir::TaskId>& by_mb, std::int32_t mb, ir::TaskId task) {
  if (mb < 0) return;
  if (by_mb.size() <= static_cast<std::size_t>(mb)) by_mb.resize(static_cast<std::size_t>(mb) + 1);
  by_mb[static_cast<std::size_t>(mb)] = task;
}

}  // namespace

SyncContext::SyncContext(ir::GraphBuilder& builder, const SyncInput& input, ComputeIndex index)
    : builder_(builder), input_(input) {
  num_ranks_ = static_cast<std::int32_t>(builder_.data().ranks.size());
  if (input_.pipeline_ranks < 1 || num_ranks_ % input_.pipeline_ranks != 0) {
    throw InvalidConfig("sync policy: the graph's " + std::to_string(num_ranks_) +
                        " ranks are not a multiple of " + std::to_string(input_.pipeline_ranks) +
                        " pipeline ranks");
  }
  if (input_.params.size() != static_cast<std::size_t>(input_.pipeline_ranks)) {
    throw InvalidConfig("sync policy: expected parameters for " +
                        std::to_string(input_.pipeline_ranks) + " pipeline ranks, got " +
                        std::to_string(input_.params.size()));
  }
  if (input_.data_parallel < 1 || input_.expert_data_parallel < 1) {
    throw InvalidConfig("sync policy: data-parallel sizes must be positive, got dp " +
                        std::to_string(input_.data_parallel) + " and expert dp " +
                        std::to_string(input_.expert_data_parallel));
  }
  replicas_ = num_ranks_ / input_.pipeline_ranks;
  issued_.assign(static_cast<std::size_t>(num_ranks_), 0);
  placed_.assign(builder_.data().tasks.size(), false);
  if (index == ComputeIndex::kBuild) index_tasks();
}

void SyncContext::require_index() const {
  METRON_ASSERT(indexed_, "SyncContext: compute tasks asked of a context built without them");
}

void SyncContext::index_tasks() {
  const ir::GraphData& data = builder_.data();
  chunks_.assign(static_cast<std::size_t>(num_ranks_), {});
  steps_.assign(static_cast<std::size_t>(num_ranks_), ir::TaskId{});
  const auto chunk_of = [&](ir::RankId rank, ir::ChunkId chunk) -> ChunkTasks* {
    if (!chunk.valid()) return nullptr;
    auto& chunks = chunks_[rank.index()];
    if (chunks.size() <= chunk.index()) chunks.resize(chunk.index() + 1);
    return &chunks[chunk.index()];
  };
  for (std::size_t i = 0; i < data.tasks.size(); ++i) {
    const ir::Task& t = data.tasks[i];
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr) continue;
    const ir::TaskId id{static_cast<std::int32_t>(i)};
    if (c->phase == ir::Phase::kOptimizer) {
      steps_[t.rank.index()] = id;
      continue;
    }
    ChunkTasks* chunk = chunk_of(t.rank, t.chunk);
    if (chunk == nullptr) continue;
    microbatches_ = std::max(microbatches_, t.microbatch.value() + 1);
    switch (c->phase) {
      case ir::Phase::kForward:
        set_at(chunk->forward, t.microbatch.value(), id);
        break;
      case ir::Phase::kBackward:
        set_at(chunk->gradient, t.microbatch.value(), id);
        set_at(chunk->backward_start, t.microbatch.value(), id);
        break;
      case ir::Phase::kBackwardInput:
        set_at(chunk->backward_start, t.microbatch.value(), id);
        break;
      case ir::Phase::kBackwardWeight:
        set_at(chunk->gradient, t.microbatch.value(), id);
        break;
      default:
        break;
    }
    if (c->overlapped) {  // DualPipe's F&B unit: its backward half belongs to another chunk
      ChunkTasks* other = chunk_of(t.rank, c->overlapped->chunk);
      if (other == nullptr) continue;
      microbatches_ = std::max(microbatches_, c->overlapped->microbatch.value() + 1);
      set_at(other->gradient, c->overlapped->microbatch.value(), id);
      set_at(other->backward_start, c->overlapped->microbatch.value(), id);
    }
  }
  indexed_ = true;
}

std::int32_t SyncContext::pipeline_rank(ir::RankId rank) const {
  return rank.value() % input_.pipeline_ranks;
}

const std::vector<ChunkParams>& SyncContext::params(ir::RankId rank) const {
  return input_.params[static_cast<std::size_t>(pipeline_rank(rank))];
}

std::int32_t SyncContext::num_chunks(ir::RankId rank) const {
  require_index();
  return static_cast<std::int32_t>(std::min(chunks_[rank.index()].size(), params(rank).size()));
}

const ChunkTasks& SyncContext::chunk_tasks(ir::RankId rank, std::int32_t chunk) const {
  require_index();
  return chunks_[rank.index()][static_cast<std::size_t>(chunk)];
}

ir::TaskId SyncContext::optimizer_step(ir::RankId rank) const {
  require_index();
  return steps_[rank.index()];
}

std::vector<ir::TaskId> SyncContext::compute_order(ir::RankId rank) const {
  std::vector<ir::TaskId> out;
  for (ir::TaskId t : builder_.data().issue_order[rank.index()]) {
    if (builder_.data().tasks[t.index()].kind() == ir::TaskKind::kCompute) out.push_back(t);
  }
  return out;
}

std::int32_t SyncContext::last_gradient_microbatch(ir::RankId rank, std::int32_t chunk) const {
  // From the end of the issue order: the chunk's last gradient task is near it, and each task's
  // microbatch tag says which entry of `gradient` it would be (O(1) per task; the planner builds
  // thousands of steps of hundreds of microbatches).
  const std::vector<ir::TaskId>& gradient = chunk_tasks(rank, chunk).gradient;
  const std::vector<ir::TaskId>& order = builder_.data().issue_order[rank.index()];
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::MicrobatchId mb = builder_.data().tasks[it->index()].microbatch;
    if (!mb.valid() || mb.value() >= std::ssize(gradient)) continue;
    if (gradient[static_cast<std::size_t>(mb.value())] == *it) return mb.value();
  }
  return -1;
}

std::int32_t SyncContext::first_forward_microbatch(ir::RankId rank, std::int32_t chunk) const {
  const std::vector<ir::TaskId>& forward = chunk_tasks(rank, chunk).forward;
  for (const ir::TaskId t : builder_.data().issue_order[rank.index()]) {
    const ir::MicrobatchId mb = builder_.data().tasks[t.index()].microbatch;
    if (!mb.valid() || mb.value() >= std::ssize(forward)) continue;
    if (forward[static_cast<std::size_t>(mb.value())] == t) return mb.value();
  }
  return -1;
}

std::vector<std::vector<ir::TaskId>> SyncContext::split(
    const std::vector<lowering::SplitRequest>& requests) {
  auto pieces = lowering::split_compute(builder_, requests);
  placed_.resize(builder_.data().tasks.size(), false);
  return pieces;
}

ir::TaskId SyncContext::piece_with_layer(const std::vector<ir::TaskId>& pieces,
                                         std::int32_t layer) const {
  for (ir::TaskId p : pieces) {
    const ir::LayerRange& l = builder_.data().tasks[p.index()].layers;
    if (l.first <= layer && layer < l.last) return p;
  }
  return pieces.back();
}

ir::GroupId SyncContext::group(ir::RankId rank, const CollectiveSpec& spec) {
  const std::int32_t r = pipeline_rank(rank);
  const std::int32_t k = rank.value() / input_.pipeline_ranks;
  // Which replicas share the group: all, consecutive blocks, or a stride (Megatron's intra/inter
  // instance groups, HSDP's shard/replicate groups). In symmetric mode every group has one member.
  std::int32_t block = replicas_;
  bool strided = false;
  switch (spec.kind) {
    case lowering::GroupKind::kExpertData:
      block = std::min(input_.expert_data_parallel, replicas_);
      break;
    case lowering::GroupKind::kDataIntra:
    case lowering::GroupKind::kExpertIntra:
      block = std::clamp(spec.intra_size, 1, replicas_);
      break;
    case lowering::GroupKind::kDataInter:
    case lowering::GroupKind::kExpertInter:
      block = std::clamp(spec.intra_size, 1, replicas_);
      strided = true;
      break;
    default:
      break;
  }
  std::vector<ir::RankId> members;
  if (!spec.pipeline_members.empty()) {
    std::string name = lowering::group_name(spec.kind, spec.group_index);
    auto [it, fresh] = groups_.try_emplace(name);
    if (fresh) {
      for (const std::int32_t p : spec.pipeline_members)
        members.push_back(ir::RankId{k * input_.pipeline_ranks + p});
      it->second = builder_.add_group(std::move(name), std::move(members));
    }
    return it->second;
  }
  std::int32_t which = 0;
  if (strided) {
    which = k % block;
    for (std::int32_t j = which; j < replicas_; j += block)
      members.push_back(ir::RankId{j * input_.pipeline_ranks + r});
  } else {
    which = k / block;
    for (std::int32_t j = which * block; j < std::min((which + 1) * block, replicas_); ++j)
      members.push_back(ir::RankId{j * input_.pipeline_ranks + r});
  }
  std::string name = lowering::group_name(spec.kind, r);
  if (members.size() != static_cast<std::size_t>(replicas_)) name += "." + std::to_string(which);
  auto [it, fresh] = groups_.try_emplace(name);
  if (fresh) it->second = builder_.add_group(name, std::move(members));
  return it->second;
}

ir::TaskId SyncContext::collective(ir::RankId rank, const CollectiveSpec& spec) {
  const ir::GroupId g = group(rank, spec);
  const ir::StreamId stream = builder_.stream(
      rank, spec.stream.empty() ? std::string(lowering::to_string(spec.kind)) : spec.stream);
  const std::vector<ir::RankId>& members = builder_.data().groups[g.index()].ranks;
  ir::RankId root;
  if (spec.root_replica >= 0) {
    root = members[static_cast<std::size_t>(spec.root_replica) % members.size()];
  }
  // Numbered in final issue order by finish(); creation order is not issue order.
  const std::int64_t seq = 0;
  issued_[rank.index()] = 1;
  const ir::TaskId id = builder_.add(ir::Task{
      .rank = rank,
      .stream = stream,
      .chunk = spec.chunk >= 0 ? ir::ChunkId{spec.chunk} : ir::ChunkId{},
      .microbatch = spec.microbatch >= 0 ? ir::MicrobatchId{spec.microbatch} : ir::MicrobatchId{},
      .bucket = spec.bucket >= 0 ? ir::BucketId{spec.bucket} : ir::BucketId{},
      .label = spec.label,
      .deps = spec.deps,
      .op = ir::Collective{.op = spec.op,
                           .group = g,
                           .bytes = spec.bytes,
                           .dtype = spec.dtype,
                           .root = root,
                           .seq = seq,
                           .count = spec.count}});
  placed_.resize(builder_.data().tasks.size(), false);
  return id;
}

ir::TaskId SyncContext::host_wait(ir::RankId rank, ir::TaskId target, std::string label) {
  const ir::TaskId id = builder_.add(
      ir::Task{.rank = rank, .label = std::move(label), .op = ir::HostWait{.target = target}});
  placed_.resize(builder_.data().tasks.size(), false);
  return id;
}

ir::TaskId SyncContext::collective_before_step(ir::RankId rank, CollectiveSpec spec,
                                               std::string_view what) {
  const ir::GraphData& data = builder_.data();
  std::vector<ir::TaskId> steps;
  std::map<std::int32_t, ir::TaskId> last_compute;  // by stream
  for (ir::TaskId t : data.issue_order[rank.index()]) {
    const auto* c = std::get_if<ir::Compute>(&data.tasks[t.index()].op);
    if (c == nullptr) continue;
    if (c->phase == ir::Phase::kOptimizer) {
      steps.push_back(t);
    } else if (steps.empty()) {
      // The last compute task of each stream stands for all before it (streams are FIFOs).
      last_compute[data.tasks[t.index()].stream.value()] = t;
    }
  }
  if (steps.empty()) {
    throw InvalidConfig(std::string(what) + "rank " + std::to_string(rank.value()) +
                        " has no optimizer step to sum the gradients for");
  }
  spec.deps.clear();
  const auto wait_for = [&](ir::TaskId d) {
    if (std::find(spec.deps.begin(), spec.deps.end(), d) == spec.deps.end()) {
      spec.deps.push_back(d);
    }
  };
  for (const auto& [stream, t] : last_compute) wait_for(t);
  for (ir::TaskId step : steps) {
    for (ir::TaskId d : data.tasks[step.index()].deps) wait_for(d);
  }
  const ir::TaskId sum = collective(rank, spec);
  issue_before(steps.front(), sum);
  for (ir::TaskId step : steps) builder_.precede(sum, step);
  return sum;
}

ir::BufferId SyncContext::allocate(ir::TaskId allocator, std::int64_t bytes, std::string name) {
  const ir::RankId rank = builder_.data().tasks[allocator.index()].rank;
  const ir::BufferId buffer = builder_.add_buffer(rank, bytes, std::move(name));
  builder_.task(allocator).allocates.push_back(buffer);
  return buffer;
}

void SyncContext::use(ir::TaskId user, ir::BufferId buffer) {
  std::vector<ir::BufferId>& uses = builder_.task(user).uses;
  if (std::find(uses.begin(), uses.end(), buffer) == uses.end()) uses.push_back(buffer);
}

void SyncContext::issue_after(ir::TaskId anchor, ir::TaskId task) {
  placements_[anchor.value()].after.push_back(task);
  mark_placed(task);
}

void SyncContext::issue_before(ir::TaskId anchor, ir::TaskId task) {
  placements_[anchor.value()].before.push_back(task);
  mark_placed(task);
}

void SyncContext::mark_placed(ir::TaskId task) {
  // Tasks may come from the builder directly (a pass's own compute pieces), not only from here.
  if (placed_.size() <= task.index()) placed_.resize(builder_.data().tasks.size(), false);
  placed_[task.index()] = true;
}

void SyncContext::finish() {
  if (placements_.empty()) {
    number_collectives();
    return;
  }
  std::vector<bool> touched(static_cast<std::size_t>(num_ranks_), false);
  // A flat index of the placements: every task of a touched rank looks itself up.
  std::vector<const Placement*> by_anchor(builder_.data().tasks.size(), nullptr);
  for (const auto& [anchor, placement] : placements_) {
    touched[builder_.data().tasks[static_cast<std::size_t>(anchor)].rank.index()] = true;
    by_anchor[static_cast<std::size_t>(anchor)] = &placement;
  }
  for (std::int32_t r = 0; r < num_ranks_; ++r) {
    if (!touched[static_cast<std::size_t>(r)]) continue;
    const std::vector<ir::TaskId>& current =
        builder_.data().issue_order[static_cast<std::size_t>(r)];
    std::vector<ir::TaskId> order;
    order.reserve(current.size());
    for (ir::TaskId t : current) {
      if (t.index() >= placed_.size() || !placed_[t.index()]) emit(t, by_anchor, order);
    }
    builder_.set_issue_order(ir::RankId{r}, std::move(order));
  }
  placements_.clear();
  number_collectives();
}

void SyncContext::emit(ir::TaskId t, const std::vector<const Placement*>& by_anchor,
                       std::vector<ir::TaskId>& order) {
  const Placement* placement = t.index() < by_anchor.size() ? by_anchor[t.index()] : nullptr;
  if (placement != nullptr) {
    for (ir::TaskId b : placement->before) emit(b, by_anchor, order);
  }
  order.push_back(t);
  if (placement != nullptr) {
    for (ir::TaskId a : placement->after) emit(a, by_anchor, order);
  }
}

void SyncContext::number_collectives() {
  // The groups are this pass's own, and every member issues the same collectives in the same
  // order (replicas are copies), so numbering each rank's in issue order agrees across members.
  const std::size_t num_groups = builder_.data().groups.size();
  std::vector<char> own(num_groups, 0);
  for (const auto& [name, group] : groups_) own[group.index()] = 1;
  std::vector<std::int64_t> next;
  for (std::int32_t r = 0; r < num_ranks_; ++r) {
    if (issued_[static_cast<std::size_t>(r)] == 0) continue;  // no collective of this pass
    next.assign(num_groups, 0);
    for (ir::TaskId t : builder_.data().issue_order[static_cast<std::size_t>(r)]) {
      auto* c = std::get_if<ir::Collective>(&builder_.task(t).op);
      if (c != nullptr && c->group.valid() && c->group.index() < num_groups &&
          own[c->group.index()] != 0) {
        c->seq = next[c->group.index()]++;
      }
    }
  }
}

const SyncPlan& SyncContext::plan(const SyncOptions& options) {
  if (!planned_) {
    plan_ = policy_buckets(input_, options);
    planned_ = true;
    for (const std::vector<PlannedBucket>& rank : plan_) {
      first_walked_id_.push_back(rank.empty() ? 0 : rank.back().id + 1);
    }
  }
  return plan_;
}

std::int32_t SyncContext::add_planned(ir::RankId rank, PlannedBucket bucket) {
  const auto pipeline = static_cast<std::size_t>(pipeline_rank(rank));
  if (plan_.size() <= pipeline) plan_.resize(pipeline + 1);
  const std::int32_t first = pipeline < first_walked_id_.size() ? first_walked_id_[pipeline] : 0;
  auto [next, fresh] = next_planned_id_.try_emplace(rank.value(), first);
  bucket.id = next->second++;
  if (rank.value() < input_.pipeline_ranks) plan_[pipeline].push_back(std::move(bucket));
  return next->second - 1;
}

ir::DType SyncContext::dtype_of(std::int64_t element_bytes) {
  switch (element_bytes) {
    case 1:
      return ir::DType::kFp8;
    case 4:
      return ir::DType::kFp32;
    default:
      return ir::DType::kBf16;
  }
}

}  // namespace metron::sync::detail
