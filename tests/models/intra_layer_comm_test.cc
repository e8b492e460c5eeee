#include "metron/models/intra_layer_comm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "metron/base/error.h"
#include "metron/models/comm_cost.h"
#include "metron/models/model_presets.h"
#include "support/tiny_models.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Dim = LayerComm::Dim;
using Comms = std::vector<LayerComm>;

// h 16, 4 heads of 4, `kv_heads` KV heads, sequence 8, bf16.
ModelSpec small_gqa(std::int64_t kv_heads = 2) {
  return {.name = "small-gqa",
          .layers = 2,
          .hidden = 16,
          .heads = 4,
          .kv_heads = kv_heads,
          .vocab = 32,
          .seq_len = 8,
          .mlp = MlpKind::kSwiglu};
}

// tiny_swiglu (h 8, sequence 4) with 4 experts of width 6, top 2.
ModelSpec tiny_moe() {
  ModelSpec model = testing::tiny_swiglu();
  model.name = "tiny-moe";
  model.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 6};
  return model;
}

LayerComm tensor(CommOp op, std::int64_t bytes) {
  return {.op = op, .dim = Dim::kTensor, .bytes = bytes, .per_layer = 2};
}

LayerComm context(CommOp op, std::int64_t bytes) {
  return {.op = op, .dim = Dim::kContext, .bytes = bytes, .per_layer = 1, .overlapped = true};
}

// small_gqa with 4 KV heads (tp 4 needs them), b 2, tp 4: A = 2·8·16·2 B = 512. Without sequence
// parallelism: two all-reduces of A in the forward (g), two in the backward (f), the same two in I,
// none in W.
TEST(LayerComm, TensorParallelWithoutSequenceParallelismByHand) {
  const LayerCommPlan plan = layer_comm(small_gqa(4), {.tp = 4, .microbatch_size = 2});
  const Comms all_reduce{tensor(CommOp::kAllReduce, 512)};
  EXPECT_EQ(plan.forward, all_reduce);
  EXPECT_EQ(plan.backward, all_reduce);
  EXPECT_EQ(plan.backward_input, all_reduce);
  EXPECT_TRUE(plan.backward_weight.empty());
  EXPECT_TRUE(plan.recompute.empty());  // recompute "none"
}

// The same with sequence parallelism: the all-gathers output A and the reduce-scatters take A in.
// B: gradient all-gathers, input re-gathers, reduce-scatters; I the first and last; W the
// re-gathers.
TEST(LayerComm, TensorParallelWithSequenceParallelismByHand) {
  const LayerCommPlan plan =
      layer_comm(small_gqa(4), {.tp = 4, .sequence_parallel = true, .microbatch_size = 2});
  const LayerComm gather = tensor(CommOp::kAllGather, 512);
  const LayerComm scatter = tensor(CommOp::kReduceScatter, 512);
  EXPECT_EQ(plan.forward, (Comms{gather, scatter}));
  EXPECT_EQ(plan.backward, (Comms{gather, gather, scatter}));
  EXPECT_EQ(plan.backward_input, (Comms{gather, scatter}));
  EXPECT_EQ(plan.backward_weight, (Comms{gather}));
}

// tp_comm_overlap at tp 4: each all-gather and reduce-scatter of A = 512 becomes its 3 ring steps
// under the GEMM, 384 bytes overlapped, and the one step no GEMM hides, 128 bytes, blocking;
// in the same places as without the overlap.
TEST(LayerComm, TensorParallelOverlapHidesAllButOneRingStep) {
  const LayerCommPlan plan = layer_comm(
      small_gqa(4),
      {.tp = 4, .sequence_parallel = true, .microbatch_size = 2, .tp_comm_overlap = true});
  LayerComm hidden_gather = tensor(CommOp::kAllGather, 384);
  hidden_gather.overlapped = true;
  LayerComm hidden_scatter = tensor(CommOp::kReduceScatter, 384);
  hidden_scatter.overlapped = true;
  const LayerComm gather_tail = tensor(CommOp::kAllGather, 128);
  const LayerComm scatter_tail = tensor(CommOp::kReduceScatter, 128);
  const Comms gather{hidden_gather, gather_tail};
  const Comms scatter{hidden_scatter, scatter_tail};
  EXPECT_EQ(plan.forward, (Comms{hidden_gather, gather_tail, hidden_scatter, scatter_tail}));
  EXPECT_EQ(plan.backward_weight, gather);
  EXPECT_EQ(plan.backward.size(), 6U);
  // The bytes of every phase are those without the overlap.
  const LayerCommPlan plain =
      layer_comm(small_gqa(4), {.tp = 4, .sequence_parallel = true, .microbatch_size = 2});
  const auto total = [](const Comms& list) {
    std::int64_t bytes = 0;
    for (const LayerComm& c : list) bytes += c.bytes;
    return bytes;
  };
  EXPECT_EQ(total(plan.backward), total(plain.backward));
  EXPECT_EQ(total(plan.backward_input), total(plain.backward_input));
}

// small_gqa, b 2, cp 2: the ring moves the whole sequence's keys and values, 2·2·8·(2 KV heads)·4
// ·2 B = 512, once forward (all-gather) and in the backward again plus dKV (reduce-scatter), all
// overlapped. At tp 2 each rank holds one KV head: 256; and A = 2·(8/2)·16·2 = 256 per all-reduce.
TEST(LayerComm, ContextParallelRingWithGroupedQueryAttentionByHand) {
  const LayerCommPlan cp2 = layer_comm(small_gqa(), {.cp = 2, .microbatch_size = 2});
  EXPECT_EQ(cp2.forward, (Comms{context(CommOp::kAllGather, 512)}));
  const Comms ring_back{context(CommOp::kAllGather, 512), context(CommOp::kReduceScatter, 512)};
  EXPECT_EQ(cp2.backward, ring_back);
  EXPECT_EQ(cp2.backward_input, ring_back);
  EXPECT_TRUE(cp2.backward_weight.empty());

  const LayerCommPlan tp2 = layer_comm(small_gqa(), {.tp = 2, .cp = 2, .microbatch_size = 2});
  EXPECT_EQ(tp2.forward,
            (Comms{tensor(CommOp::kAllReduce, 256), context(CommOp::kAllGather, 256)}));
  EXPECT_EQ(tp2.backward_weight, Comms{});
}

// tiny_moe, b 2, ep 2, top 2: each all-to-all sends 2·4·8·2 tokens' worth ·2 B = 256, two per
// layer (dispatch, combine) in F, B and I; blocking. With tp 2 and sequence parallelism each rank
// dispatches its own half of the sequence: 128, next to the tensor-parallel A = 2·4·8·2 = 128.
TEST(LayerComm, ExpertParallelAllToAllByHand) {
  const LayerComm a2a{.op = CommOp::kAllToAll, .dim = Dim::kExpert, .bytes = 256, .per_layer = 2};
  const LayerCommPlan ep2 = layer_comm(tiny_moe(), {.dp = 2, .ep = 2, .microbatch_size = 2});
  EXPECT_EQ(ep2.forward, Comms{a2a});
  EXPECT_EQ(ep2.backward, Comms{a2a});
  EXPECT_EQ(ep2.backward_input, Comms{a2a});
  EXPECT_TRUE(ep2.backward_weight.empty());

  const LayerCommPlan sp = layer_comm(
      tiny_moe(), {.tp = 2, .dp = 2, .ep = 2, .sequence_parallel = true, .microbatch_size = 2});
  const LayerComm half{.op = CommOp::kAllToAll, .dim = Dim::kExpert, .bytes = 128, .per_layer = 2};
  EXPECT_EQ(sp.forward,
            (Comms{tensor(CommOp::kAllGather, 128), tensor(CommOp::kReduceScatter, 128), half}));
}

TEST(LayerComm, MoeWithoutExpertParallelismHasNoAllToAll) {
  EXPECT_EQ(layer_comm(tiny_moe(), {.microbatch_size = 2}), LayerCommPlan{});
}

TEST(LayerComm, NothingWithoutTensorContextOrExpertParallelism) {
  for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    EXPECT_EQ(layer_comm(model_preset("gpt3-175b"), {.pp = 8, .dp = 64, .recompute = recompute}),
              LayerCommPlan{});
  }
}

// Full recompute replays the forward, collectives included; selective recomputes the attention
// core, which has none but the context-parallel ring.
TEST(LayerComm, RecomputeFollowsTheRecomputeSetting) {
  const ModelSpec model = small_gqa();
  const LayerCommPlan full = layer_comm(
      model, {.tp = 2, .cp = 2, .sequence_parallel = true, .recompute = Recompute::kFull});
  EXPECT_EQ(full.recompute, full.forward);
  EXPECT_EQ(full.recompute.size(), 3U);
  EXPECT_TRUE(layer_comm(model, {.tp = 2, .recompute = Recompute::kSelective}).recompute.empty());
  // b 1, cp 2, tp 1: KV = 2·1·8·2·4·2 = 256.
  EXPECT_EQ(layer_comm(model, {.cp = 2, .recompute = Recompute::kSelective}).recompute,
            (Comms{context(CommOp::kAllGather, 256)}));
}

TEST(LayerComm, PlanOfAPhaseIsItsList) {
  const LayerCommPlan plan =
      layer_comm(small_gqa(), {.tp = 2, .sequence_parallel = true, .recompute = Recompute::kFull});
  EXPECT_EQ(&plan.of(ComputePhase::kForward), &plan.forward);
  EXPECT_EQ(&plan.of(ComputePhase::kBackward), &plan.backward);
  EXPECT_EQ(&plan.of(ComputePhase::kBackwardInput), &plan.backward_input);
  EXPECT_EQ(&plan.of(ComputePhase::kBackwardWeight), &plan.backward_weight);
  EXPECT_EQ(&plan.of(ComputePhase::kRecompute), &plan.recompute);
}

// Shoeybi et al. 2019 (§3): a layer's forward and backward under tensor parallelism take four
// all-reduces of the activation, here GPT-3 175B at b 1: A = 2048·12288·2 B.
TEST(LayerComm, TextbookFourAllReducesPerLayer) {
  const LayerCommPlan plan = layer_comm(model_preset("gpt3-175b"), {.tp = 8});
  std::int64_t all_reduces = 0;
  for (const Comms* list : {&plan.forward, &plan.backward}) {
    for (const LayerComm& c : *list) {
      EXPECT_EQ(c.op, CommOp::kAllReduce);
      EXPECT_EQ(c.bytes, std::int64_t{2048} * 12288 * 2);
      all_reduces += c.per_layer;
    }
  }
  EXPECT_EQ(all_reduces, 4);
}

// Korthikanti et al. 2022 (§4.2.2): sequence parallelism's all-gather + reduce-scatter put as many
// bytes on the wire as the all-reduce they replace, so its forward sends what tp alone sends.
TEST(LayerComm, SequenceParallelForwardSendsWhatTheAllReducesSend) {
  const ModelSpec model = model_preset("gpt3-175b");
  const auto wire = [](const Comms& list, std::int64_t ranks) {
    double sent = 0;
    for (const LayerComm& c : list) sent += c.per_layer * wire_bytes(c.op, c.bytes, ranks);
    return sent;
  };
  const LayerCommPlan tp = layer_comm(model, {.tp = 8});
  const LayerCommPlan sp = layer_comm(model, {.tp = 8, .sequence_parallel = true});
  EXPECT_DOUBLE_EQ(wire(sp.forward, 8), wire(tp.forward, 8));
  // B also re-gathers the inputs: 3 of the 4 collectives' wire of A, twice, against 2 all-reduces.
  EXPECT_DOUBLE_EQ(wire(sp.backward, 8), 1.5 * wire(tp.backward, 8));
}

TEST(LayerComm, RejectsExpertParallelismOnADenseModel) {
  EXPECT_THAT([] { (void)layer_comm(small_gqa(), {.dp = 2, .ep = 2}); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("layer collectives of model \"small-gqa\": ep: expected 1 for a "
                            "dense model, got 2")));
}

TEST(LayerComm, RejectsASequenceNotSplittingOverContextAndTensorRanks) {
  EXPECT_THAT(
      [] { (void)layer_comm(small_gqa(), {.tp = 2, .cp = 8, .sequence_parallel = true}); },
      ThrowsMessage<InvalidConfig>(HasSubstr("seq_len (8) must be divisible by cp·tp (16)")));
}

TEST(LayerComm, DimNames) {
  EXPECT_EQ(to_string(Dim::kTensor), "tensor");
  EXPECT_EQ(to_string(Dim::kContext), "context");
  EXPECT_EQ(to_string(Dim::kExpert), "expert");
}

// --- wire_bytes (comm_cost.h) -----------------------------------------------------------------

// A ring all-reduce sends 2(n−1)/n·S per rank, reduce-scatter and all-gather (n−1)/n·S each, so
// all-reduce = reduce-scatter + all-gather; all-to-all keeps (n−1)/n of S (its own share stays).
TEST(WireBytes, RingFactorsOfNcclTests) {
  constexpr std::int64_t kBytes = 1 << 30;
  for (const std::int64_t n : {2, 3, 8, 64}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto dn = static_cast<double>(n);
    const double all_reduce = wire_bytes(CommOp::kAllReduce, kBytes, n);
    EXPECT_DOUBLE_EQ(all_reduce, 2 * (dn - 1) / dn * kBytes);
    EXPECT_DOUBLE_EQ(wire_bytes(CommOp::kReduceScatter, kBytes, n), (dn - 1) / dn * kBytes);
    EXPECT_DOUBLE_EQ(wire_bytes(CommOp::kAllGather, kBytes, n), (dn - 1) / dn * kBytes);
    EXPECT_DOUBLE_EQ(wire_bytes(CommOp::kAllToAll, kBytes, n), (dn - 1) / dn * kBytes);
    EXPECT_DOUBLE_EQ(all_reduce, wire_bytes(CommOp::kReduceScatter, kBytes, n) +
                                     wire_bytes(CommOp::kAllGather, kBytes, n));
    EXPECT_DOUBLE_EQ(wire_bytes(CommOp::kBroadcast, kBytes, n), kBytes);
    EXPECT_DOUBLE_EQ(wire_bytes(CommOp::kReduce, kBytes, n), kBytes);
  }
}

TEST(WireBytes, OneRankSendsNothing) {
  for (const CommOp op : {CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather,
                          CommOp::kReduce, CommOp::kBroadcast, CommOp::kAllToAll}) {
    EXPECT_EQ(wire_bytes(op, 1 << 20, 1), 0.0) << to_string(op);
  }
}

TEST(WireBytes, RejectsNegativeBytesAndNoRanks) {
  EXPECT_THAT([] { (void)wire_bytes(CommOp::kAllGather, -1, 2); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("wire bytes of all-gather: bytes: expected an integer >= 0, got -1")));
  EXPECT_THAT([] { (void)wire_bytes(CommOp::kAllReduce, 1, 0); },
              ThrowsMessage<InvalidConfig>(HasSubstr("ranks: expected a positive integer, got 0")));
}

}  // namespace
}  // namespace metron::models
