#include "graph_copies.h"

#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace metron::lowering::detail {
namespace {

/// Shifts every id of a task copied into copy k by that copy's offsets; groups go through a map
/// (a shared group keeps copy 0's id).
struct Offsets {
  std::int32_t ranks = 0;
  std::int32_t streams = 0;
  std::int32_t buffers = 0;
  std::int32_t tasks = 0;
  const std::vector<ir::GroupId>* groups = nullptr;  ///< input group index → output group
};

template <class Id>
Id shifted(Id id, std::int32_t by) {
  return id.valid() ? Id{id.value() + by} : id;
}

ir::Task copy_task(const ir::Task& task, const Offsets& o) {
  ir::Task t = task;
  t.rank = shifted(t.rank, o.ranks);
  t.stream = shifted(t.stream, o.streams);
  for (ir::TaskId& dep : t.deps) dep = shifted(dep, o.tasks);
  for (ir::BufferId& b : t.allocates) b = shifted(b, o.buffers);
  for (ir::BufferId& b : t.uses) b = shifted(b, o.buffers);
  std::visit(
      [&](auto& op) {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, ir::Send> || std::is_same_v<Op, ir::Recv>) {
          op.peer = shifted(op.peer, o.ranks);
        } else if constexpr (std::is_same_v<Op, ir::Collective>) {
          if (op.group.valid()) op.group = (*o.groups)[op.group.index()];
          op.root = shifted(op.root, o.ranks);
        } else if constexpr (std::is_same_v<Op, ir::HostWait>) {
          op.target = shifted(op.target, o.tasks);
        }
      },
      t.op);
  return t;
}

}  // namespace

ir::GraphData side_by_side(const ir::GraphData& in, const CopyPlan& plan) {
  const auto n_ranks = static_cast<std::int32_t>(in.ranks.size());
  ir::GraphData out;
  std::vector<ir::GroupId> shared_id(in.groups.size());
  for (std::int32_t k = 0; k < plan.copies; ++k) {
    std::vector<ir::GroupId> groups(in.groups.size());
    for (std::size_t g = 0; g < in.groups.size(); ++g) {
      const ir::Group& group = in.groups[g];
      const bool shared = plan.shared(group);
      if (shared && k > 0) {
        groups[g] = shared_id[g];
        continue;
      }
      ir::Group copy = group;
      copy.ranks.clear();
      if (shared) {
        for (std::int32_t j = 0; j < plan.copies; ++j) {
          for (ir::RankId r : group.ranks) copy.ranks.push_back(shifted(r, j * n_ranks));
        }
      } else {
        copy.name = plan.name(group, k);
        for (ir::RankId r : group.ranks) copy.ranks.push_back(shifted(r, k * n_ranks));
      }
      groups[g] = ir::GroupId{static_cast<std::int32_t>(out.groups.size())};
      if (shared) shared_id[g] = groups[g];
      out.groups.push_back(std::move(copy));
    }
    const Offsets o{.ranks = k * n_ranks,
                    .streams = k * static_cast<std::int32_t>(in.streams.size()),
                    .buffers = k * static_cast<std::int32_t>(in.buffers.size()),
                    .tasks = k * static_cast<std::int32_t>(in.tasks.size()),
                    .groups = &groups};
    for (ir::Rank rank : in.ranks) {
      plan.set_coords(rank.coords, k);
      out.ranks.push_back(rank);
    }
    for (ir::Stream stream : in.streams) {
      stream.rank = shifted(stream.rank, o.ranks);
      out.streams.push_back(std::move(stream));
    }
    for (ir::Buffer buffer : in.buffers) {
      buffer.rank = shifted(buffer.rank, o.ranks);
      out.buffers.push_back(std::move(buffer));
    }
    for (const ir::Task& task : in.tasks) out.tasks.push_back(copy_task(task, o));
    for (const auto& order : in.issue_order) {
      std::vector<ir::TaskId> copy;
      copy.reserve(order.size());
      for (ir::TaskId t : order) copy.push_back(shifted(t, o.tasks));
      out.issue_order.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace metron::lowering::detail
