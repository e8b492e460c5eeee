// add_intra_layer_collectives: Note [intra-layer collectives] (intra_layer.h).
//
// One pass per rank over its issue order, which is rebuilt once: a step has ~100k tasks, so
// collectives are never inserted into an order one at a time. Because dependencies and stream
// predecessors are issued first (validated), every task's waits on a unit's collectives can be
// added when the pass reaches the task, with no index of dependents.

#include "metron/lowering/intra_layer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "metron/base/error.h"

namespace metron::lowering {
namespace {

using ir::TaskId;

constexpr std::size_t kGroupKinds = 9;  // GroupKind's enumerators
constexpr const char* kWhere = "intra-layer collectives: ";

// One half of a compute unit: the task itself, or the backward half of DualPipe's F&B unit; or
// a pipeline receive (Note [pipeline scatter/gather]), whose phase is its consumer's.
struct Half {
  ir::Phase phase = ir::Phase::kOther;
  ir::StageId stage;
  ir::ChunkId chunk;
  ir::MicrobatchId microbatch;
  ir::LayerRange layers;
  bool received = false;
};

// The halves of one task that issue collectives (none, one, or both of an F&B unit).
struct Halves {
  std::array<Half, 2> items;
  std::size_t size = 0;
  [[nodiscard]] bool empty() const { return size == 0; }
  [[nodiscard]] const Half* begin() const { return items.data(); }
  [[nodiscard]] const Half* end() const { return items.data() + size; }
};

const std::vector<LayerCollective>& entries_of(const IntraLayerComm& comm, ir::Phase phase) {
  static const std::vector<LayerCollective> kNone;
  switch (phase) {
    case ir::Phase::kForward:
      return comm.forward;
    case ir::Phase::kBackward:
      return comm.backward;
    case ir::Phase::kBackwardInput:
      return comm.backward_input;
    case ir::Phase::kBackwardWeight:
      return comm.backward_weight;
    case ir::Phase::kRecompute:
      return comm.recompute;
    case ir::Phase::kOptimizer:
    case ir::Phase::kOther:
      break;
  }
  return kNone;
}

const std::vector<LayerCollective>& entries_of(const IntraLayerComm& comm, const Half& h) {
  return h.received ? comm.received : entries_of(comm, h.phase);
}

// A layer's entry stands for its collectives in each of the half's layers; a receive's, once.
std::int64_t count_of(const LayerCollective& e, const Half& h) {
  return h.received ? std::int64_t{e.per_layer}
                    : std::int64_t{e.per_layer} * (h.layers.last - h.layers.first);
}

void check_entries(const std::vector<LayerCollective>& list, const char* name) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    const LayerCollective& e = list[i];
    const std::string where = kWhere + std::string(name) + "[" + std::to_string(i) + "]";
    if (static_cast<std::size_t>(e.group) >= kGroupKinds) {
      throw InvalidConfig(where + ": unknown group kind " +
                          std::to_string(static_cast<int>(e.group)));
    }
    if (e.per_layer < 1) {
      throw InvalidConfig(where + ": per_layer is " + std::to_string(e.per_layer) +
                          "; expected >= 1");
    }
    if (e.bytes < 0) {
      throw InvalidConfig(where + ": bytes is " + std::to_string(e.bytes) + "; expected >= 0");
    }
  }
}

void check_entries(const IntraLayerComm& comm) {
  check_entries(comm.forward, "forward");
  check_entries(comm.backward, "backward");
  check_entries(comm.backward_input, "backward_input");
  check_entries(comm.backward_weight, "backward_weight");
  check_entries(comm.recompute, "recompute");
  check_entries(comm.received, "received");
}

// "tp all-reduce x12 (F mb3)". Appended in place: a step labels thousands of collectives.
std::string collective_label(const LayerCollective& e, std::int32_t count, const Half& h) {
  constexpr std::array<const char*, 7> kLetter = {"F", "I", "W", "B", "R", "STEP", "OTHER"};
  std::string label;
  label.reserve(48);
  label.append(to_string(e.group)).append(" ").append(ir::to_string(e.op));
  label.append(" x").append(std::to_string(count)).append(" (");
  label.append(kLetter.at(static_cast<std::size_t>(h.phase)));
  if (h.microbatch.valid()) label.append(" mb").append(std::to_string(h.microbatch.value()));
  if (h.received) label.append(" recv");
  label.append(")");
  return label;
}

void add_missing(std::vector<TaskId>& deps, TaskId t) {
  if (std::find(deps.begin(), deps.end(), t) == deps.end()) deps.push_back(t);
}

class IntraLayerPass {
 public:
  IntraLayerPass(ir::GraphBuilder& b, const IntraLayerComm& comm);
  void run(ir::RankId rank);

 private:
  Halves halves_of(TaskId x) const;
  std::size_t count_collectives() const;
  void wait_for_units(TaskId x, std::vector<TaskId>& order);
  void add_collectives(TaskId x, const Halves& halves, std::vector<TaskId>& order);
  TaskId add_collective(TaskId x, const Half& h, const LayerCollective& e,
                        std::vector<TaskId> deps);
  ir::StreamId stream_for(GroupKind kind);
  ir::GroupId group_for(GroupKind kind);
  std::span<const TaskId> finish_of(TaskId t) const {
    const auto [begin, end] = finish_[t.index()];
    return {finish_flat_.data() + begin, static_cast<std::size_t>(end - begin)};
  }

  ir::GraphBuilder& b_;
  const IntraLayerComm& comm_;
  std::size_t original_tasks_;
  // What a task's waiters must wait for besides it, as a range of finish_flat_: the last
  // blocking collective after it (which implies the task and all its unit's collectives), or,
  // without blocking ones, its overlapped collectives.
  std::vector<std::pair<std::int32_t, std::int32_t>> finish_;
  std::vector<char> finish_implies_task_;
  // Whether the task's stream successor waits for its finish too: a layer's next kernel needs
  // the collectives' result, a receive's next transfer does not need its gather.
  std::vector<char> finish_binds_stream_;
  std::vector<TaskId> finish_flat_;
  std::vector<TaskId> last_on_stream_;  // by stream: the last original task seen on it
  std::unordered_map<std::string, ir::GroupId> group_by_name_;
  std::vector<std::int64_t> next_seq_;  // by group
  ir::RankId rank_;
  std::array<ir::StreamId, kGroupKinds> streams_{};  // of rank_
  std::array<ir::GroupId, kGroupKinds> groups_{};    // of rank_
};

IntraLayerPass::IntraLayerPass(ir::GraphBuilder& b, const IntraLayerComm& comm)
    : b_(b),
      comm_(comm),
      original_tasks_(b.data().tasks.size()),
      finish_(original_tasks_),
      finish_implies_task_(original_tasks_, 0),
      finish_binds_stream_(original_tasks_, 1),
      last_on_stream_(b.data().streams.size()),
      next_seq_(b.data().groups.size(), 0) {
  const ir::GraphData& data = b.data();
  for (std::size_t g = 0; g < data.groups.size(); ++g) {
    group_by_name_.emplace(data.groups[g].name, ir::GroupId{static_cast<std::int32_t>(g)});
  }
  // Reserving once keeps add() from moving every (large) task again and again.
  b_.reserve_tasks(original_tasks_ + count_collectives());
  // A group of ours may exist already (the pass run again): continue its sequence.
  if (data.groups.empty()) return;
  for (const ir::Task& t : data.tasks) {
    const auto* c = std::get_if<ir::Collective>(&t.op);
    if (c != nullptr && c->group.valid() && c->group.index() < next_seq_.size()) {
      next_seq_[c->group.index()] = std::max(next_seq_[c->group.index()], c->seq + 1);
    }
  }
}

void IntraLayerPass::run(ir::RankId rank) {
  rank_ = rank;
  streams_.fill(ir::StreamId{});
  groups_.fill(ir::GroupId{});
  const std::vector<TaskId> old = b_.data().issue_order[rank.index()];  // add() appends to it
  std::vector<TaskId> order;
  order.reserve(old.size());
  for (TaskId x : old) {
    if (x.index() >= original_tasks_) continue;
    wait_for_units(x, order);
    const Halves halves = halves_of(x);
    if (halves.empty()) {
      order.push_back(x);
    } else {
      add_collectives(x, halves, order);
    }
  }
  b_.set_issue_order(rank, std::move(order));
}

Halves IntraLayerPass::halves_of(TaskId x) const {
  const ir::Task& t = b_.data().tasks[x.index()];
  Halves halves;
  if (const auto* r = std::get_if<ir::Recv>(&t.op)) {
    if (!comm_.received.empty()) {
      const ir::Phase consumer = r->what == ir::P2PKind::kActivation ? ir::Phase::kForward
                                 : r->what == ir::P2PKind::kGradient ? ir::Phase::kBackward
                                                                     : ir::Phase::kOther;
      halves.items[halves.size++] = {consumer, t.stage, t.chunk, t.microbatch, {}, true};
    }
    return halves;
  }
  const auto* c = std::get_if<ir::Compute>(&t.op);
  if (c == nullptr) return halves;
  // An F&B unit's own tags describe its forward half (ir::OverlapPart).
  const ir::Phase own = c->overlapped ? ir::Phase::kForward : c->phase;
  if (t.stage.valid() && !t.layers.empty() && !entries_of(comm_, own).empty()) {
    halves.items[halves.size++] = {own, t.stage, t.chunk, t.microbatch, t.layers};
  }
  if (c->overlapped) {
    const ir::OverlapPart& o = *c->overlapped;
    if (o.stage.valid() && !o.layers.empty() && !entries_of(comm_, o.phase).empty()) {
      halves.items[halves.size++] = {o.phase, o.stage, o.chunk, o.microbatch, o.layers};
    }
  }
  return halves;
}

std::size_t IntraLayerPass::count_collectives() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < original_tasks_; ++i) {
    for (const Half& h : halves_of(TaskId{static_cast<std::int32_t>(i)})) {
      n += entries_of(comm_, h).size();
    }
  }
  return n;
}

// Makes x wait for the collectives of the units it waits for: those in its deps, its stream
// predecessor (the next kernel needs the result), or a HostWait's target.
void IntraLayerPass::wait_for_units(TaskId x, std::vector<TaskId>& order) {
  ir::Task& t = b_.task(x);
  if (auto* w = std::get_if<ir::HostWait>(&t.op)) {
    const TaskId target = w->target;
    if (!target.valid() || target.index() >= original_tasks_) return;
    const std::span<const TaskId> finish = finish_of(target);
    if (finish.empty()) return;
    if (finish_implies_task_[target.index()]) {
      // A HostWait has one target. The last blocking collective depends on the task (and, by
      // its chain, on every collective of the unit), so waiting for it waits for all of them.
      w->target = finish.back();
      return;
    }
    // Overlapped collectives run beside the task and imply nothing: the host waits for each.
    std::vector<TaskId> extra(finish.begin(), finish.end());
    const std::string label = t.label;
    for (TaskId c : extra) {
      order.push_back(b_.add(ir::Task{.rank = rank_,
                                      .label = label.empty() ? "wait" : label,
                                      .op = ir::HostWait{.target = c}}));
    }
    return;
  }
  std::vector<TaskId> deps = t.deps;
  const std::size_t own_deps = deps.size();
  for (std::size_t i = 0; i < own_deps; ++i) {
    const TaskId d = deps[i];
    if (!d.valid() || d.index() >= original_tasks_) continue;
    for (TaskId f : finish_of(d)) add_missing(deps, f);
  }
  if (t.stream.valid() && t.stream.index() < last_on_stream_.size()) {
    TaskId& previous = last_on_stream_[t.stream.index()];
    if (previous.valid() && finish_binds_stream_[previous.index()]) {
      for (TaskId f : finish_of(previous)) add_missing(deps, f);
    }
    previous = x;
  }
  t.deps = std::move(deps);
}

// Overlapped collectives right before x, with x's dependencies; blocking ones right after it,
// chained in entry order (forward half first).
void IntraLayerPass::add_collectives(TaskId x, const Halves& halves, std::vector<TaskId>& order) {
  const std::vector<TaskId> deps = b_.data().tasks[x.index()].deps;
  std::vector<TaskId> overlapped;
  for (const Half& h : halves) {
    if (h.received) finish_binds_stream_[x.index()] = 0;
    for (const LayerCollective& e : entries_of(comm_, h)) {
      if (e.overlapped) overlapped.push_back(add_collective(x, h, e, deps));
    }
  }
  order.insert(order.end(), overlapped.begin(), overlapped.end());
  order.push_back(x);
  TaskId previous;
  for (const Half& h : halves) {
    for (const LayerCollective& e : entries_of(comm_, h)) {
      if (e.overlapped) continue;
      std::vector<TaskId> after;
      if (!previous.valid()) {
        // The layer's later kernels consume the exchanged keys and values, so the first
        // blocking collective also follows the overlapped ones; the last one then implies the
        // whole unit, which lets a HostWait wait for it alone.
        after = overlapped;
        after.insert(after.begin(), x);
      } else if (b_.data().tasks[previous.index()].stream != stream_for(e.group)) {
        after = {previous};  // same stream: FIFO already orders them
      }
      previous = add_collective(x, h, e, std::move(after));
      order.push_back(previous);
    }
  }
  const auto begin = static_cast<std::int32_t>(finish_flat_.size());
  if (previous.valid()) {
    finish_flat_.push_back(previous);
    finish_implies_task_[x.index()] = 1;
  } else {
    finish_flat_.insert(finish_flat_.end(), overlapped.begin(), overlapped.end());
  }
  finish_[x.index()] = {begin, static_cast<std::int32_t>(finish_flat_.size())};
}

TaskId IntraLayerPass::add_collective(TaskId x, const Half& h, const LayerCollective& e,
                                      std::vector<TaskId> deps) {
  const std::int64_t count = count_of(e, h);
  if (count > std::numeric_limits<std::int32_t>::max() ||
      (e.bytes > 0 && count > std::numeric_limits<std::int64_t>::max() / e.bytes)) {
    throw InvalidConfig(kWhere + ir::describe_task(b_.data(), x) + ": " +
                        std::to_string(e.per_layer) + " " + std::string(ir::to_string(e.op)) +
                        "s per layer of " + std::to_string(e.bytes) + " bytes over " +
                        std::to_string(h.layers.last - h.layers.first) +
                        " layers; expected a count within int32 and bytes within int64");
  }
  const bool rooted = e.op == ir::CollectiveOp::kReduce || e.op == ir::CollectiveOp::kBroadcast;
  const ir::GroupId group = group_for(e.group);
  return b_.add(ir::Task{.rank = rank_,
                         .stream = stream_for(e.group),
                         .stage = h.stage,
                         .chunk = h.chunk,
                         .microbatch = h.microbatch,
                         .layers = h.layers,
                         .label = collective_label(e, static_cast<std::int32_t>(count), h),
                         .deps = std::move(deps),
                         .op = ir::Collective{.op = e.op,
                                              .group = group,
                                              .bytes = e.bytes * count,
                                              .dtype = e.dtype,
                                              .root = rooted ? rank_ : ir::RankId{},
                                              .seq = next_seq_[group.index()]++,
                                              .count = static_cast<std::int32_t>(count)}});
}

ir::StreamId IntraLayerPass::stream_for(GroupKind kind) {
  ir::StreamId& s = streams_[static_cast<std::size_t>(kind)];
  if (!s.valid()) s = b_.stream(rank_, std::string(to_string(kind)));
  return s;
}

ir::GroupId IntraLayerPass::group_for(GroupKind kind) {
  ir::GroupId& g = groups_[static_cast<std::size_t>(kind)];
  if (g.valid()) return g;
  std::string name = group_name(kind, rank_.value());
  if (auto it = group_by_name_.find(name); it != group_by_name_.end()) {
    const ir::Group& existing = b_.data().groups[it->second.index()];
    if (existing.ranks != std::vector<ir::RankId>{rank_}) {
      throw InvalidConfig(kWhere + ("group \"" + name) + "\" already exists with " +
                          std::to_string(existing.ranks.size()) + " ranks; expected rank " +
                          std::to_string(rank_.value()) + " alone");
    }
    return g = it->second;
  }
  g = b_.add_group(name, {rank_});
  group_by_name_.emplace(std::move(name), g);
  next_seq_.push_back(0);
  return g;
}

}  // namespace

void add_intra_layer_collectives(ir::GraphBuilder& builder, const IntraLayerComm& comm) {
  check_entries(comm);
  if (comm.empty()) return;
  IntraLayerPass pass(builder, comm);
  const auto ranks = static_cast<std::int32_t>(builder.data().issue_order.size());
  for (std::int32_t r = 0; r < ranks; ++r) pass.run(ir::RankId{r});
}

}  // namespace metron::lowering
