// Note [embedding gradients] (embedding_grads.h).

#include "metron/sync/embedding_grads.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "sync_context.h"

namespace metron::sync {
namespace {

constexpr const char* kWhere = "the tied embeddings' gradient sum: ";

/// A pipeline rank's copy of the tied word embeddings.
struct Copy {
  std::int32_t pipeline_rank = 0;
  std::int64_t numel = 0;
  std::string name;
};

/// The two copies, in pipeline-rank order; throws unless there are exactly two on two ranks.
std::vector<Copy> copies_of(const SyncInput& input) {
  std::vector<Copy> out;
  for (std::size_t r = 0; r < input.params.size(); ++r) {
    for (const ChunkParams& chunk : input.params[r]) {
      for (const ParamTensor& t : chunk.tensors) {
        if (!t.shared_embedding) continue;
        if (!out.empty() && out.back().pipeline_rank == static_cast<std::int32_t>(r)) {
          throw InvalidConfig(fmt::format(
              "{}pipeline rank {} holds both copies ({} and {}); the sum is added where two "
              "ranks hold one each (the first and the last model stage on different ranks)",
              kWhere, r, out.back().name, t.name));
        }
        out.push_back(
            {.pipeline_rank = static_cast<std::int32_t>(r), .numel = t.numel, .name = t.name});
      }
    }
  }
  if (out.size() != 2) {
    throw InvalidConfig(fmt::format(
        "{}{} tensors are marked shared_embedding; expected 2 (the word embeddings on the first "
        "model stage and their copy as the last stage's output layer)",
        kWhere, out.size()));
  }
  if (out[0].numel != out[1].numel) {
    throw InvalidConfig(fmt::format(
        "{}{} on pipeline rank {} has {} elements, {} on rank {} has {}", kWhere, out[0].name,
        out[0].pipeline_rank, out[0].numel, out[1].name, out[1].pipeline_rank, out[1].numel));
  }
  return out;
}

}  // namespace

void add_embedding_grad_sum(ir::GraphBuilder& builder, const SyncInput& input) {
  const std::vector<Copy> copies = copies_of(input);
  detail::SyncContext ctx(builder, input, detail::SyncContext::ComputeIndex::kSkip);
  const std::int32_t first = copies[0].pipeline_rank;
  const std::int32_t last = copies[1].pipeline_rank;
  for (std::int32_t g = 0; g < ctx.num_ranks(); ++g) {
    const ir::RankId rank{g};
    const std::int32_t r = ctx.pipeline_rank(rank);
    if (r != first && r != last) continue;
    ctx.collective_before_step(rank,
                               {.kind = lowering::GroupKind::kEmbedding,
                                .op = ir::CollectiveOp::kAllReduce,
                                .bytes = copies[0].numel * input.grad_bytes,
                                .dtype = detail::SyncContext::dtype_of(input.grad_bytes),
                                .label = "AR gradients of the tied word embeddings",
                                .pipeline_members = {first, last},
                                .group_index = g / input.pipeline_ranks},
                               kWhere);
  }
  ctx.finish();
}

}  // namespace metron::sync
