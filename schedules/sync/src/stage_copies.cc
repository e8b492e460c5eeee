// Note [stage copies] (stage_copies.h).

#include "metron/sync/stage_copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
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
  detail::SyncContext ctx(builder, input, detail::SyncContext::ComputeIndex::kSkip);
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
  for (std::int32_t g = 0; g < ctx.num_ranks(); ++g) {
    const ir::RankId rank{g};
    const std::int32_t r = ctx.pipeline_rank(rank);
    const std::int32_t low = std::min(r, pp - 1 - r);
    const std::int32_t replica = g / pp;
    ctx.collective_before_step(
        rank,
        {.kind = lowering::GroupKind::kStageCopies,
         .op = ir::CollectiveOp::kAllReduce,
         .bytes = gradient_bytes(input, r),
         .dtype = detail::SyncContext::dtype_of(input.grad_bytes),
         .label = fmt::format("AR gradients of the copies of stages {} and {}", low, pp - 1 - low),
         .pipeline_members = {low, pp - 1 - low},
         .group_index = replica * (pp / 2) + low},
        kWhere);
  }
  ctx.finish();
}

}  // namespace metron::sync
