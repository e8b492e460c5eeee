// One layer's tensor-, context- and expert-parallel collectives per phase (Note [layer
// collectives] in intra_layer_comm.h).

#include "metron/models/intra_layer_comm.h"

#include <string>
#include <vector>

#include "spec_checks.h"

namespace metron::models {
namespace {

constexpr detail::EnumNames<LayerComm::Dim, 3> kDimNames{{
    {LayerComm::Dim::kTensor, "tensor"},
    {LayerComm::Dim::kContext, "context"},
    {LayerComm::Dim::kExpert, "expert"},
}};

// Megatron's transformer layer has two tensor-parallel regions (attention and MLP), each entered
// through one f/g pair and, for MoE, two all-to-alls (dispatch, combine).
constexpr std::int32_t kRegionsPerLayer = 2;

void check_spec(const ModelSpec& model, const ParallelSpec& spec) {
  std::vector<std::string> problems;
  detail::check_positive(problems, "tp", spec.tp);
  detail::check_positive(problems, "cp", spec.cp);
  detail::check_positive(problems, "ep", spec.ep);
  detail::check_positive(problems, "microbatch_size", spec.microbatch_size);
  detail::check_positive(problems, "seq_len", spec.sequence_length(model));
  detail::check_divisible(problems, "kv_heads", model.num_kv_heads(), "tp", spec.tp);
  if (spec.sp()) {
    detail::check_divisible(problems, "seq_len", spec.sequence_length(model), "cp·tp",
                            spec.cp * spec.tp);
  } else {
    detail::check_divisible(problems, "seq_len", spec.sequence_length(model), "cp", spec.cp);
  }
  if (spec.ep > 1 && !model.moe) {
    problems.push_back("ep: expected 1 for a dense model, got " + std::to_string(spec.ep));
  }
  detail::throw_if_problems("layer collectives of model \"" + model.name + "\"", problems);
}

// Elements times the dtype's bytes; whole bytes, as every dtype has a whole byte count.
std::int64_t bytes_of(const ModelSpec& model, std::int64_t elements) {
  return static_cast<std::int64_t>(static_cast<double>(elements) * element_bytes(model.dtype));
}

// This rank's tokens: its microbatch over its slice of the sequence.
std::int64_t local_tokens(const ModelSpec& model, const ParallelSpec& spec) {
  return spec.microbatch_size * spec.sequence_length(model) / spec.cp;
}

LayerComm blocking(CommOp op, LayerComm::Dim dim, std::int64_t bytes) {
  return {.op = op, .dim = dim, .bytes = bytes, .per_layer = kRegionsPerLayer};
}

void add_tensor_parallel(const ModelSpec& model, const ParallelSpec& spec, LayerCommPlan& plan) {
  if (spec.tp == 1) return;
  const std::int64_t a = bytes_of(model, local_tokens(model, spec) * model.hidden);
  const LayerComm::Dim dim = LayerComm::Dim::kTensor;
  if (!spec.sp()) {
    const LayerComm all_reduce = blocking(CommOp::kAllReduce, dim, a);
    plan.forward.push_back(all_reduce);
    plan.backward.push_back(all_reduce);
    plan.backward_input.push_back(all_reduce);
    return;
  }
  // One collective as its entries: itself, or under tp_comm_overlap its overlapped ring steps and
  // its one exposed step.
  const auto entries = [&](CommOp op) -> std::vector<LayerComm> {
    const LayerComm whole = blocking(op, dim, a);
    if (!spec.tp_comm_overlap) return {whole};
    LayerComm hidden = whole;
    hidden.bytes = a / spec.tp * (spec.tp - 1);
    hidden.overlapped = true;
    LayerComm exposed = whole;
    exposed.bytes = a - hidden.bytes;
    return {hidden, exposed};
  };
  const std::vector<LayerComm> gather = entries(CommOp::kAllGather);
  const std::vector<LayerComm> scatter = entries(CommOp::kReduceScatter);
  const auto append = [](std::vector<LayerComm>& list, const std::vector<LayerComm>& part) {
    list.insert(list.end(), part.begin(), part.end());
  };
  append(plan.forward, gather);
  append(plan.forward, scatter);
  // Backward: the output gradients' all-gather, the inputs' re-gather (for the weight gradients)
  // and the input gradients' reduce-scatter; I keeps the first and last, W the re-gather.
  append(plan.backward, gather);
  append(plan.backward, gather);
  append(plan.backward, scatter);
  append(plan.backward_input, gather);
  append(plan.backward_input, scatter);
  append(plan.backward_weight, gather);
}

// The full sequence's keys and values on this tensor-parallel rank, as one ring round moves them.
LayerComm context_ring(const ModelSpec& model, const ParallelSpec& spec, CommOp op) {
  const std::int64_t kv_elements = 2 * spec.microbatch_size * spec.sequence_length(model) *
                                   (model.num_kv_heads() / spec.tp) * model.head_dim();
  return {.op = op,
          .dim = LayerComm::Dim::kContext,
          .bytes = bytes_of(model, kv_elements),
          .per_layer = 1,
          .overlapped = true};
}

void add_context_parallel(const ModelSpec& model, const ParallelSpec& spec, LayerCommPlan& plan) {
  if (spec.cp == 1) return;
  const LayerComm kv = context_ring(model, spec, CommOp::kAllGather);
  const LayerComm dkv = context_ring(model, spec, CommOp::kReduceScatter);
  plan.forward.push_back(kv);
  plan.backward.insert(plan.backward.end(), {kv, dkv});
  plan.backward_input.insert(plan.backward_input.end(), {kv, dkv});
}

void add_expert_parallel(const ModelSpec& model, const ParallelSpec& spec, LayerCommPlan& plan) {
  if (spec.ep == 1 || !model.moe) return;
  const std::int64_t tokens = local_tokens(model, spec) / (spec.sp() ? spec.tp : 1);
  const LayerComm all_to_all = blocking(CommOp::kAllToAll, LayerComm::Dim::kExpert,
                                        bytes_of(model, tokens * model.hidden * model.moe->top_k));
  plan.forward.push_back(all_to_all);
  plan.backward.push_back(all_to_all);
  plan.backward_input.push_back(all_to_all);
}

std::vector<LayerComm> recompute_list(const ModelSpec& model, const ParallelSpec& spec,
                                      const LayerCommPlan& plan) {
  switch (spec.recompute) {
    case Recompute::kNone:
      return {};
    case Recompute::kSelective:
      // The attention core has no tensor or expert collectives, but under context parallelism
      // re-running it passes the keys and values round the ring again.
      if (spec.cp == 1) return {};
      return {context_ring(model, spec, CommOp::kAllGather)};
    case Recompute::kFull:
      return plan.forward;
  }
  return {};
}

}  // namespace

std::string_view to_string(LayerComm::Dim dim) noexcept { return detail::name_of(kDimNames, dim); }

const std::vector<LayerComm>& LayerCommPlan::of(ComputePhase phase) const {
  switch (phase) {
    case ComputePhase::kForward:
      return forward;
    case ComputePhase::kBackward:
      return backward;
    case ComputePhase::kBackwardInput:
      return backward_input;
    case ComputePhase::kBackwardWeight:
      return backward_weight;
    case ComputePhase::kRecompute:
      return recompute;
  }
  return forward;
}

LayerCommPlan layer_comm(const ModelSpec& model, const ParallelSpec& spec) {
  validate(model);
  check_spec(model, spec);
  LayerCommPlan plan;
  add_tensor_parallel(model, spec, plan);
  add_context_parallel(model, spec, plan);
  add_expert_parallel(model, spec, plan);
  plan.recompute = recompute_list(model, spec, plan);
  return plan;
}

}  // namespace metron::models
