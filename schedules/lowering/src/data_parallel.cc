// Note [data-parallel replicas] (data_parallel.h).

#include "metron/lowering/data_parallel.h"

#include <string>
#include <variant>

#include "graph_copies.h"
#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"

namespace metron::lowering {
namespace {

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
  const detail::CopyPlan plan{
      .copies = replicas,
      .set_coords = [](ir::RankCoords& c, std::int32_t k) { c.dp = k; },
      .name = [](const ir::Group& g,
                 std::int32_t k) { return g.name + ".dp" + std::to_string(k); }};
  return ir::GraphBuilder(detail::side_by_side(pipeline.data(), plan)).build();
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
