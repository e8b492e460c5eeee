#pragma once
// A small lowered pipeline step with hand-countable parameters, for the sync-policy tests, and a
// listing of what a rank issues, and the checks of a sum issued before the step. Every layer holds
// the tensors "layers.<l>.a" and "layers.<l>.b" (registration order a, b) of the sizes given; stage
// 0 also holds "embedding" (outside the layers, registered first) and the last stage "head"
// (registered last) when their sizes are non-zero.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/data_parallel.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/placement.h"
#include "metron/pipeline/registry.h"
#include "metron/sync/sync_policy.h"

namespace metron::sync::testing {

struct SyncStepSpec {
  std::string schedule = "1f1b";
  std::int32_t pp = 1;
  std::int32_t vp = 1;
  std::int32_t microbatches = 2;
  std::int32_t layers = 4;  ///< in all; split evenly over pp·vp stages
  std::int64_t a_numel = 100;
  std::int64_t b_numel = 10;
  std::int64_t embedding_numel = 0;
  std::int64_t head_numel = 0;
  bool tied = false;  ///< embedding and head are copies of tied word embeddings (shared_embedding)
  std::int32_t data_parallel = 2;  ///< the real dp group (shards, owners)
  std::int32_t replicas = 1;       ///< replicas in the graph (1: symmetric; dp: full)
  bool split_backward = false;
  lowering::P2PMode p2p = lowering::P2PMode::kAsync;
  std::int32_t hardware_queues = 8;
  std::int64_t param_bytes = 2;
  std::int64_t grad_bytes = 2;
};

struct SyncStep {
  ir::GraphBuilder builder;
  SyncInput input;
};

inline SyncStep make_sync_step(const SyncStepSpec& s) {
  const std::int32_t stages = s.pp * s.vp;
  pipeline::Order order = pipeline::generate_order(
      {.name = s.schedule, .pp = s.pp, .vp = s.vp, .microbatches = s.microbatches});
  ir::GraphBuilder builder =
      lowering::lower_unvalidated(order, {.p2p = s.p2p,
                                          .hardware_queues = s.hardware_queues,
                                          .split_backward = s.split_backward,
                                          .memory_effects = false,
                                          .layers = {.layers = s.layers}});
  if (s.replicas > 1) {
    builder =
        ir::GraphBuilder(lowering::replicate_data_parallel(std::move(builder).build(), s.replicas));
  }
  SyncInput input{.pipeline_ranks = s.pp,
                  .data_parallel = s.data_parallel,
                  .expert_data_parallel = s.data_parallel,
                  .param_bytes = s.param_bytes,
                  .grad_bytes = s.grad_bytes,
                  .interleaved = s.schedule == "interleaved-1f1b"};
  input.params.resize(static_cast<std::size_t>(s.pp));
  const std::int32_t per_stage = s.layers / stages;
  const std::vector<std::int32_t> ranks =
      pipeline::stage_ranks(pipeline::find_schedule(s.schedule).placement, s.pp, stages);
  for (std::int32_t stage = 0; stage < stages; ++stage) {
    const std::int32_t rank = ranks[static_cast<std::size_t>(stage)];
    ChunkParams chunk{.stage = stage};
    const std::int32_t first = stage * per_stage;
    const std::int32_t last = first + per_stage;
    if (stage == 0 && s.embedding_numel > 0) {
      chunk.tensors.push_back({.name = "embedding",
                               .layer = first,
                               .numel = s.embedding_numel,
                               .shared_embedding = s.tied,
                               .outside_layers = true});
    }
    for (std::int32_t l = first; l < last; ++l) {
      const std::string prefix = "layers." + std::to_string(l) + ".";
      chunk.tensors.push_back({.name = prefix + "a", .layer = l, .numel = s.a_numel});
      chunk.tensors.push_back({.name = prefix + "b", .layer = l, .numel = s.b_numel});
    }
    if (stage == stages - 1 && s.head_numel > 0) {
      chunk.tensors.push_back({.name = "head",
                               .layer = last - 1,
                               .numel = s.head_numel,
                               .shared_embedding = s.tied,
                               .outside_layers = true});
    }
    input.params[static_cast<std::size_t>(rank)].push_back(std::move(chunk));
  }
  return {std::move(builder), std::move(input)};
}

/// One collective as a person checks it: "RS dp0 400 b1 mb1" plus its label.
struct IssuedCollective {
  ir::CollectiveOp op;
  std::string group;
  std::int64_t bytes;
  std::int32_t bucket;      ///< -1 when untagged
  std::int32_t microbatch;  ///< -1 when untagged
  std::string label;
  ir::TaskId id;
};

/// `rank`'s collectives in its host issue order.
inline std::vector<IssuedCollective> issued_collectives(const ir::Graph& g, ir::RankId rank) {
  std::vector<IssuedCollective> out;
  for (ir::TaskId t : g.issue_order(rank)) {
    const ir::Task& task = g.task(t);
    const auto* c = std::get_if<ir::Collective>(&task.op);
    if (c == nullptr) continue;
    out.push_back({c->op, g.group(c->group).name, c->bytes, task.bucket.value(),
                   task.microbatch.value(), task.label, t});
  }
  return out;
}

/// The step of `spec` with `options`' sync policy, built (so validated).
inline ir::Graph lower_with(const SyncStepSpec& spec, const SyncOptions& options) {
  SyncStep step = make_sync_step(spec);
  add_sync_policy(step.builder, step.input, options);
  return std::move(step.builder).build();
}

inline std::vector<IssuedCollective> of_op(const std::vector<IssuedCollective>& all,
                                           ir::CollectiveOp op) {
  std::vector<IssuedCollective> out;
  for (const IssuedCollective& c : all) {
    if (c.op == op) out.push_back(c);
  }
  return out;
}

inline std::vector<std::int64_t> bytes_of(const std::vector<IssuedCollective>& all) {
  std::vector<std::int64_t> out;
  for (const IssuedCollective& c : all) out.push_back(c.bytes);
  return out;
}

inline std::vector<std::int32_t> buckets_of(const std::vector<IssuedCollective>& all) {
  std::vector<std::int32_t> out;
  for (const IssuedCollective& c : all) out.push_back(c.bucket);
  return out;
}

inline const ir::Collective& collective(const ir::Graph& g, ir::TaskId t) {
  return std::get<ir::Collective>(g.task(t).op);
}

/// `rank`'s compute tasks of `phase` for microbatch `mb` (and `chunk`, unless -1), in issue order.
inline std::vector<ir::TaskId> compute_tasks(const ir::Graph& g, ir::RankId rank, ir::Phase phase,
                                             std::int32_t mb, std::int32_t chunk = -1) {
  std::vector<ir::TaskId> out;
  for (ir::TaskId t : g.issue_order(rank)) {
    const ir::Task& task = g.task(t);
    const auto* c = std::get_if<ir::Compute>(&task.op);
    if (c != nullptr && c->phase == phase && task.microbatch.value() == mb &&
        (chunk < 0 || task.chunk.value() == chunk)) {
      out.push_back(t);
    }
  }
  return out;
}

inline std::vector<ir::LayerRange> layers_of(const ir::Graph& g,
                                             const std::vector<ir::TaskId>& tasks) {
  std::vector<ir::LayerRange> out;
  for (ir::TaskId t : tasks) out.push_back(g.task(t).layers);
  return out;
}

/// `rank`'s (first) optimizer step, or an invalid id.
inline ir::TaskId optimizer_step(const ir::Graph& g, ir::RankId rank) {
  for (ir::TaskId t : g.issue_order(rank)) {
    const auto* c = std::get_if<ir::Compute>(&g.task(t).op);
    if (c != nullptr && c->phase == ir::Phase::kOptimizer) return t;
  }
  return {};
}

/// Whether every compute task of `rank` but its optimizer step completes before `task` starts:
/// reachable backwards from it through dependencies and stream order (a stream runs its tasks
/// in issue order).
inline bool waits_for_all_compute(const ir::Graph& g, ir::RankId rank, ir::TaskId task) {
  std::map<std::int32_t, ir::TaskId> previous;            // by stream: the task issued last so far
  std::map<std::int32_t, ir::TaskId> stream_predecessor;  // by task
  for (ir::TaskId t : g.issue_order(rank)) {
    const ir::Task& x = g.task(t);
    if (!x.stream.valid()) continue;
    const auto found = previous.find(x.stream.value());
    if (found != previous.end()) stream_predecessor[t.value()] = found->second;
    previous[x.stream.value()] = t;
  }
  std::set<std::int32_t> seen;
  std::vector<ir::TaskId> todo{task};
  while (!todo.empty()) {
    const ir::TaskId t = todo.back();
    todo.pop_back();
    std::vector<ir::TaskId> before = g.task(t).deps;
    if (stream_predecessor.contains(t.value())) before.push_back(stream_predecessor[t.value()]);
    for (ir::TaskId b : before) {
      if (seen.insert(b.value()).second) todo.push_back(b);
    }
  }
  for (ir::TaskId t : g.issue_order(rank)) {
    const auto* c = std::get_if<ir::Compute>(&g.task(t).op);
    if (c != nullptr && c->phase != ir::Phase::kOptimizer && !seen.contains(t.value())) {
      return false;
    }
  }
  return true;
}

/// The tasks of `rank` issued between `from` (exclusive) and `to` (exclusive).
inline std::int64_t issued_between(const ir::Graph& g, ir::TaskId from, ir::TaskId to) {
  return g.issue_position(to) - g.issue_position(from) - 1;
}

/// Every rank's optimizer-step dependencies in `builder`'s graph as it stands.
inline std::vector<std::vector<ir::TaskId>> step_deps_of(const ir::GraphBuilder& builder) {
  const ir::Graph g = ir::GraphBuilder(builder).build();
  std::vector<std::vector<ir::TaskId>> out;
  for (std::int32_t r = 0; r < g.num_ranks(); ++r) {
    out.push_back(g.task(optimizer_step(g, ir::RankId{r})).deps);
  }
  return out;
}

/// A collective that sums gradients before the step (SyncContext::collective_before_step): the
/// rank's optimizer step waits for it and is issued right after it, and it waits for what the
/// step waited for before (`step_deps`) and for every compute task of the rank.
inline void expect_just_before_the_step(const ir::Graph& g, ir::RankId rank, ir::TaskId sum,
                                        const std::vector<ir::TaskId>& step_deps) {
  const ir::TaskId opt = optimizer_step(g, rank);
  EXPECT_THAT(g.task(opt).deps, ::testing::Contains(sum));
  EXPECT_EQ(issued_between(g, sum, opt), 0);
  for (ir::TaskId d : step_deps) EXPECT_THAT(g.task(sum).deps, ::testing::Contains(d));
  // On a stream of its own, it must still wait for every backward that makes gradients.
  EXPECT_TRUE(waits_for_all_compute(g, rank, sum));
}

/// `rank`'s one collective on a group whose name starts with `group`: it carries `bytes`, and it
/// waits for, and is issued after, every reduce-scatter of the rank (of which there is one or
/// more).
inline void expect_one_sum_after_the_reduce_scatters(const ir::Graph& g, ir::RankId rank,
                                                     const std::string& group, std::int64_t bytes) {
  std::vector<ir::TaskId> reduce_scatters;
  std::vector<ir::TaskId> sums;
  for (const IssuedCollective& c : issued_collectives(g, rank)) {
    if (c.op == ir::CollectiveOp::kReduceScatter) reduce_scatters.push_back(c.id);
    if (c.group.starts_with(group)) {
      sums.push_back(c.id);
      EXPECT_EQ(c.bytes, bytes);
    }
  }
  ASSERT_EQ(sums.size(), 1U);
  ASSERT_FALSE(reduce_scatters.empty());
  for (ir::TaskId rs : reduce_scatters) {
    EXPECT_THAT(g.task(sums[0]).deps, ::testing::Contains(rs));
    EXPECT_LT(g.issue_position(rs), g.issue_position(sums[0]));
  }
}

}  // namespace metron::sync::testing
