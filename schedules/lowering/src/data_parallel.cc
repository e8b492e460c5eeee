// Note [data-parallel replicas] (data_parallel.h).

#include "metron/lowering/data_parallel.h"

#include <string>
#include <variant>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"

namespace metron::lowering {
namespace {

/// Shifts every id of a task copied into replica `k` by that replica's offsets.
struct Offsets {
  std::int32_t ranks = 0;
  std::int32_t streams = 0;
  std::int32_t groups = 0;
  std::int32_t buffers = 0;
  std::int32_t tasks = 0;
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
          op.group = shifted(op.group, o.groups);
          op.root = shifted(op.root, o.ranks);
        } else if constexpr (std::is_same_v<Op, ir::HostWait>) {
          op.target = shifted(op.target, o.tasks);
        }
      },
      t.op);
  return t;
}

bool is_backward(const ir::Task& task) {
  const auto* c = std::get_if<ir::Compute>(&task.op);
  return c != nullptr &&
         (c->phase == ir::Phase::kBackward || c->phase == ir::Phase::kBackwardInput ||
          c->phase == ir::Phase::kBackwardWeight || c->overlapped.has_value());
}

bool is_optimizer(const ir::Task& task) {
  const auto* c = std::get_if<ir::Compute>(&task.op);
  return c != nullptr && c->phase == ir::Phase::kOptimizer;
}

}  // namespace

ir::Graph replicate_data_parallel(const ir::Graph& pipeline, std::int32_t replicas) {
  if (replicas < 1) {
    throw InvalidConfig("data-parallel replicas: expected a positive count, got " +
                        std::to_string(replicas));
  }
  if (replicas == 1) return pipeline;
  const ir::GraphData& in = pipeline.data();
  ir::GraphData out;
  for (std::int32_t k = 0; k < replicas; ++k) {
    const Offsets o{.ranks = k * static_cast<std::int32_t>(in.ranks.size()),
                    .streams = k * static_cast<std::int32_t>(in.streams.size()),
                    .groups = k * static_cast<std::int32_t>(in.groups.size()),
                    .buffers = k * static_cast<std::int32_t>(in.buffers.size()),
                    .tasks = k * static_cast<std::int32_t>(in.tasks.size())};
    for (ir::Rank rank : in.ranks) {
      rank.coords.dp = k;
      out.ranks.push_back(rank);
    }
    for (ir::Stream stream : in.streams) {
      stream.rank = shifted(stream.rank, o.ranks);
      out.streams.push_back(std::move(stream));
    }
    for (ir::Group group : in.groups) {
      group.name += ".dp" + std::to_string(k);
      for (ir::RankId& r : group.ranks) r = shifted(r, o.ranks);
      out.groups.push_back(std::move(group));
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
  return ir::GraphBuilder(std::move(out)).build();
}

void add_gradient_all_reduce(ir::GraphBuilder& b, std::int32_t pipeline_ranks,
                             const std::vector<std::int64_t>& grad_bytes, ir::DType dtype) {
  const auto ranks = static_cast<std::int32_t>(b.data().ranks.size());
  if (pipeline_ranks < 1 || ranks % pipeline_ranks != 0) {
    throw InvalidConfig("gradient all-reduce: the graph's " + std::to_string(ranks) +
                        " ranks are not a multiple of " + std::to_string(pipeline_ranks) +
                        " pipeline ranks");
  }
  if (grad_bytes.size() != static_cast<std::size_t>(pipeline_ranks)) {
    throw InvalidConfig("gradient all-reduce: expected " + std::to_string(pipeline_ranks) +
                        " gradient sizes (one per pipeline rank), got " +
                        std::to_string(grad_bytes.size()));
  }
  const std::int32_t replicas = ranks / pipeline_ranks;
  for (std::int32_t r = 0; r < pipeline_ranks; ++r) {
    std::vector<ir::RankId> members;
    for (std::int32_t k = 0; k < replicas; ++k)
      members.push_back(ir::RankId{k * pipeline_ranks + r});
    const ir::GroupId group = b.add_group("dp" + std::to_string(r), members);
    for (ir::RankId rank : members) {
      // A copy: adding tasks below may move the builder's vectors.
      std::vector<ir::TaskId> order = b.data().issue_order[rank.index()];
      ir::TaskId last_backward;
      std::size_t step_position = order.size();
      for (std::size_t i = 0; i < order.size(); ++i) {
        const ir::Task& task = b.data().tasks[order[i].index()];
        if (is_backward(task)) last_backward = order[i];
        if (is_optimizer(task) && step_position == order.size()) step_position = i;
      }
      if (!last_backward.valid()) continue;  // forward only: no gradients
      const ir::StreamId stream = b.add_stream(rank, "dp-grad");
      const ir::TaskId reduce =
          b.add(ir::Task{.rank = rank,
                         .stream = stream,
                         .label = "grad all-reduce",
                         .deps = {last_backward},
                         .op = ir::Collective{.op = ir::CollectiveOp::kAllReduce,
                                              .group = group,
                                              .bytes = grad_bytes[static_cast<std::size_t>(r)],
                                              .dtype = dtype,
                                              .seq = 0}});
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(step_position), reduce);
      if (step_position + 1 < order.size()) b.precede(reduce, order[step_position + 1]);
      b.set_issue_order(rank, std::move(order));
    }
  }
}

ir::Graph add_gradient_all_reduce(const ir::Graph& graph, std::int32_t pipeline_ranks,
                                  const std::vector<std::int64_t>& grad_bytes, ir::DType dtype) {
  ir::GraphBuilder b(graph);
  add_gradient_all_reduce(b, pipeline_ranks, grad_bytes, dtype);
  return std::move(b).build();
}

}  // namespace metron::lowering
