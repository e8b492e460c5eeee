#pragma once
// A training step built by hand with GraphBuilder, no schedule generator involved: Megatron's
// non-interleaved 1F1B over `pp` stages and `microbatches` microbatches, `dp` identical pipeline
// replicas, p2p on their own send and receive streams, one gradient all-reduce bucket per stage
// over its data-parallel group after the stage's last backward, then the optimizer step.
// Used by the IR tests (against hand-written expectations), by examples/ and by bench/.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "metron/ir/graph_builder.h"
#include "metron/ir/rows_graph.h"

namespace metron::testing {

struct OneFOneBStep {
  std::int32_t pp = 2;
  std::int32_t dp = 2;
  std::int32_t microbatches = 4;
  /// On rank 0, post the receive of microbatch 1's gradient before microbatch 0's: a deadlock.
  bool swap_first_gradient_receives = false;
  std::int64_t activation_bytes =
      std::int64_t{2} * 1024 * 1024;  ///< microbatch 1 x seq 1024 x hidden 1024, bf16
  std::int64_t bucket_bytes = std::int64_t{96} * 1024 * 1024;  ///< a stage's gradients
  double forward_flops = 5.15e10;
};

/// Megatron 1F1B compute order of one stage: +mb is F(mb), -(mb+1) is B(mb).
inline std::vector<std::int32_t> one_f_one_b_order(std::int32_t pp, std::int32_t stage,
                                                   std::int32_t m) {
  const std::int32_t warmup = std::min(pp - stage - 1, m);
  std::vector<std::int32_t> order;
  for (std::int32_t i = 0; i < warmup; ++i) order.push_back(i);
  for (std::int32_t i = 0; i < m - warmup; ++i) {
    order.push_back(warmup + i);
    order.push_back(-(i + 1));
  }
  for (std::int32_t i = m - warmup; i < m; ++i) order.push_back(-(i + 1));
  return order;
}

inline ir::Graph build_one_f_one_b_step(const OneFOneBStep& cfg) {
  using namespace ir;
  GraphBuilder b;
  const std::int32_t ranks = cfg.pp * cfg.dp;
  for (std::int32_t r = 0; r < ranks; ++r) {
    const RankId rank = b.add_rank(Rank{.coords = {.pp = r % cfg.pp, .dp = r / cfg.pp}});
    for (const char* name : {"compute", "pp-send", "pp-recv", "dp-grad"}) b.add_stream(rank, name);
  }
  std::vector<GroupId> dp_groups;
  for (std::int32_t s = 0; s < cfg.pp; ++s) {
    std::vector<RankId> members;
    for (std::int32_t d = 0; d < cfg.dp; ++d) members.push_back(RankId{d * cfg.pp + s});
    dp_groups.push_back(b.add_group("dp" + std::to_string(s), members));
  }
  for (std::int32_t r = 0; r < ranks; ++r) {
    const RankId rank{r};
    const std::int32_t s = r % cfg.pp;
    const StreamId compute = b.stream(rank, "compute");
    const StreamId out = b.stream(rank, "pp-send");
    const StreamId in = b.stream(rank, "pp-recv");
    const LayerRange layers{2 * s, 2 * s + 2};
    std::vector<BufferId> activations;
    std::vector<TaskId> gradient_recvs(static_cast<std::size_t>(cfg.microbatches));
    TaskId last_backward;
    const auto tagged = [&](Task t, std::int32_t mb) {
      t.stage = StageId{s};
      t.microbatch = MicrobatchId{mb};
      return t;
    };
    const auto receive_gradient = [&](std::int32_t mb) {
      gradient_recvs[static_cast<std::size_t>(mb)] =
          b.add(tagged({.rank = rank,
                        .stream = in,
                        .op = Recv{.peer = RankId{r + 1},
                                   .bytes = cfg.activation_bytes,
                                   .tag = ir::p2p_tag(s + 1, mb, ir::P2PKind::kGradient),
                                   .what = P2PKind::kGradient}},
                       mb));
    };
    for (std::int32_t step : one_f_one_b_order(cfg.pp, s, cfg.microbatches)) {
      const bool forward = step >= 0;
      const std::int32_t mb = forward ? step : -step - 1;
      if (forward) {
        TaskId input;
        if (s > 0) {
          input =
              b.add(tagged({.rank = rank,
                            .stream = in,
                            .op = Recv{.peer = RankId{r - 1},
                                       .bytes = cfg.activation_bytes,
                                       .tag = ir::p2p_tag(s - 1, mb, ir::P2PKind::kActivation)}},
                           mb));
        }
        activations.push_back(
            b.add_buffer(rank, cfg.activation_bytes,
                         "activation s" + std::to_string(s) + " mb" + std::to_string(mb)));
        Task f = tagged({.rank = rank,
                         .stream = compute,
                         .layers = layers,
                         .allocates = {activations.back()},
                         .op = Compute{.phase = Phase::kForward,
                                       .flops = cfg.forward_flops,
                                       .shapes = {{1, 1024, 1024}}}},
                        mb);
        if (input.valid()) f.deps.push_back(input);
        const TaskId fid = b.add(f);
        if (s + 1 < cfg.pp) {
          b.add(tagged({.rank = rank,
                        .stream = out,
                        .deps = {fid},
                        .op = Send{.peer = RankId{r + 1},
                                   .bytes = cfg.activation_bytes,
                                   .tag = ir::p2p_tag(s, mb, ir::P2PKind::kActivation)}},
                       mb));
        }
        continue;
      }
      if (s + 1 < cfg.pp) {
        const bool swap = cfg.swap_first_gradient_receives && r == 0 && cfg.microbatches > 1;
        if (swap && mb == 0) receive_gradient(1);
        if (!(swap && mb == 1)) receive_gradient(mb);
      }
      Task bwd = tagged({.rank = rank,
                         .stream = compute,
                         .layers = layers,
                         .uses = {activations[static_cast<std::size_t>(mb)]},
                         .op = Compute{.phase = Phase::kBackward,
                                       .flops = 2 * cfg.forward_flops,
                                       .shapes = {{1, 1024, 1024}}}},
                        mb);
      if (s + 1 < cfg.pp) bwd.deps.push_back(gradient_recvs[static_cast<std::size_t>(mb)]);
      last_backward = b.add(bwd);
      if (s > 0) {
        b.add(tagged({.rank = rank,
                      .stream = out,
                      .deps = {last_backward},
                      .op = Send{.peer = RankId{r - 1},
                                 .bytes = cfg.activation_bytes,
                                 .tag = ir::p2p_tag(s, mb, ir::P2PKind::kGradient),
                                 .what = P2PKind::kGradient}},
                     mb));
      }
    }
    const TaskId reduce = b.add({.rank = rank,
                                 .stream = b.stream(rank, "dp-grad"),
                                 .stage = StageId{s},
                                 .bucket = BucketId{0},
                                 .deps = {last_backward},
                                 .op = Collective{.op = CollectiveOp::kAllReduce,
                                                  .group = dp_groups[static_cast<std::size_t>(s)],
                                                  .bytes = cfg.bucket_bytes,
                                                  .seq = 0}});
    b.add({.rank = rank,
           .stream = compute,
           .stage = StageId{s},
           .deps = {reduce},
           .op = Compute{.phase = Phase::kOptimizer}});
  }
  return std::move(b).build();
}

}  // namespace metron::testing
