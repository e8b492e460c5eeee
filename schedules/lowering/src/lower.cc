// lower: the whole chain of lowering passes (lowering.h), in the order the header lists them.

#include <algorithm>
#include <utility>

#include "lowering_rows.h"
#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/ir/rows_graph.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

pipeline::Order add_p2p(const pipeline::Order& order, P2PMode mode) {
  switch (mode) {
    case P2PMode::kAsync:
      return add_p2p_async(order);
    case P2PMode::kBatched:
      return add_p2p_batched(order);
    case P2PMode::kNone:
      break;
  }
  return order;
}

std::int32_t num_stages(const pipeline::Order& order) {
  std::int32_t stages = 0;
  for (const auto& row : order.rows) {
    for (const auto& slot : row) {
      if (!slot) continue;
      detail::for_each_compute(
          *slot, [&](const ir::Action& c) { stages = std::max(stages, c.stage + 1); });
    }
  }
  return stages;
}

}  // namespace

ir::GraphBuilder lower_unvalidated(const pipeline::Order& order, const LoweringOptions& options) {
  // Each row pass makes a new order; `order` itself is copied only when no pass rewrites it.
  pipeline::Order rows = options.split_backward ? add_p2p(split_backward(order), options.p2p)
                                                : add_p2p(order, options.p2p);
  if (options.optimizer_step) rows = add_optimizer_step(std::move(rows));
  if (options.p2p_bytes < 0) {
    throw InvalidConfig("lower: p2p_bytes is " + std::to_string(options.p2p_bytes) +
                        "; expected >= 0");
  }
  // An order is one pipeline: rank r is pipeline rank r.
  ir::GraphBuilder b = ir::rows_to_builder(rows, {.hardware_queues = options.hardware_queues,
                                                  .p2p_bytes = options.p2p_bytes,
                                                  .pipeline_coords = true});
  // The passes that need a whole graph's indexes validate on the way (a rarely used option).
  if (options.encoder_decoder_split) {
    b = ir::GraphBuilder(add_encoder_output_transfers(
        std::move(b).build(), *options.encoder_decoder_split, options.encoder_output_bytes));
  }
  if (options.memory_effects) add_memory_effects(b, options);
  if (options.layers.any()) assign_layers(b, assign_layers(options.layers, num_stages(order)));
  return b;
}

ir::Graph lower(const pipeline::Order& order, const LoweringOptions& options) {
  return lower_unvalidated(order, options).build();
}

}  // namespace metron::lowering
