// Graph -> rows: the projection of Note [rows to graph] in rows_graph.h.

#include <string>
#include <utility>

#include "metron/base/error.h"
#include "metron/ir/rows_graph.h"
#include "rows_graph_conventions.h"

namespace metron::ir {
namespace {

using detail::StageOwners;

struct PhaseAction {
  Phase phase;
  ActionType type;
  bool needs_tags;  // written <stage>X<mb>, so both tags must be set
};

constexpr std::array<PhaseAction, 7> kPhaseActions{{
    {Phase::kForward, ActionType::kForward, true},
    {Phase::kBackwardInput, ActionType::kBackwardInput, true},
    {Phase::kBackwardWeight, ActionType::kBackwardWeight, true},
    {Phase::kBackward, ActionType::kBackward, true},
    {Phase::kRecompute, ActionType::kRecompute, true},
    {Phase::kOptimizer, ActionType::kOptimizerStep, false},
    {Phase::kOther, ActionType::kOtherCompute, false},
}};

const PhaseAction& phase_action(Phase phase) {
  for (const auto& entry : kPhaseActions) {
    if (entry.phase == phase) return entry;
  }
  throw InternalError(__FILE__, __LINE__, "phase without an action type");
}

StageOwners owners_of(const Graph& graph) {
  StageOwners owners;
  for (const Task& t : graph.tasks()) {
    const auto* compute = std::get_if<Compute>(&t.op);
    if (compute == nullptr) continue;
    detail::add_owner(owners, t.stage.value(), t.rank.value());
    if (compute->overlapped)
      detail::add_owner(owners, compute->overlapped->stage.value(), t.rank.value());
  }
  return owners;
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Turns tasks into actions; one instance per graph, since peer inference needs every rank.
class ActionWriter {
 public:
  explicit ActionWriter(const Graph& graph) : graph_(graph), owners_(owners_of(graph)) {}

  [[nodiscard]] Action action_of(TaskId id) const {
    const Task& t = graph_.task(id);
    return std::visit(Overloaded{
                          [&](const Compute& c) { return compute_action(id, t, c); },
                          [&](const Collective& c) { return collective_action(id, t, c); },
                          [&](const Send& s) { return p2p_action(id, t, true, s.peer, s.what); },
                          [&](const Recv& r) { return p2p_action(id, t, false, r.peer, r.what); },
                          [&](const HostWait& w) {
                            return Action{.type = ActionType::kHostWait,
                                          .sub = {action_of(w.target)}};
                          },
                      },
                      t.op);
  }

 private:
  [[noreturn]] void no_text_form(TaskId id, const std::string& why) const {
    throw InvalidConfig(describe_task(graph_.data(), id) + ": has no text form: " + why);
  }

  Action compute_half(TaskId id, Phase phase, StageId stage, MicrobatchId mb) const {
    const PhaseAction& entry = phase_action(phase);
    if (entry.needs_tags && (!stage.valid() || !mb.valid())) {
      no_text_form(id, std::string(to_string(phase)) +
                           " needs a stage and a microbatch; expected both tags to be set");
    }
    Action a{.type = entry.type, .stage = stage.value(), .microbatch = mb.value()};
    // STEP has no microbatch in the text form; the projection drops it.
    if (entry.type == ActionType::kOptimizerStep) a.microbatch = -1;
    return a;
  }

  Action compute_action(TaskId id, const Task& t, const Compute& c) const {
    Action first = compute_half(id, c.phase, t.stage, t.microbatch);
    if (!c.overlapped) return first;
    const OverlapPart& part = *c.overlapped;
    return Action{.type = ActionType::kOverlapForwardBackward,
                  .sub = {first, compute_half(id, part.phase, part.stage, part.microbatch)}};
  }

  Action collective_action(TaskId id, const Task& t, const Collective& c) const {
    const Stream& stream = graph_.stream(t.stream);
    // A JSON graph may use any string; the text form could not read back what it wrote.
    for (const auto& [what, name] :
         {std::pair{"group", graph_.group(c.group).name}, std::pair{"stream", stream.name}}) {
      if (!is_text_form_name(name)) {
        no_text_form(id, std::string(what) + " name \"" + name +
                             "\" has characters the text form cannot spell; expected letters, "
                             "digits, '_', '-' and '.'");
      }
    }
    CollectiveAction out{.op = c.op,
                         .group = graph_.group(c.group).name,
                         .seq = c.seq,
                         .bytes = c.bytes,
                         .dtype = c.dtype,
                         .count = c.count};
    if (c.root.valid()) out.root = c.root.value();
    if (t.bucket.valid()) out.bucket = t.bucket.value();
    if (stream.name != "comm") out.stream = stream.name;
    return Action{.type = ActionType::kCollective,
                  .stage = t.stage.value(),
                  .microbatch = t.microbatch.value(),
                  .collective = std::move(out)};
  }

  Action p2p_action(TaskId id, const Task& t, bool is_send, RankId peer, P2PKind what) const {
    const detail::P2PConvention* p2p = detail::find_p2p(is_send, what);
    if (p2p == nullptr) {
      no_text_form(id, "p2p transfers of kind \"" + std::string(to_string(what)) +
                           "\" have no action; expected activation or gradient");
    }
    if (!t.stage.valid() || !t.microbatch.valid()) {
      no_text_form(id,
                   "a p2p transfer needs a stage and a microbatch; expected both tags to be set");
    }
    Action a{.type = p2p->type, .stage = t.stage.value(), .microbatch = t.microbatch.value()};
    // Same inference as rows_to_graph: write @peer only when it would not come out the same.
    if (detail::sole_owner(owners_, detail::neighbour_stage(a.stage, p2p->peer_offset)) !=
        peer.value()) {
      a.peer = peer.value();
    }
    return a;
  }

  const Graph& graph_;
  StageOwners owners_;
};

}  // namespace

ActionRows graph_to_rows(const Graph& graph) {
  ActionRows out;
  for (const Group& g : graph.data().groups) {
    if (!is_text_form_name(g.name)) {
      throw InvalidConfig("group \"" + g.name +
                          "\" has no text form: its name has characters the text form cannot "
                          "spell; expected letters, digits, '_', '-' and '.'");
    }
    GroupDecl decl{.name = g.name};
    for (RankId r : g.ranks) decl.ranks.push_back(r.value());
    out.groups.push_back(std::move(decl));
  }
  ActionWriter writer(graph);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    auto& row = out.rows.emplace_back();
    for (TaskId id : graph.issue_order(RankId{r})) row.emplace_back(writer.action_of(id));
  }
  return out;
}

}  // namespace metron::ir
