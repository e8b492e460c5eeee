// assign_layers: which transformer layers each global stage holds (docs/SCHEDULES.md §1.10), and
// the pass that tags compute tasks with their stage's range.
//
// Three exclusive ways, as in Megatron: an even split of `layers` over the stages; an explicit
// count per stage (`per_stage`, optionally checked against `layers`); or Megatron's
// --decoder-first/last-pipeline-num-layers (`first_stage` / `last_stage` with `layers`), the rest
// split evenly over the other stages. Ranges are consecutive from layer 0 in stage order.

#include <numeric>
#include <string>
#include <utility>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using std::to_string;

constexpr const char* kWhere = "layer assignment: ";

std::vector<ir::LayerRange> ranges_from_counts(const std::vector<std::int32_t>& counts) {
  std::vector<ir::LayerRange> ranges;
  std::int32_t first = 0;
  for (std::int32_t n : counts) {
    ranges.push_back({.first = first, .last = first + n});
    first += n;
  }
  return ranges;
}

// "8 or 12": the totals closest to `total` of the form fixed + k * parts, k >= 1.
std::string nearest(std::int32_t total, std::int32_t fixed, std::int32_t parts) {
  std::int32_t below = fixed + (total - fixed) / parts * parts;
  std::int32_t above = below + parts;
  if (below <= fixed) return to_string(above);
  return to_string(below) + " or " + to_string(above);
}

std::vector<std::int32_t> even_counts(std::int32_t layers, std::int32_t stages) {
  if (layers < 0)
    throw InvalidConfig(kWhere + ("layers is " + to_string(layers)) + "; expected >= 0");
  if (layers % stages != 0) {
    throw InvalidConfig(kWhere + to_string(layers) + " layers do not split evenly over " +
                        to_string(stages) + " stages; expected a multiple of " + to_string(stages) +
                        " (nearest valid layer counts: " + nearest(layers, 0, stages) + ")");
  }
  return std::vector<std::int32_t>(static_cast<std::size_t>(stages), layers / stages);
}

std::vector<std::int32_t> explicit_counts(const LayerAssignment& a, std::int32_t stages) {
  if (a.first_stage || a.last_stage) {
    throw InvalidConfig(std::string(kWhere) +
                        "per_stage cannot be combined with first_stage/last_stage; expected one "
                        "of them");
  }
  if (static_cast<std::int32_t>(a.per_stage.size()) != stages) {
    throw InvalidConfig(kWhere + ("per_stage lists " + to_string(a.per_stage.size())) +
                        " counts for " + to_string(stages) +
                        " stages; expected one count per stage");
  }
  for (std::size_t s = 0; s < a.per_stage.size(); ++s) {
    if (a.per_stage[s] < 0) {
      throw InvalidConfig(kWhere + ("per_stage[" + to_string(s)) + "] (stage " + to_string(s) +
                          ") is " + to_string(a.per_stage[s]) + "; expected >= 0");
    }
  }
  std::int32_t sum = std::accumulate(a.per_stage.begin(), a.per_stage.end(), 0);
  if (a.layers && *a.layers != sum) {
    throw InvalidConfig(kWhere + ("per_stage counts sum to " + to_string(sum)) + " but layers is " +
                        to_string(*a.layers) + "; expected them equal");
  }
  return a.per_stage;
}

void check_first_last(const LayerAssignment& a, std::int32_t stages, const std::string& given) {
  bool both = a.first_stage && a.last_stage;
  if (!a.layers) {
    throw InvalidConfig(kWhere + given + (both ? " need" : " needs") +
                        " the total; expected layers to be set");
  }
  if (stages < 2) {
    throw InvalidConfig(kWhere + given + (both ? " need" : " needs") + " at least 2 stages; got " +
                        to_string(stages));
  }
  for (const auto& [name, count] :
       {std::pair{"first_stage", a.first_stage}, std::pair{"last_stage", a.last_stage}}) {
    if (count && *count < 0) {
      throw InvalidConfig(kWhere + (name + (" is " + to_string(*count))) + "; expected >= 0");
    }
  }
}

std::vector<std::int32_t> first_last_counts(const LayerAssignment& a, std::int32_t stages) {
  std::string given = a.first_stage && a.last_stage ? "first_stage and last_stage"
                      : a.first_stage               ? "first_stage"
                                                    : "last_stage";
  check_first_last(a, stages, given);
  std::int32_t fixed = a.first_stage.value_or(0) + a.last_stage.value_or(0);
  std::int32_t rest = *a.layers - fixed;
  std::int32_t middle = stages - (a.first_stage ? 1 : 0) - (a.last_stage ? 1 : 0);
  if (rest < 0 || (middle == 0 && rest != 0)) {
    throw InvalidConfig(kWhere + given + " take " + to_string(fixed) + " layers but layers is " +
                        to_string(*a.layers) + " with " + to_string(middle) +
                        " other stage(s); expected layers " + (middle == 0 ? "= " : ">= ") +
                        to_string(fixed));
  }
  if (middle > 0 && rest % middle != 0) {
    throw InvalidConfig(kWhere + ("the " + to_string(rest)) + " layers left after " + given +
                        " do not split evenly over the " + to_string(middle) +
                        " other stages; expected a multiple of " + to_string(middle) +
                        " (nearest valid layer counts: " + nearest(*a.layers, fixed, middle) + ")");
  }
  std::vector<std::int32_t> counts(static_cast<std::size_t>(stages),
                                   middle > 0 ? rest / middle : 0);
  if (a.first_stage) counts.front() = *a.first_stage;
  if (a.last_stage) counts.back() = *a.last_stage;
  return counts;
}

}  // namespace

std::vector<ir::LayerRange> assign_layers(const LayerAssignment& layers, std::int32_t stages) {
  if (stages < 1)
    throw InvalidConfig(kWhere + ("stages is " + to_string(stages)) + "; expected >= 1");
  if (!layers.per_stage.empty()) return ranges_from_counts(explicit_counts(layers, stages));
  if (layers.first_stage || layers.last_stage) {
    return ranges_from_counts(first_last_counts(layers, stages));
  }
  if (layers.layers) return ranges_from_counts(even_counts(*layers.layers, stages));
  throw InvalidConfig(std::string(kWhere) +
                      "nothing to assign; expected layers, per_stage or first_stage/last_stage");
}

void assign_layers(ir::GraphBuilder& b, const std::vector<ir::LayerRange>& ranges) {
  auto range_of = [&](ir::StageId stage, ir::TaskId id) {
    if (stage.index() >= ranges.size()) {
      throw InvalidConfig("assign_layers: " + ir::describe_task(b.data(), id) + " has stage " +
                          to_string(stage.value()) + "; expected a stage below " +
                          to_string(ranges.size()) + " (the stages the layers were assigned to)");
    }
    return ranges[stage.index()];
  };
  const auto tasks = static_cast<std::int32_t>(b.data().tasks.size());
  for (std::int32_t i = 0; i < tasks; ++i) {
    ir::TaskId id{i};
    ir::Task& t = b.task(id);
    auto* c = std::get_if<ir::Compute>(&t.op);
    // The optimizer step updates every stage of its rank: no single range describes it.
    if (c == nullptr || c->phase == ir::Phase::kOptimizer || !t.stage.valid()) continue;
    t.layers = range_of(t.stage, id);
    if (c->overlapped && c->overlapped->stage.valid()) {
      c->overlapped->layers = range_of(c->overlapped->stage, id);
    }
  }
}

ir::Graph assign_layers(const ir::Graph& graph, const std::vector<ir::LayerRange>& ranges) {
  ir::GraphBuilder b(graph);
  assign_layers(b, ranges);
  return std::move(b).build();
}

}  // namespace metron::lowering
