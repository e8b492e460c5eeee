// split_compute: Note [compute pieces] (compute_split.h).
//
// Pieces are appended to the builder and then placed by rebuilding each touched rank's issue
// order once: with thousands of requests, inserting into the order per request would be
// quadratic in the rank's task count.

#include "metron/lowering/compute_split.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "metron/base/error.h"

namespace metron::lowering {
namespace {

using ir::TaskId;

// " [L3-5]" for layers [3, 6): inclusive, as people count layers.
std::string layer_suffix(ir::LayerRange r) {
  std::string s = " [L" + std::to_string(r.first);
  if (r.last - r.first > 1) s += "-" + std::to_string(r.last - 1);
  return s + "]";
}

std::string piece_label(const std::string& label, ir::LayerRange r) {
  std::string suffix = layer_suffix(r);
  return label.empty() ? suffix.substr(1) : label + suffix;
}

bool splittable(const ir::GraphData& data, const ir::Task& task) {
  const auto* c = std::get_if<ir::Compute>(&task.op);
  // A task of a rank that does not exist has no issue order to place pieces in (build() reports
  // it), so it stays whole.
  return c != nullptr && !task.layers.empty() && !c->overlapped.has_value() && task.rank.valid() &&
         task.rank.index() < data.issue_order.size();
}

// The piece ranges in execution order: ascending for forward-running phases, else from the top.
std::vector<ir::LayerRange> piece_ranges(ir::LayerRange whole, std::vector<std::int32_t> cuts,
                                         bool backward) {
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<ir::LayerRange> ranges;
  std::int32_t first = whole.first;
  for (std::int32_t cut : cuts) {
    if (cut <= whole.first || cut >= whole.last) continue;
    ranges.push_back({.first = first, .last = cut});
    first = cut;
  }
  ranges.push_back({.first = first, .last = whole.last});
  if (backward) std::reverse(ranges.begin(), ranges.end());
  return ranges;
}

// Splits one task; returns its pieces in execution order (the task itself last). New pieces are
// added to the builder (and so to the end of the rank's issue order, which the caller rebuilds).
std::vector<TaskId> split_one(ir::GraphBuilder& b, TaskId id, std::vector<std::int32_t> cuts) {
  ir::Task original = b.task(id);  // a copy: adding pieces may move the builder's tasks
  const auto& compute = std::get<ir::Compute>(original.op);
  const std::vector<ir::LayerRange> ranges =
      piece_ranges(original.layers, std::move(cuts), runs_backward(compute.phase));
  if (ranges.size() == 1) return {id};
  // Work is shared out by layer count, so the pieces together still do the task's work.
  const auto share = [&](ir::LayerRange r) {
    return static_cast<double>(r.last - r.first) /
           static_cast<double>(original.layers.last - original.layers.first);
  };
  std::vector<TaskId> pieces;
  pieces.reserve(ranges.size());
  for (std::size_t k = 0; k + 1 < ranges.size(); ++k) {
    ir::Task piece = original;
    piece.layers = ranges[k];
    piece.label = piece_label(original.label, ranges[k]);
    auto& c = std::get<ir::Compute>(piece.op);
    c.flops = compute.flops * share(ranges[k]);
    c.bytes_moved = compute.bytes_moved * share(ranges[k]);
    if (k > 0) {  // later pieces follow the first on the stream (FIFO) and allocate nothing
      piece.deps.clear();
      piece.allocates.clear();
    }
    pieces.push_back(b.add(std::move(piece)));
  }
  ir::Task& last = b.task(id);
  last.layers = ranges.back();
  last.label = piece_label(original.label, ranges.back());
  last.deps.clear();
  last.allocates.clear();
  auto& c = std::get<ir::Compute>(last.op);
  c.flops = compute.flops * share(ranges.back());
  c.bytes_moved = compute.bytes_moved * share(ranges.back());
  pieces.push_back(id);
  return pieces;
}

// Rebuilds the issue order of every rank in `ranks`: each split task is preceded by its other
// pieces; pieces (ids >= `original_tasks`, appended by add()) are dropped from the order's end.
void place_pieces(ir::GraphBuilder& b, const std::vector<std::int32_t>& ranks,
                  std::size_t original_tasks,
                  const std::unordered_map<std::int32_t, std::vector<TaskId>>& pieces_of) {
  for (std::int32_t r : ranks) {
    const std::vector<TaskId>& old = b.data().issue_order[static_cast<std::size_t>(r)];
    std::vector<TaskId> order;
    order.reserve(old.size());
    for (TaskId t : old) {
      if (t.index() >= original_tasks) continue;
      if (auto it = pieces_of.find(t.value()); it != pieces_of.end()) {
        order.insert(order.end(), it->second.begin(), it->second.end() - 1);
      }
      order.push_back(t);
    }
    b.set_issue_order(ir::RankId{r}, std::move(order));
  }
}

// Requests for one task are merged: their cuts together split it once.
std::unordered_map<std::int32_t, std::vector<std::int32_t>> merged_cuts(
    const std::vector<SplitRequest>& requests, std::size_t tasks) {
  std::unordered_map<std::int32_t, std::vector<std::int32_t>> cuts_of;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const TaskId t = requests[i].task;
    if (!t.valid() || t.index() >= tasks) {
      throw InvalidConfig("split_compute: request " + std::to_string(i) + " names task " +
                          std::to_string(t.value()) + "; expected a task 0.." +
                          std::to_string(static_cast<long>(tasks) - 1));
    }
    auto& cuts = cuts_of[t.value()];
    cuts.insert(cuts.end(), requests[i].cuts.begin(), requests[i].cuts.end());
  }
  return cuts_of;
}

}  // namespace

bool runs_backward(ir::Phase phase) noexcept {
  return phase == ir::Phase::kBackward || phase == ir::Phase::kBackwardInput ||
         phase == ir::Phase::kBackwardWeight;
}

std::vector<std::vector<TaskId>> split_compute(ir::GraphBuilder& b,
                                               const std::vector<SplitRequest>& requests) {
  const std::size_t original_tasks = b.data().tasks.size();
  std::unordered_map<std::int32_t, std::vector<std::int32_t>> cuts_of =
      merged_cuts(requests, original_tasks);
  // Reserving once keeps add() from moving every (large) task again and again.
  std::size_t most_pieces = original_tasks;
  for (const auto& [t, cuts] : cuts_of) {
    const ir::Task& task = b.data().tasks[static_cast<std::size_t>(t)];
    if (!splittable(b.data(), task)) continue;
    most_pieces += std::min<std::size_t>(
        cuts.size(), static_cast<std::size_t>(task.layers.last - task.layers.first - 1));
  }
  b.reserve_tasks(most_pieces);
  std::unordered_map<std::int32_t, std::vector<TaskId>> pieces_of;
  std::vector<std::int32_t> touched_ranks;
  std::vector<std::vector<TaskId>> result;
  result.reserve(requests.size());
  for (const SplitRequest& request : requests) {
    const TaskId t = request.task;
    if (auto it = pieces_of.find(t.value()); it != pieces_of.end()) {
      result.push_back(it->second);
      continue;
    }
    std::vector<TaskId> pieces = splittable(b.data(), b.task(t))
                                     ? split_one(b, t, std::move(cuts_of[t.value()]))
                                     : std::vector<TaskId>{t};
    if (pieces.size() > 1) touched_ranks.push_back(b.task(t).rank.value());
    result.push_back(pieces);
    pieces_of.emplace(t.value(), std::move(pieces));
  }
  std::sort(touched_ranks.begin(), touched_ranks.end());
  touched_ranks.erase(std::unique(touched_ranks.begin(), touched_ranks.end()), touched_ranks.end());
  place_pieces(b, touched_ranks, original_tasks, pieces_of);
  return result;
}

}  // namespace metron::lowering
