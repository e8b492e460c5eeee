// The tied embeddings' gradient sum (Note [embedding gradients] in sync/embedding_grads.h) on
// make_sync_step's small steps: 1F1B over pp 3 ranks (stage r on rank r), the word embeddings
// (300 elements) on stage 0 and their copy as the head on stage 2, both shared_embedding; so the
// pair is pipeline ranks {0, 2} of each replica, and each carries 300 gradient elements, 600
// bytes in bf16. Rank 1 holds no copy and adds nothing.

#include "metron/sync/embedding_grads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/deadlock.h"
#include "support/sync_step.h"

namespace metron::sync {
namespace {

using ir::CollectiveOp;
using ir::RankId;
using ir::TaskId;
using testing::collective;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::issued_collectives;
using testing::make_sync_step;
using testing::SyncStepSpec;
using ::testing::ThrowsMessage;

SyncStepSpec tied(std::int32_t replicas) {
  return {.pp = 3,
          .microbatches = 4,
          .layers = 3,
          .embedding_numel = 300,
          .head_numel = 300,
          .tied = true,
          .data_parallel = 2,
          .replicas = replicas};
}

TEST(EmbeddingGrads, TheFirstAndLastRankSumTheirCopiesJustBeforeTheStep) {
  for (std::int32_t replicas : {1, 2}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    auto step = make_sync_step(tied(replicas));
    const std::vector<std::vector<TaskId>> step_deps = testing::step_deps_of(step.builder);
    add_embedding_grad_sum(step.builder, step.input);
    const ir::Graph g = std::move(step.builder).build();  // validates: members agree on bytes
    EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
    ASSERT_EQ(g.num_ranks(), 3 * replicas);
    for (std::int32_t rank = 0; rank < g.num_ranks(); ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      const std::int32_t k = rank / 3;  // replica
      const auto all = issued_collectives(g, RankId{rank});
      if (rank % 3 == 1) {
        EXPECT_TRUE(all.empty());
        continue;
      }
      ASSERT_EQ(all.size(), 1U);
      EXPECT_EQ(all[0].op, CollectiveOp::kAllReduce);
      EXPECT_EQ(all[0].group, "embedding" + std::to_string(k));
      EXPECT_EQ(all[0].bytes, 300 * 2);
      EXPECT_THAT(g.group(collective(g, all[0].id).group).ranks,
                  ElementsAre(RankId{3 * k}, RankId{3 * k + 2}));
      testing::expect_just_before_the_step(g, RankId{rank}, all[0].id,
                                           step_deps[static_cast<std::size_t>(rank)]);
    }
  }
}

TEST(EmbeddingGrads, FollowTheDataParallelReductionsAsMegatronsFinalizeDoes) {
  // finalize_model_grads: finish_grad_sync (here the distributed optimizer's reduce-scatters),
  // then the embedding group's all-reduce (the whole copy, 300 elements in the gradient buffer's
  // fp32: 1,200 bytes), then the step.
  auto step = make_sync_step(tied(2));
  step.input.grad_bytes = 4;
  add_sync_policy(step.builder, step.input, {.policy = SyncPolicy::kMegatronDistopt});
  add_embedding_grad_sum(step.builder, step.input);
  const ir::Graph g = std::move(step.builder).build();
  EXPECT_FALSE(ir::find_deadlock(g).deadlocked);
  for (const std::int32_t rank : {0, 2, 3, 5}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    testing::expect_one_sum_after_the_reduce_scatters(g, RankId{rank}, "embedding", 1200);
  }
}

TEST(EmbeddingGrads, RefuseWhatIsNotOnePairOfCopies) {
  const auto refused = [](SyncStepSpec spec, const std::string& why) {
    auto step = make_sync_step(spec);
    EXPECT_THAT([&] { add_embedding_grad_sum(step.builder, step.input); },
                ThrowsMessage<InvalidConfig>(HasSubstr(why)));
  };
  SyncStepSpec untied = tied(1);
  untied.tied = false;
  refused(untied, "0 tensors are marked shared_embedding; expected 2");
  SyncStepSpec uneven = tied(1);
  uneven.head_numel = 200;
  refused(uneven, "embedding on pipeline rank 0 has 300 elements, head on rank 2 has 200");
  // ZB-V puts stage 0 and the last stage (5) on rank 0.
  refused({.schedule = "zb-v",
           .pp = 3,
           .vp = 2,
           .microbatches = 6,
           .layers = 6,
           .embedding_numel = 300,
           .head_numel = 300,
           .tied = true},
          "pipeline rank 0 holds both copies (embedding and head)");
}

}  // namespace
}  // namespace metron::sync
