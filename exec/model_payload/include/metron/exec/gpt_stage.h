#pragma once
// The model payload's math (issue 21): a GPT-style model, cut into pipeline stages, that trains
// for real on libtorch CPU tensors in fp32. One GptStage holds a contiguous run of the model's
// layers (with the embedding on the first stage, the final norm, LM head and loss on the last)
// and runs the compute tasks of a schedule on it: F, B, and B split into I and W. libtorch stays
// behind a pimpl, as in torch_compute.h: clang cannot parse libtorch 1.13's headers in C++20, so
// no torch header may reach a file that includes this one.
//
// Note [gpt stage]:
//   - The model: learned token and position embeddings; per layer pre-norm causal self-
//     attention (qkv, softmax(q·kᵀ/√d + causal mask)·v, output projection, residual) and a GeLU
//     MLP (fc1 to ffn_hidden, fc2 back, residual), each with its LayerNorm; a final LayerNorm; an
//     untied LM head without bias; mean cross-entropy over the microbatch's tokens. No dropout:
//     the check compares runs, and dropout's random masks would have to be drawn identically by
//     every configuration for nothing that the check is about.
//   - Parameters are initialised from the config's seed and each parameter's name alone
//     (normal(0, 0.02) for linear and embedding weights, ones for norm weights, zeros for
//     biases), so every split of the same model starts from the same values. They live in one
//     flat fp32 buffer per stage, and so do their gradients, in the names and order of
//     models::parameter_tensors (Megatron's registration order), which the sync policies bucket
//     and shard: a bucket of the step's graph is a range of these buffers.
//   - Tied embeddings: the LM head multiplies by the word embeddings. A stage holding both ends
//     uses one tensor for both, so its gradient is the sum of both uses; a last stage without
//     the embedding holds its own copy as "output.weight", initialised from the word
//     embeddings' seed (Megatron initialises the copy from the first stage's by an all-reduce),
//     and stays equal to it only if the step sums the two copies' gradients (Note [embedding
//     gradients] in sync/embedding_grads.h).
//   - Weight gradients are deferred as PyTorch's pipelining and Megatron's zero-bubble code
//     defer them: every op that owns parameters (linear layers, the norms' affine, the
//     embeddings) is an autograd function of its own whose backward computes only the gradient
//     of its input and keeps its input and output gradient for the microbatch; W computes the
//     parameter gradients from those. I is one autograd pass from the stage's output to its
//     input, so nothing runs twice. B is I then W. Backward::kAutograd instead runs the plain
//     libtorch ops with autograd owning every gradient: the reference the split is checked
//     against.
//   - After F, the output's data is freed and its autograd node kept (Megatron's
//     deallocate_output_tensor): the stage sent a copy, and I feeds the received gradient to
//     the node directly (the engine's own entry point, as Megatron's custom_backward does,
//     since the freed tensor no longer has the gradient's shape).
//   - The loss of a microbatch is its mean token cross-entropy; the last stage's I takes the
//     factor its loss enters the step's loss with (1 / microbatches for a mean over them).
//   - Sizes are capped (kMaxParameters, kMaxTokens, kMaxTensorElements) and refused with
//     InvalidConfig before any allocation; wrong input lengths and unknown or repeated
//     microbatches too.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace metron::exec {

/// The slot names of the word embeddings and of a last stage's copy of them as its head under
/// tied embeddings (Note [gpt stage]).
inline constexpr std::string_view kWordEmbeddings = "embedding.word";
inline constexpr std::string_view kTiedHeadCopy = "output.weight";

/// The model every stage is cut from.
struct GptConfig {
  std::int64_t vocab = 64;
  std::int64_t hidden = 32;
  std::int64_t heads = 4;
  std::int64_t layers = 4;
  std::int64_t ffn_hidden = 0;  ///< 0: 4 · hidden
  std::int64_t seq_len = 16;
  std::int64_t microbatch_size = 2;  ///< samples per microbatch
  std::uint64_t seed = 1234;         ///< parameters and synthetic data
  /// The LM head reuses the word embeddings (Note [gpt stage]).
  bool tied_embeddings = false;
};

/// Throws InvalidConfig naming the field when `config` is not a model this payload builds.
void validate(const GptConfig& config);

/// The stage's share of the model: layers [first_layer, first_layer + layers), with the
/// embedding on the first stage and the final norm, LM head and loss on the last.
struct StageSlice {
  std::int64_t first_layer = 0;
  std::int64_t layers = 0;
  bool first = true;  ///< holds the embedding; takes tokens
  bool last = true;   ///< holds the head and the loss; takes labels
};

/// One parameter in the stage's flat buffers.
struct ParameterSlot {
  std::string name;  ///< models::parameter_tensors' names: "layers.3.mlp.fc1.weight", ...
  std::vector<std::int64_t> shape;
  std::int64_t offset = 0;  ///< elements into flat_parameters() / flat_gradients()
  std::int64_t numel = 0;
};

/// A synthetic sample: seq_len + 1 tokens drawn from (seed, sample) alone, so that every
/// configuration trains on the same data. Tokens are sample[0, seq), labels sample[1, seq].
std::vector<std::int64_t> synthetic_sample(const GptConfig& config, std::int64_t sample);

/// The tokens and labels of `microbatch_size` consecutive samples starting at `first_sample`.
struct MicrobatchData {
  std::vector<std::int64_t> tokens;  ///< microbatch_size × seq_len
  std::vector<std::int64_t> labels;  ///< microbatch_size × seq_len
};
MicrobatchData synthetic_microbatch(const GptConfig& config, std::int64_t first_sample);

/// What one F consumes: tokens on the first stage, the previous stage's output elsewhere
/// (microbatch_size × seq_len × hidden floats); labels on the last stage.
struct StageInput {
  std::span<const std::int64_t> tokens;
  std::span<const float> activation;
  std::span<const std::int64_t> labels;
};

/// A stage of the model (Note [gpt stage]). Not thread-safe: one stream runs it.
class GptStage {
 public:
  enum class Backward {
    kSplit,     ///< I and W apart (parameter-owning ops are functions of their own)
    kAutograd,  ///< plain libtorch ops, autograd computes every gradient: the reference
  };
  /// The most parameters and tokens per microbatch a stage is built for.
  static constexpr std::int64_t kMaxParameters = std::int64_t{1} << 28;
  static constexpr std::int64_t kMaxTokens = std::int64_t{1} << 20;
  /// The most elements of one tensor a microbatch makes (8 GiB of fp32, TorchCompute's limit).
  static constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 31;

  /// Throws InvalidConfig for a bad config or a slice outside the model's layers.
  GptStage(const GptConfig& config, const StageSlice& slice, Backward backward = Backward::kSplit);
  ~GptStage();
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;
  GptStage(GptStage&&) noexcept;
  GptStage& operator=(GptStage&&) noexcept;

  /// F of `microbatch`: the output to send (microbatch_size × seq_len × hidden floats), or on
  /// the last stage the microbatch's loss (one float). Keeps what the backward needs.
  std::vector<float> forward(std::int64_t microbatch, const StageInput& input);
  /// I of `microbatch`: the gradient of the stage's input (empty on the first stage) from the
  /// gradient of its output (on the last stage, one float: the loss's factor in the step).
  /// Under Backward::kAutograd the parameter gradients accumulate here too and W does nothing.
  std::vector<float> backward_input(std::int64_t microbatch, std::span<const float> output_grad);
  /// W of `microbatch`: adds its parameter gradients to flat_gradients().
  void backward_weight(std::int64_t microbatch);
  /// B: I then W.
  std::vector<float> backward(std::int64_t microbatch, std::span<const float> output_grad);

  [[nodiscard]] const std::vector<ParameterSlot>& parameter_layout() const;
  /// The parameters and their gradients, flat, in parameter_layout()'s order.
  std::span<float> flat_parameters();
  std::span<float> flat_gradients();
  void zero_gradients();
  /// Microbatches whose F ran and whose I or W has not.
  [[nodiscard]] std::int64_t microbatches_in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace metron::exec
