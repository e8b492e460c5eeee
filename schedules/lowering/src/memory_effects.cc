// add_memory_effects: the buffers of docs/SCHEDULES.md §7.5 on a lowered graph; tasks keep their
// ids.
//
// Note [pipeline memory effects], per rank and (stage, microbatch):
//   - F allocates the activation stash (activation_bytes), used by the I or B of the same
//     (stage, mb), so it is freed when that backward completes. Without a backward on the rank
//     (forward-only) nothing is stashed.
//   - I allocates the weight-gradient stash (weight_grad_bytes), used by its W: I turns M_B into
//     M_W, W frees M_W.
//   - F of a stage whose output is sent (a SEND_F of the same (stage, mb) on the rank) also
//     allocates the output tensor (output_bytes, else p2p_bytes). With deallocate_output
//     (Megatron's deallocate_output_tensor, §1.6) its last user is that SEND_F, so it is freed once
//     the send completes; without it the output stays alive until the backward. An output handed to
//     a local next stage (V placement) or the last stage's loss gets no buffer of its own: the
//     consumer's activation stash holds it.
//   - OVERLAP_F_B units play both roles: the forward half allocates, the backward half uses.

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::Phase;
using ir::TaskId;

// The tasks playing each role for one (rank, stage, microbatch).
struct Roles {
  TaskId forward;
  TaskId backward;  // I or B
  bool backward_is_input = false;
  TaskId weight;
  TaskId send;  // SEND_F
};

using Key = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // rank, stage, microbatch

void note_compute(Roles& roles, Phase phase, TaskId id) {
  if (phase == Phase::kForward) roles.forward = id;
  if (phase == Phase::kBackwardInput || phase == Phase::kBackward) {
    roles.backward = id;
    roles.backward_is_input = phase == Phase::kBackwardInput;
  }
  if (phase == Phase::kBackwardWeight) roles.weight = id;
}

std::map<Key, Roles> collect_roles(const ir::GraphData& data) {
  std::map<Key, Roles> roles;
  for (std::size_t index = 0; index < data.tasks.size(); ++index) {
    const ir::Task& t = data.tasks[index];
    const TaskId i{static_cast<std::int32_t>(index)};
    Key key{t.rank.value(), t.stage.value(), t.microbatch.value()};
    if (const auto* c = std::get_if<ir::Compute>(&t.op)) {
      if (t.stage.valid() && t.microbatch.valid()) note_compute(roles[key], c->phase, i);
      if (c->overlapped) {
        const ir::OverlapPart& o = *c->overlapped;
        note_compute(roles[Key{t.rank.value(), o.stage.value(), o.microbatch.value()}], o.phase, i);
      }
    } else if (const auto* s = std::get_if<ir::Send>(&t.op)) {
      if (s->what == ir::P2PKind::kActivation) roles[key].send = i;
    }
  }
  return roles;
}

std::string buffer_name(const char* what, const Key& key) {
  return std::string(what) + " s" + std::to_string(std::get<1>(key)) + " mb" +
         std::to_string(std::get<2>(key));
}

void add_buffers(ir::GraphBuilder& b, const Key& key, const Roles& roles,
                 const LoweringOptions& options) {
  ir::RankId rank{std::get<0>(key)};
  auto buffer = [&](const char* what, std::int64_t bytes, TaskId allocator) {
    ir::BufferId id = b.add_buffer(rank, bytes, buffer_name(what, key));
    b.task(allocator).allocates.push_back(id);
    return id;
  };
  const auto per_stage = [&](const std::vector<std::int64_t>& stages, std::int64_t all) {
    if (stages.empty()) return all;
    const auto stage = static_cast<std::size_t>(std::get<1>(key));
    if (stage >= stages.size()) {
      throw InvalidConfig("add_memory_effects: " + std::to_string(stages.size()) +
                          " per-stage byte counts; the graph has stage " + std::to_string(stage));
    }
    return stages[stage];
  };
  if (roles.forward.valid() && roles.backward.valid()) {
    ir::BufferId act =
        buffer("activation", per_stage(options.stage_activation_bytes, options.activation_bytes),
               roles.forward);
    b.task(roles.backward).uses.push_back(act);
  }
  if (roles.backward_is_input && roles.weight.valid()) {
    ir::BufferId stash =
        buffer("weight-grad", per_stage(options.stage_weight_grad_bytes, options.weight_grad_bytes),
               roles.backward);
    b.task(roles.weight).uses.push_back(stash);
  }
  if (roles.forward.valid() && roles.send.valid()) {
    ir::BufferId out =
        buffer("output", options.output_bytes.value_or(options.p2p_bytes), roles.forward);
    b.task(roles.send).uses.push_back(out);
    if (!options.deallocate_output && roles.backward.valid()) {
      b.task(roles.backward).uses.push_back(out);
    }
  }
}

}  // namespace

void add_memory_effects(ir::GraphBuilder& b, const LoweringOptions& options) {
  const std::int64_t output = options.output_bytes.value_or(options.p2p_bytes);
  if (options.activation_bytes < 0 || options.weight_grad_bytes < 0 || options.p2p_bytes < 0 ||
      output < 0) {
    throw InvalidConfig("add_memory_effects: activation_bytes (" +
                        std::to_string(options.activation_bytes) + "), weight_grad_bytes (" +
                        std::to_string(options.weight_grad_bytes) + "), p2p_bytes (" +
                        std::to_string(options.p2p_bytes) + ") and output_bytes (" +
                        std::to_string(output) + "); expected each >= 0");
  }
  for (const auto* list : {&options.stage_activation_bytes, &options.stage_weight_grad_bytes}) {
    if (std::ranges::any_of(*list, [](std::int64_t v) { return v < 0; })) {
      throw InvalidConfig("add_memory_effects: per-stage byte counts; expected each >= 0");
    }
  }
  for (const auto& [key, roles] : collect_roles(b.data())) add_buffers(b, key, roles, options);
}

ir::Graph add_memory_effects(const ir::Graph& graph, const LoweringOptions& options) {
  ir::GraphBuilder b(graph);
  add_memory_effects(b, options);
  return std::move(b).build();
}

}  // namespace metron::lowering
