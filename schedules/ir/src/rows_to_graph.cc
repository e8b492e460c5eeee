// Rows -> graph, following Note [rows to graph] in rows_graph.h.

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/ir/rows_graph.h"
#include "rows_graph_conventions.h"

namespace metron::ir {
namespace {

using detail::StageOwners;

constexpr std::array<std::pair<ActionType, Phase>, 7> kComputePhases{{
    {ActionType::kForward, Phase::kForward},
    {ActionType::kBackwardInput, Phase::kBackwardInput},
    {ActionType::kBackwardWeight, Phase::kBackwardWeight},
    {ActionType::kBackward, Phase::kBackward},
    {ActionType::kRecompute, Phase::kRecompute},
    {ActionType::kOptimizerStep, Phase::kOptimizer},
    {ActionType::kOtherCompute, Phase::kOther},
}};

std::optional<Phase> compute_phase(ActionType type) {
  for (const auto& [t, phase] : kComputePhases) {
    if (t == type) return phase;
  }
  return std::nullopt;
}

// Calls f on each compute action `a` stands for: itself, or both halves of an OVERLAP_F_B.
template <class F>
void for_each_compute(const Action& a, F f) {
  if (a.type == ActionType::kOverlapForwardBackward) {
    for (const Action& half : a.sub) f(half);
  } else if (compute_phase(a.type)) {
    f(a);
  }
}

StageOwners owners_of(const ActionRows& rows) {
  StageOwners owners;
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    for (const auto& slot : rows.rows[r]) {
      if (!slot) continue;
      for_each_compute(*slot, [&](const Action& c) {
        detail::add_owner(owners, c.stage, static_cast<std::int32_t>(r));
      });
    }
  }
  return owners;
}

std::string join_ranks(const std::vector<std::int32_t>& ranks) {
  std::string out;
  for (std::int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

using Key = std::tuple<ActionType, std::int32_t, std::int32_t>;

// Hashes a (type, stage, microbatch) key: every task of a row looks up a few, so a hash map
// instead of a tree.
struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    const auto [type, stage, mb] = k;
    const std::uint64_t packed =
        (std::uint64_t{static_cast<std::uint32_t>(stage)} << 32) | static_cast<std::uint32_t>(mb);
    return std::hash<std::uint64_t>{}(packed * 31 + static_cast<std::uint64_t>(type));
  }
};

// Converts one rank's row; remembers, per (type, stage, mb), the latest task added so far, which
// is what every dependency rule of the Note refers to.
class RowConverter {
 public:
  RowConverter(GraphBuilder& b, const ActionRows& rows, const StageOwners& owners, RankId rank,
               std::vector<std::string>& problems)
      : b_(b), rows_(rows), owners_(owners), rank_(rank), problems_(problems) {
    for (const auto& [stage, ranks] : owners_) {
      if (std::binary_search(ranks.begin(), ranks.end(), rank.value())) stages_.push_back(stage);
    }
  }

  void convert(const std::vector<std::optional<Action>>& row) {
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (!row[k]) continue;
      index_ = k;
      const Action& a = *row[k];
      std::optional<Task> task = make_task(a);
      TaskId id;
      if (task) {
        id = b_.add(std::move(*task));
        for (TaskId dep : deps_of(a)) b_.precede(dep, id);
        remember(a, id);
      }
      done_.emplace_back(&a, id);
    }
  }

 private:
  void problem(const Action& a, const std::string& what) {
    problems_.push_back("rank " + std::to_string(rank_.value()) + " action " +
                        std::to_string(index_) + " \"" + to_string(a) + "\": " + what);
  }

  ChunkId chunk_of(std::int32_t stage) const {
    auto it = std::lower_bound(stages_.begin(), stages_.end(), stage);
    if (it == stages_.end() || *it != stage) return ChunkId{};
    return ChunkId{static_cast<std::int32_t>(it - stages_.begin())};
  }

  Task tagged(const Action& a, const std::string& stream) {
    return Task{.rank = rank_,
                .stream = b_.stream(rank_, stream),
                .stage = a.stage >= 0 ? StageId{a.stage} : StageId{},
                .chunk = chunk_of(a.stage),
                .microbatch = a.microbatch >= 0 ? MicrobatchId{a.microbatch} : MicrobatchId{}};
  }

  std::optional<Task> make_task(const Action& a) {
    if (a.type == ActionType::kOverlapForwardBackward) return make_overlap(a);
    if (auto phase = compute_phase(a.type)) {
      Task t = tagged(a, "compute");
      t.op = Compute{.phase = *phase};
      return t;
    }
    if (const auto* p2p = detail::find_p2p(a.type)) return make_p2p(a, *p2p);
    if (a.type == ActionType::kCollective) return make_collective(a);
    if (a.type == ActionType::kHostWait) return make_wait(a);
    problem(a, to_string(Action{.type = a.type}) +
                   " has no graph form (it carries no group or size); expected the collectives "
                   "it stands for, e.g. ALL_GATHER[<group>#<seq>,bytes=<n>]");
    return std::nullopt;
  }

  std::optional<Task> make_overlap(const Action& a) {
    const Action& f = a.sub.at(0);
    const Action& other = a.sub.at(1);
    if (!compute_phase(f.type) || !compute_phase(other.type)) {
      problem(a, "OVERLAP_F_B holds two compute actions; expected e.g. (0F1;1B0)OVERLAP_F_B");
      return std::nullopt;
    }
    Task t = tagged(f, "compute");
    t.op = Compute{
        .phase = *compute_phase(f.type),
        .overlapped = OverlapPart{
            .phase = *compute_phase(other.type),
            .stage = other.stage >= 0 ? StageId{other.stage} : StageId{},
            .chunk = chunk_of(other.stage),
            .microbatch = other.microbatch >= 0 ? MicrobatchId{other.microbatch} : MicrobatchId{}}};
    return t;
  }

  std::optional<std::int32_t> peer_of(const Action& a, const detail::P2PConvention& p2p) {
    if (a.peer) return a.peer;
    std::int32_t neighbour = detail::neighbour_stage(a.stage, p2p.peer_offset);
    if (auto owner = detail::sole_owner(owners_, neighbour)) return owner;
    auto it = owners_.find(neighbour);
    std::string found = it == owners_.end() ? "stage " + std::to_string(neighbour) + " has no owner"
                                            : "stage " + std::to_string(neighbour) + " has " +
                                                  std::to_string(it->second.size()) +
                                                  " owners (ranks " + join_ranks(it->second) + ")";
    problem(a, "cannot infer the peer: " + found + "; expected exactly one rank computing stage " +
                   std::to_string(neighbour) + ", or an explicit @<peer>");
    return std::nullopt;
  }

  std::optional<Task> make_p2p(const Action& a, const detail::P2PConvention& p2p) {
    auto peer = peer_of(a, p2p);
    if (!peer) return std::nullopt;
    // One stream per peer and direction: PyTorch's NCCL backend gives each pair of ranks its own
    // communicator, so a receive from one neighbour never queues behind one from the other.
    Task t = tagged(a, (p2p.is_send ? "pp-send-" : "pp-recv-") + std::to_string(*peer));
    std::int64_t tag =
        p2p_tag(detail::neighbour_stage(a.stage, p2p.sender_offset), a.microbatch, p2p.what);
    if (p2p.is_send) {
      t.op = Send{.peer = RankId{*peer}, .tag = tag, .what = p2p.what};
    } else {
      t.op = Recv{.peer = RankId{*peer}, .tag = tag, .what = p2p.what};
    }
    return t;
  }

  std::optional<Task> make_collective(const Action& a) {
    const CollectiveAction& c = *a.collective;
    auto group = std::find_if(rows_.groups.begin(), rows_.groups.end(),
                              [&](const GroupDecl& g) { return g.name == c.group; });
    if (group == rows_.groups.end()) {
      problem(a, "group \"" + c.group + "\" is not declared; expected a \"group " + c.group +
                     ": <ranks>\" line before the rank rows");
      return std::nullopt;
    }
    Task t = tagged(a, c.stream.value_or("comm"));
    t.bucket = c.bucket ? BucketId{*c.bucket} : BucketId{};
    t.op = Collective{.op = c.op,
                      .group = GroupId{static_cast<std::int32_t>(group - rows_.groups.begin())},
                      .bytes = c.bytes,
                      .dtype = c.dtype,
                      .root = c.root ? RankId{*c.root} : RankId{},
                      .seq = c.seq,
                      .count = c.count};
    return t;
  }

  std::optional<Task> make_wait(const Action& a) {
    for (auto it = done_.rbegin(); it != done_.rend(); ++it) {
      if (*it->first != a.sub.at(0)) continue;
      // The awaited action failed to convert and was reported already.
      if (!it->second.valid()) return std::nullopt;
      return Task{.rank = rank_, .op = HostWait{.target = it->second}};
    }
    problem(a, "no earlier \"" + to_string(a.sub.at(0)) + "\" on rank " +
                   std::to_string(rank_.value()) +
                   "; expected WAIT to follow the action it awaits");
    return std::nullopt;
  }

  [[nodiscard]] TaskId latest(ActionType type, std::int32_t stage, std::int32_t mb) const {
    auto it = latest_.find(Key{type, stage, mb});
    return it == latest_.end() ? TaskId{} : it->second;
  }

  // The later of I(s,mb) and B(s,mb): both finish the input gradient.
  [[nodiscard]] TaskId latest_backward(std::int32_t stage, std::int32_t mb) const {
    return std::max(latest(ActionType::kBackwardInput, stage, mb),
                    latest(ActionType::kBackward, stage, mb));
  }

  static TaskId either(TaskId first, TaskId second) { return first.valid() ? first : second; }

  void add_compute_deps(const Action& c, std::vector<TaskId>& deps) const {
    std::int32_t s = c.stage;
    std::int32_t mb = c.microbatch;
    switch (c.type) {
      case ActionType::kForward:
        deps.push_back(either(latest(ActionType::kRecvForward, s, mb),
                              latest(ActionType::kForward, s - 1, mb)));
        break;
      case ActionType::kBackwardInput:
      case ActionType::kBackward:
        deps.push_back(latest(ActionType::kForward, s, mb));
        deps.push_back(either(latest(ActionType::kRecvBackward, s, mb),
                              latest_backward(detail::neighbour_stage(s, 1), mb)));
        break;
      case ActionType::kBackwardWeight:
        deps.push_back(latest(ActionType::kBackwardInput, s, mb));
        break;
      case ActionType::kOptimizerStep:
        deps.insert(deps.end(), collectives_.begin(), collectives_.end());
        break;
      default:
        break;
    }
  }

  [[nodiscard]] std::vector<TaskId> deps_of(const Action& a) const {
    std::vector<TaskId> deps;
    for_each_compute(a, [&](const Action& c) { add_compute_deps(c, deps); });
    if (a.type == ActionType::kSendForward) {
      deps.push_back(latest(ActionType::kForward, a.stage, a.microbatch));
    } else if (a.type == ActionType::kSendBackward) {
      deps.push_back(latest_backward(a.stage, a.microbatch));
    } else if (a.type == ActionType::kCollective) {
      deps.push_back(latest_compute_);
    }
    std::erase_if(deps, [](TaskId t) { return !t.valid(); });
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    return deps;
  }

  void remember(const Action& a, TaskId id) {
    bool compute = false;
    for_each_compute(a, [&](const Action& c) {
      latest_[Key{c.type, c.stage, c.microbatch}] = id;
      compute = true;
    });
    if (compute) latest_compute_ = id;
    if (detail::find_p2p(a.type)) latest_[Key{a.type, a.stage, a.microbatch}] = id;
    if (a.type == ActionType::kCollective) collectives_.push_back(id);
  }

  GraphBuilder& b_;
  const ActionRows& rows_;
  const StageOwners& owners_;
  RankId rank_;
  std::vector<std::string>& problems_;
  std::vector<std::int32_t> stages_;  // this rank's stages, ascending: index = chunk
  std::size_t index_ = 0;
  std::unordered_map<Key, TaskId, KeyHash> latest_;
  TaskId latest_compute_;
  std::vector<TaskId> collectives_;
  std::vector<std::pair<const Action*, TaskId>> done_;
};

void add_groups(GraphBuilder& b, const ActionRows& rows, std::vector<std::string>& problems) {
  auto num_ranks = static_cast<std::int32_t>(rows.rows.size());
  for (const auto& group : rows.groups) {
    std::vector<RankId> ranks;
    for (std::int32_t r : group.ranks) {
      if (r >= num_ranks) {
        problems.push_back("group \"" + group.name + "\": rank " + std::to_string(r) +
                           " is out of range; expected 0.." + std::to_string(num_ranks - 1));
      }
      ranks.emplace_back(r);
    }
    b.add_group(group.name, std::move(ranks));
  }
}

}  // namespace

GraphBuilder rows_to_builder(const ActionRows& rows, const RowsToGraphOptions& options) {
  GraphBuilder b;
  std::size_t actions = 0;
  for (const auto& row : rows.rows) actions += row.size();
  // Room for the actions plus what later passes add (a gradient all-reduce per rank, ...).
  b.reserve_tasks(actions + 2 * rows.rows.size());
  std::vector<std::string> problems;
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    Rank rank{.hardware_queues = options.hardware_queues};
    if (options.pipeline_coords) rank.coords.pp = static_cast<std::int32_t>(r);
    b.add_rank(rank);
  }
  add_groups(b, rows, problems);
  StageOwners owners = owners_of(rows);
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    RowConverter(b, rows, owners, RankId{static_cast<std::int32_t>(r)}, problems)
        .convert(rows.rows[r]);
  }
  if (!problems.empty()) throw InvalidGraph(std::move(problems));
  for (std::size_t i = 0; i < b.data().tasks.size(); ++i) {
    TaskOp& op = b.task(TaskId{static_cast<std::int32_t>(i)}).op;
    if (auto* send = std::get_if<Send>(&op)) send->bytes = options.p2p_bytes;
    if (auto* recv = std::get_if<Recv>(&op)) recv->bytes = options.p2p_bytes;
  }
  return b;
}

Graph rows_to_graph(const ActionRows& rows, const RowsToGraphOptions& options) {
  return rows_to_builder(rows, options).build();
}

}  // namespace metron::ir
