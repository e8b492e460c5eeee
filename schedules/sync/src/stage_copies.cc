// Note [stage copies] (stage_copies.h).

#include "metron/sync/stage_copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "sync_context.h"

namespace metron::sync {
namespace {

constexpr const char* kWhere = "DualPipe's stage copies: ";

/// The gradient bytes of a pipeline rank's stages.
std::int64_t gradient_bytes(const SyncInput& input, std::int32_t pipeline_rank) {
  std::int64_t elements = 0;
  for (const ChunkParams& chunk : input.params[static_cast<std::size_t>(pipeline_rank)]) {
    for (const ParamTensor& t : chunk.tensors) elements += t.numel;
  }
  return elements * input.grad_bytes;
}

}  // namespace

void add_stage_copy_sum(ir::GraphBuilder& builder, const SyncInput& input) {
  detail::SyncContext ctx(builder, input);
  const std::int32_t pp = input.pipeline_ranks;
  if (pp % 2 != 0) {
    throw InvalidConfig(fmt::format(
        "{}{} pipeline ranks cannot pair up; expected an even number (rank r holds the copies of "
        "rank P-1-r's stages)",
        kWhere, pp));
  }
  for (std::int32_t r = 0; r < pp / 2; ++r) {
    const std::int64_t own = gradient_bytes(input, r);
    const std::int64_t mirror = gradient_bytes(input, pp - 1 - r);
    if (own != mirror) {
      throw InvalidConfig(fmt::format(
          "{}pipeline ranks {} and {} should hold copies of the same two stages, but their "
          "gradients take {} and {} bytes",
          kWhere, r, pp - 1 - r, own, mirror));
    }
  }
  const ir::GraphData& data = builder.data();
  for (std::int32_t g = 0; g < ctx.num_ranks(); ++g) {
    const ir::RankId rank{g};
    const std::int32_t r = ctx.pipeline_rank(rank);
    // The rank's optimizer tasks, in issue order: the sum goes before the first, all wait for
    // it. It waits for what they wait for, and for the compute issued before them: a step
    // follows that through its stream's order, which the sum, on a stream of its own, does not
    // share. The last compute task of each stream stands for all before it (streams are FIFOs).
    std::vector<ir::TaskId> steps;
    std::map<std::int32_t, ir::TaskId> last_compute;  // by stream
    for (ir::TaskId t : data.issue_order[rank.index()]) {
      const auto* c = std::get_if<ir::Compute>(&data.tasks[t.index()].op);
      if (c == nullptr) continue;
      if (c->phase == ir::Phase::kOptimizer) {
        steps.push_back(t);
      } else if (steps.empty()) {
        last_compute[data.tasks[t.index()].stream.value()] = t;
      }
    }
    if (steps.empty()) {
      throw InvalidConfig(
          fmt::format("{}rank {} has no optimizer step to sum the gradients for", kWhere, g));
    }
    std::vector<ir::TaskId> deps;
    const auto wait_for = [&](ir::TaskId d) {
      if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
    };
    for (const auto& [stream, t] : last_compute) wait_for(t);
    for (ir::TaskId step : steps) {
      for (ir::TaskId d : data.tasks[step.index()].deps) wait_for(d);
    }
    const ir::TaskId sum = ctx.collective(
        rank, {.kind = lowering::GroupKind::kStageCopies,
               .op = ir::CollectiveOp::kAllReduce,
               .bytes = gradient_bytes(input, r),
               .dtype = detail::SyncContext::dtype_of(input.grad_bytes),
               .label = fmt::format("AR gradients of the copies of stages {} and {}",
                                    std::min(r, pp - 1 - r), std::max(r, pp - 1 - r)),
               .deps = std::move(deps)});
    ctx.issue_before(steps.front(), sum);
    for (ir::TaskId step : steps) builder.precede(sum, step);
  }
  ctx.finish();
}

}  // namespace metron::sync
