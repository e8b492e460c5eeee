// Property sweeps over generated rows: the text and CSV forms round-trip, rows without idle slots
// are a fixed point of rows -> graph -> rows, and the graphs round-trip through JSON.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/json_format.h"
#include "metron/ir/rows_graph.h"

namespace metron::ir {
namespace {

using Row = std::vector<std::optional<Action>>;

// Generates well-formed rows of a pipeline with data-parallel replicas. Actions are emitted one
// at a time in a single global order: each send is emitted together with its receive (PyTorch's
// ASAP placement) and each collective on all its members at once, so every stream's order agrees
// with that global order and the rows cannot deadlock.
class RowsGenerator {
 public:
  explicit RowsGenerator(std::uint32_t seed) : rng_(seed) {
    pp_ = uniform(1, 6);
    chunks_ = uniform(1, 2);
    v_shape_ = chunks_ == 2 && chance(0.5);
    replicas_ = uniform(1, 2);
    microbatches_ = uniform(1, 8);
    stages_ = pp_ * chunks_;
    rows_.groups.push_back({.name = "world"});
    for (std::int32_t r = 0; r < num_ranks(); ++r) rows_.groups[0].ranks.push_back(r);
    for (std::int32_t p = 0; p < pp_; ++p) {
      GroupDecl dp{.name = "dp" + std::to_string(p)};
      for (std::int32_t d = 0; d < replicas_; ++d) dp.ranks.push_back(d * pp_ + p);
      rows_.groups.push_back(std::move(dp));
    }
    seqs_.assign(rows_.groups.size(), 0);
    rows_.rows.resize(static_cast<std::size_t>(num_ranks()));
    done_.assign(done_index(replicas_, 0, 0, 0), 0);
  }

  ActionRows generate() {
    std::vector<std::vector<Action>> pending = pending_compute();
    while (true) {
      std::vector<std::pair<std::int32_t, std::size_t>> ready;
      for (std::int32_t r = 0; r < num_ranks(); ++r) {
        for (std::size_t i = 0; i < pending[rank_index(r)].size(); ++i) {
          if (is_ready(r, pending[rank_index(r)][i])) ready.emplace_back(r, i);
        }
      }
      if (ready.empty()) break;
      auto [r, i] = ready[static_cast<std::size_t>(uniform(0, static_cast<int>(ready.size()) - 1))];
      auto& mine = pending[rank_index(r)];
      Action op = mine[i];
      mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
      emit_compute(r, op, mine);
      maybe_extras(r);
    }
    for (const auto& left : pending) EXPECT_TRUE(left.empty()) << "generator got stuck";
    finish();
    return rows_;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  [[nodiscard]] std::int32_t num_ranks() const { return pp_ * replicas_; }
  static std::size_t rank_index(std::int32_t r) { return static_cast<std::size_t>(r); }

  // Loop placement puts stage s on pp rank s % pp; the V shape folds the second chunk back.
  [[nodiscard]] std::int32_t pp_rank_of(std::int32_t stage) const {
    if (v_shape_ && stage >= pp_) return 2 * pp_ - 1 - stage;
    return stage % pp_;
  }
  [[nodiscard]] std::int32_t owner(std::int32_t replica, std::int32_t stage) const {
    return replica * pp_ + pp_rank_of(stage);
  }

  std::vector<std::vector<Action>> pending_compute() {
    std::vector<std::vector<Action>> pending(rank_index(num_ranks()));
    for (std::int32_t d = 0; d < replicas_; ++d) {
      for (std::int32_t s = 0; s < stages_; ++s) {
        auto& mine = pending[rank_index(owner(d, s))];
        for (std::int32_t mb = 0; mb < microbatches_; ++mb) {
          mine.push_back({.type = ActionType::kForward, .stage = s, .microbatch = mb});
          if (chance(0.5)) {
            mine.push_back({.type = ActionType::kBackward, .stage = s, .microbatch = mb});
          } else {
            mine.push_back({.type = ActionType::kBackwardInput, .stage = s, .microbatch = mb});
            mine.push_back({.type = ActionType::kBackwardWeight, .stage = s, .microbatch = mb});
          }
        }
      }
    }
    return pending;
  }

  // Whether a compute action of (replica, what, stage, mb) was emitted; what: F=0, I or B=1, I=2.
  [[nodiscard]] std::size_t done_index(std::int32_t d, int what, std::int32_t s,
                                       std::int32_t mb) const {
    const auto index = ((std::int64_t{d} * 3 + what) * stages_ + s) * microbatches_ + mb;
    return static_cast<std::size_t>(index);
  }
  [[nodiscard]] bool is_done(std::int32_t d, int what, std::int32_t s, std::int32_t mb) const {
    return done_[done_index(d, what, s, mb)] != 0;
  }

  [[nodiscard]] bool is_ready(std::int32_t r, const Action& a) const {
    std::int32_t d = r / pp_;
    std::int32_t s = a.stage;
    std::int32_t mb = a.microbatch;
    switch (a.type) {
      case ActionType::kForward:
        return s == 0 || is_done(d, 0, s - 1, mb);
      case ActionType::kBackwardInput:
      case ActionType::kBackward:
        return is_done(d, 0, s, mb) && (s == stages_ - 1 || is_done(d, 1, s + 1, mb));
      default:  // W
        return is_done(d, 2, s, mb);
    }
  }

  void mark_done(std::int32_t r, const Action& a) {
    std::int32_t d = r / pp_;
    if (a.type == ActionType::kForward) done_[done_index(d, 0, a.stage, a.microbatch)] = 1;
    if (a.type == ActionType::kBackwardInput) done_[done_index(d, 2, a.stage, a.microbatch)] = 1;
    if (a.type == ActionType::kBackwardInput || a.type == ActionType::kBackward) {
      done_[done_index(d, 1, a.stage, a.microbatch)] = 1;
    }
  }

  void push(std::int32_t r, Action a) { rows_.rows[rank_index(r)].emplace_back(std::move(a)); }

  // The peer is written only when the neighbouring stage has several owners.
  std::optional<std::int32_t> peer_token(std::int32_t peer) const {
    if (replicas_ == 1) return std::nullopt;
    return peer;
  }

  void emit_sends(std::int32_t r, const Action& a) {
    std::int32_t d = r / pp_;
    bool forward = a.type == ActionType::kForward;
    if (a.type == ActionType::kBackwardWeight) return;
    std::int32_t next = a.stage + (forward ? 1 : -1);
    if (next < 0 || next >= stages_ || owner(d, next) == r) return;
    std::int32_t peer = owner(d, next);
    push(r, {.type = forward ? ActionType::kSendForward : ActionType::kSendBackward,
             .stage = a.stage,
             .microbatch = a.microbatch,
             .peer = peer_token(peer)});
    push(peer, {.type = forward ? ActionType::kRecvForward : ActionType::kRecvBackward,
                .stage = next,
                .microbatch = a.microbatch,
                .peer = peer_token(r)});
  }

  // Emits `op`, sometimes preceded by a recompute or fused with a ready backward (OVERLAP_F_B).
  void emit_compute(std::int32_t r, const Action& op, std::vector<Action>& mine) {
    bool backward = op.type == ActionType::kBackward || op.type == ActionType::kBackwardInput;
    if (backward && chance(0.1)) {
      push(r, {.type = ActionType::kRecompute, .stage = op.stage, .microbatch = op.microbatch});
    }
    if (op.type == ActionType::kForward && chance(0.2)) {
      for (std::size_t j = 0; j < mine.size(); ++j) {
        bool other_backward =
            mine[j].type == ActionType::kBackward || mine[j].type == ActionType::kBackwardInput;
        if (!other_backward || !is_ready(r, mine[j])) continue;
        Action b = mine[j];
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(j));
        push(r, {.type = ActionType::kOverlapForwardBackward, .sub = {op, b}});
        for (const Action& half : {op, b}) {
          mark_done(r, half);
          emit_sends(r, half);
        }
        return;
      }
    }
    push(r, op);
    mark_done(r, op);
    emit_sends(r, op);
  }

  void maybe_extras(std::int32_t r) {
    if (chance(0.08)) emit_collective();
    if (chance(0.05)) push(r, other_action(r));
    if (chance(0.06)) emit_wait(r);
  }

  // A stage of rank r or none: compute actions define stage ownership, so they never name a
  // stage the rank does not own.
  std::int32_t own_stage_or_none(std::int32_t r) {
    if (chance(0.5)) return -1;
    std::vector<std::int32_t> own;
    for (std::int32_t s = 0; s < stages_; ++s) {
      if (owner(r / pp_, s) == r) own.push_back(s);
    }
    return own[static_cast<std::size_t>(uniform(0, static_cast<int>(own.size()) - 1))];
  }

  Action other_action(std::int32_t r) {
    return {.type = ActionType::kOtherCompute,
            .stage = own_stage_or_none(r),
            .microbatch = chance(0.5) ? uniform(0, 9) : -1};
  }

  void emit_collective() {
    std::size_t g = static_cast<std::size_t>(uniform(0, static_cast<int>(rows_.groups.size()) - 1));
    const GroupDecl& group = rows_.groups[g];
    auto op = static_cast<CollectiveOp>(uniform(0, 5));
    CollectiveAction c{.op = op,
                       .group = group.name,
                       .seq = seqs_[g]++,
                       .bytes = std::int64_t{uniform(0, 1 << 20)} * 4,
                       .dtype = static_cast<DType>(chance(0.7) ? 0 : uniform(1, 6))};
    if (op == CollectiveOp::kReduce || op == CollectiveOp::kBroadcast) {
      c.root = group.ranks[static_cast<std::size_t>(
          uniform(0, static_cast<int>(group.ranks.size()) - 1))];
    }
    if (chance(0.5)) c.bucket = uniform(0, 7);
    if (chance(0.3)) c.stream = chance(0.5) ? "dp-grad" : "tp";
    Action a{.type = ActionType::kCollective,
             .stage = chance(0.3) ? uniform(0, stages_ - 1) : -1,
             .microbatch = chance(0.3) ? uniform(0, microbatches_ - 1) : -1,
             .collective = c};
    for (std::int32_t r : group.ranks) push(r, a);
  }

  // WAIT for a random earlier action of the row (never another WAIT).
  void emit_wait(std::int32_t r) {
    const Row& row = rows_.rows[rank_index(r)];
    if (row.empty()) return;
    const Action& target =
        *row[static_cast<std::size_t>(uniform(0, static_cast<int>(row.size()) - 1))];
    if (target.type == ActionType::kHostWait) return;
    push(r, {.type = ActionType::kHostWait, .sub = {target}});
  }

  void finish() {
    if (chance(0.5)) return;
    for (std::int32_t r = 0; r < num_ranks(); ++r) {
      push(r, {.type = ActionType::kOptimizerStep, .stage = own_stage_or_none(r)});
    }
  }

  std::mt19937 rng_;
  std::int32_t pp_ = 1, chunks_ = 1, replicas_ = 1, microbatches_ = 1, stages_ = 1;
  bool v_shape_ = false;
  ActionRows rows_;
  std::vector<std::int64_t> seqs_;
  std::vector<char> done_;
};

ActionRows with_idles(ActionRows rows, std::mt19937& rng) {
  std::bernoulli_distribution idle(0.15);
  for (auto& row : rows.rows) {
    Row out;
    for (auto& action : row) {
      while (idle(rng)) out.emplace_back(std::nullopt);
      out.push_back(std::move(action));
    }
    if (idle(rng)) out.emplace_back(std::nullopt);
    row = std::move(out);
  }
  return rows;
}

// Re-spaces the canonical text: every separating space becomes a random run of blanks.
std::string respaced(const std::string& text, std::mt19937& rng) {
  std::uniform_int_distribution<int> run(1, 3);
  std::bernoulli_distribution tab(0.3);
  std::string out;
  for (char c : text) {
    if (c != ' ') {
      out += c;
      continue;
    }
    for (int n = run(rng); n > 0; --n) out += tab(rng) ? '\t' : ' ';
  }
  return out;
}

constexpr std::uint32_t kCases = 300;

// Generated once: the sweeps share the cases, seeds 0..kCases-1.
const std::vector<ActionRows>& generated() {
  static const std::vector<ActionRows> kAll = [] {
    std::vector<ActionRows> out;
    for (std::uint32_t seed = 0; seed < kCases; ++seed)
      out.push_back(RowsGenerator(seed).generate());
    return out;
  }();
  return kAll;
}

// The sweeps mean something only if the cases hold every kind of token the graph form has.
TEST(RowsRoundTrip, GeneratedCasesCoverEveryGraphTokenKind) {
  std::set<ActionType> seen;
  bool peer = false;
  bool root = false;
  bool stream = false;
  for (const ActionRows& rows : generated()) {
    for (const auto& row : rows.rows) {
      for (const auto& a : row) {
        seen.insert(a->type);
        peer = peer || a->peer.has_value();
        root = root || (a->collective && a->collective->root);
        stream = stream || (a->collective && a->collective->stream);
      }
    }
  }
  for (ActionType t :
       {ActionType::kForward, ActionType::kBackwardInput, ActionType::kBackwardWeight,
        ActionType::kBackward, ActionType::kRecompute, ActionType::kOptimizerStep,
        ActionType::kOtherCompute, ActionType::kSendForward, ActionType::kRecvForward,
        ActionType::kSendBackward, ActionType::kRecvBackward, ActionType::kOverlapForwardBackward,
        ActionType::kCollective, ActionType::kHostWait}) {
    EXPECT_TRUE(seen.contains(t)) << "action type " << static_cast<int>(t);
  }
  EXPECT_TRUE(peer);
  EXPECT_TRUE(root);
  EXPECT_TRUE(stream);
}

TEST(RowsRoundTrip, TextFormOfGeneratedRowsParsesBack) {
  std::mt19937 rng(7);
  for (std::uint32_t seed = 0; seed < kCases; ++seed) {
    ActionRows rows = with_idles(generated()[seed], rng);
    std::string text = format_rows(rows);
    ASSERT_EQ(parse_rows(text), rows) << "seed " << seed << "\n" << text;
    ASSERT_EQ(parse_rows(respaced(text, rng)), rows) << "seed " << seed;
  }
}

TEST(RowsRoundTrip, CsvFormOfGeneratedRowsParsesBack) {
  std::mt19937 rng(11);
  for (std::uint32_t seed = 0; seed < kCases; ++seed) {
    ActionRows rows = with_idles(generated()[seed], rng);
    rows.groups.clear();
    std::string csv = format_csv(rows);
    ASSERT_EQ(parse_csv(csv), rows) << "seed " << seed << "\n" << csv;
  }
}

TEST(RowsRoundTrip, RowsWithoutIdlesAreAFixedPointOfTheGraph) {
  for (std::uint32_t seed = 0; seed < kCases; ++seed) {
    const ActionRows& rows = generated()[seed];
    ASSERT_EQ(graph_to_rows(rows_to_graph(rows)), rows) << "seed " << seed << "\n"
                                                        << format_rows(rows);
  }
}

TEST(RowsRoundTrip, GraphsFromGeneratedRowsRunToCompletion) {
  // The generator emits each send together with its receive, and each collective on all its
  // members, at one point of a single global order, so the ordering rules can always progress.
  for (std::uint32_t seed = 0; seed < kCases; ++seed) {
    const Graph g = rows_to_graph(generated()[seed]);
    const DeadlockReport report = find_deadlock(g);
    ASSERT_FALSE(report.deadlocked) << "seed " << seed << "\n"
                                    << format_rows(generated()[seed]) << report.blocked.front();
    EXPECT_EQ(report.completed, g.num_tasks());
  }
}

TEST(RowsRoundTrip, GraphsFromRowsRoundTripThroughJson) {
  // Every fifth case: the JSON form has its own tests; this checks the graphs rows produce.
  for (std::uint32_t seed = 0; seed < kCases; seed += 5) {
    Graph g = rows_to_graph(generated()[seed]);
    ASSERT_EQ(graph_from_json(to_json(g)), g) << "seed " << seed;
  }
}

}  // namespace
}  // namespace metron::ir
