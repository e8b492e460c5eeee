// A chunk's parameter tensors in registration order (Note [parameter tensors] in
// parameter_tensors.h).

#include "metron/models/parameter_tensors.h"

#include <string>
#include <utility>
#include <vector>

#include "metron/models/parameter_count.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

// Appends tensors that share a layer index and flags, so each block names only its tensors.
class TensorList {
 public:
  TensorList(std::vector<ParameterTensor>& out, std::string prefix, std::int64_t layer,
             bool outside_layers, bool expert = false)
      : out_(out),
        prefix_(std::move(prefix)),
        layer_(static_cast<std::int32_t>(layer)),
        outside_layers_(outside_layers),
        expert_(expert) {}

  void add(const std::string& name, std::int64_t numel, bool shared_embedding = false) {
    out_.push_back({.name = prefix_ + name,
                    .layer = layer_,
                    .numel = numel,
                    .expert = expert_,
                    .shared_embedding = shared_embedding,
                    .outside_layers = outside_layers_});
  }

  // A norm: its scale, and a LayerNorm's bias (not an RMSNorm's).
  void add_norm(const ModelSpec& model, const std::string& name) {
    add(name + ".weight", model.hidden);
    if (has_norm_biases(model)) add(name + ".bias", model.hidden);
  }

  // A linear layer of `in` × `out` features split t ways: a column-parallel one splits its
  // outputs and so its bias; a row-parallel one splits its inputs and adds its bias whole after
  // the reduction (Megatron's Column/RowParallelLinear).
  void add_linear(const ModelSpec& model, const std::string& name, std::int64_t in,
                  std::int64_t out, std::int64_t tp, bool column_parallel) {
    add(name + ".weight", in * out / tp);
    if (has_linear_biases(model)) add(name + ".bias", column_parallel ? out / tp : out);
  }

 private:
  std::vector<ParameterTensor>& out_;
  std::string prefix_;
  std::int32_t layer_;
  bool outside_layers_;
  bool expert_;
};

// An MLP of width `ffn`: fc1 (gate and up fused for "swiglu"), then fc2.
void add_mlp(TensorList& list, const ModelSpec& model, const std::string& name, std::int64_t ffn,
             std::int64_t tp) {
  const std::int64_t up = model.mlp == MlpKind::kSwiglu ? 2 * ffn : ffn;
  list.add_linear(model, name + ".fc1", model.hidden, up, tp, true);
  list.add_linear(model, name + ".fc2", ffn, model.hidden, tp, false);
}

void add_layer(std::vector<ParameterTensor>& out, const ModelSpec& model, const ParallelSpec& spec,
               std::int64_t layer) {
  const std::string prefix = "layers." + std::to_string(layer) + ".";
  TensorList list(out, prefix, layer, false);
  const std::int64_t h = model.hidden;
  list.add_norm(model, "input_norm");
  list.add_linear(model, "attention.qkv", h, qkv_width(model), spec.tp, true);
  list.add_linear(model, "attention.proj", h, h, spec.tp, false);
  list.add_norm(model, "post_attention_norm");
  if (!model.moe) {
    add_mlp(list, model, "mlp", model.ffn_size(), spec.tp);
    return;
  }
  // The router is an ordinary replicated linear layer without a bias; each rank then holds
  // experts/ep experts, each split over tp like a dense MLP. Local expert j is global expert
  // ep_rank·experts/ep + j, which a rank's own list does not need.
  list.add("mlp.router.weight", h * model.moe->experts);
  TensorList experts(out, prefix, layer, false, true);
  for (std::int64_t j = 0; j < model.moe->experts / spec.ep; ++j) {
    add_mlp(experts, model, "mlp.experts." + std::to_string(j), model.moe->ffn_hidden, spec.tp);
  }
}

// The padded vocabulary's shard (ModelSpec::vocab_per_rank).
std::int64_t word_embedding_numel(const ModelSpec& model, const ParallelSpec& spec) {
  return model.vocab_per_rank(spec.tp) * model.hidden;
}

void check_chunk(const ModelSpec& model, const ParallelSpec& spec, std::int64_t first_layer,
                 std::int64_t last_layer) {
  std::vector<std::string> problems;
  detail::check_positive(problems, "tp", spec.tp);
  detail::check_positive(problems, "ep", spec.ep);
  detail::check_divisible(problems, "heads", model.heads, "tp", spec.tp);
  detail::check_divisible(problems, "kv_heads", model.num_kv_heads(), "tp", spec.tp);
  if (model.moe) {
    detail::check_divisible(problems, "moe.ffn_hidden", model.moe->ffn_hidden, "tp", spec.tp);
    detail::check_divisible(problems, "moe.experts", model.moe->experts, "ep", spec.ep);
  } else {
    detail::check_divisible(problems, "ffn_hidden", model.ffn_size(), "tp", spec.tp);
  }
  if (first_layer < 0 || first_layer > last_layer || last_layer > model.layers) {
    problems.push_back("layers: expected 0 <= first_layer <= last_layer <= layers (" +
                       std::to_string(model.layers) + "), got [" + std::to_string(first_layer) +
                       ", " + std::to_string(last_layer) + ")");
  }
  detail::throw_if_problems("parameter tensors of model \"" + model.name + "\"", problems);
}

}  // namespace

std::vector<ParameterTensor> parameter_tensors(const ModelSpec& model, const ParallelSpec& spec,
                                               std::int64_t first_layer, std::int64_t last_layer,
                                               bool embedding, bool head) {
  validate(model);
  check_chunk(model, spec, first_layer, last_layer);
  std::vector<ParameterTensor> out;
  // Tied embeddings are one tensor when the chunk holds both ends, else two copies that Megatron
  // keeps in step by an all-reduce of their gradients (Note [parameter tensors]).
  const bool shared = model.tied_embeddings && !(embedding && head);
  if (embedding) {
    TensorList list(out, "embedding.", first_layer, true);
    list.add("word", word_embedding_numel(model, spec), shared);
    // Learned positions ("gelu" models; Llama's rotary ones have no weights) are replicated.
    if (has_learned_positions(model)) list.add("position", model.seq_len * model.hidden);
  }
  for (std::int64_t layer = first_layer; layer < last_layer; ++layer) {
    add_layer(out, model, spec, layer);
  }
  if (head) {
    TensorList list(out, "", last_layer > first_layer ? last_layer - 1 : first_layer, true);
    list.add_norm(model, "final_norm");
    if (!model.tied_embeddings || shared) {
      list.add("output.weight", word_embedding_numel(model, spec), shared);
    }
  }
  return out;
}

}  // namespace metron::models
