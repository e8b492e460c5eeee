// Note [gpt stage] (gpt_stage.h).

#include "metron/exec/gpt_stage.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"

namespace metron::exec {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kNormEps = 1e-5;
constexpr double kInitStd = 0.02;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

/// A parameter's own seed: the config's seed and its name, nothing about the split.
std::uint64_t parameter_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = splitmix64(seed);
  for (const char c : name) h = splitmix64(h ^ static_cast<unsigned char>(c));
  return h;
}

/// A parameter-owning op's input and output gradient, kept by I for W (Note [gpt stage]).
struct Deferred {
  enum class Kind { kLinear, kAffine, kEmbedding };
  Kind kind = Kind::kLinear;
  std::int64_t weight = -1;  ///< slot in the layout
  std::int64_t bias = -1;    ///< slot, or -1 (embedding: the positions' slot)
  at::Tensor input;          ///< linear: x; affine: the normalised x; embedding: the tokens
  at::Tensor grad;           ///< the gradient of the op's output
};
using DeferredList = std::vector<Deferred>;

// The autograd functions find their microbatch's list through its address, saved with the
// node: the engine may run a backward on any thread, so a thread-local would not do.
std::int64_t address_of(DeferredList& list) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&list));
}
DeferredList& list_at(const AutogradContext* ctx) {
  return *reinterpret_cast<DeferredList*>(
      static_cast<std::intptr_t>(ctx->saved_data.at("deferred").toInt()));
}

/// What every parameter-owning function keeps with its node: its parameters' slots and its
/// microbatch's list.
void remember(AutogradContext* ctx, std::int64_t weight_slot, std::int64_t bias_slot,
              std::int64_t deferred) {
  ctx->saved_data["weight"] = weight_slot;
  ctx->saved_data["bias"] = bias_slot;
  ctx->saved_data["deferred"] = deferred;
}

/// Keeps (input, output gradient) of the op for its microbatch's W.
void defer(const AutogradContext* ctx, Deferred::Kind kind, at::Tensor input, at::Tensor grad) {
  list_at(ctx).push_back({.kind = kind,
                          .weight = ctx->saved_data.at("weight").toInt(),
                          .bias = ctx->saved_data.at("bias").toInt(),
                          .input = std::move(input),
                          .grad = std::move(grad)});
}

/// y = x·Wᵀ + b; backward: dx = dy·W, (x, dy) kept for W.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, std::int64_t weight_slot,
                            std::int64_t bias_slot, std::int64_t deferred) {
    ctx->save_for_backward({x, weight});
    remember(ctx, weight_slot, bias_slot, deferred);
    return at::linear(x, weight, bias_slot >= 0 ? c10::optional<at::Tensor>(bias) : c10::nullopt);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    defer(ctx, Deferred::Kind::kLinear, saved[0].detach(), grads[0]);
    return {grads[0].matmul(saved[1]), {}, {}, {}, {}, {}};
  }
};

/// y = x̂·γ + β (a LayerNorm's affine, x̂ the normalised input); backward: dx̂ = dy·γ.
struct AffineFunction : torch::autograd::Function<AffineFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& normalised,
                            const at::Tensor& gamma, const at::Tensor& beta,
                            std::int64_t gamma_slot, std::int64_t beta_slot,
                            std::int64_t deferred) {
    ctx->save_for_backward({normalised, gamma});
    remember(ctx, gamma_slot, beta_slot, deferred);
    return at::addcmul(beta, normalised, gamma);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    defer(ctx, Deferred::Kind::kAffine, saved[0].detach(), grads[0]);
    return {grads[0] * saved[1], {}, {}, {}, {}, {}};
  }
};

/// y = word[tokens] + position[0, s); nothing flows to the tokens, so the backward only keeps
/// dy for W. `anchor` is a leaf that requires grad, without which autograd would record no node.
struct EmbeddingFunction : torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*anchor*/,
                            const at::Tensor& tokens, const at::Tensor& word,
                            const at::Tensor& position, std::int64_t word_slot,
                            std::int64_t position_slot, std::int64_t deferred) {
    remember(ctx, word_slot, position_slot, deferred);
    ctx->saved_data["tokens"] = tokens;
    const std::int64_t seq = tokens.size(1);
    return at::embedding(word, tokens) + position.narrow(0, 0, seq);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    defer(ctx, Deferred::Kind::kEmbedding, ctx->saved_data.at("tokens").toTensor(), grads[0]);
    return {{}, {}, {}, {}, {}, {}, {}};
  }
};

void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidConfig("gpt stage: " + what);
}

/// A tensor of its own holding a copy of `values` (the caller's span may not outlive it).
template <typename T>
at::Tensor copy_of(std::span<const T> values, at::IntArrayRef shape, at::ScalarType type) {
  return at::from_blob(const_cast<T*>(values.data()), shape, type).clone();
}

/// The floats of `tensor`, in row-major order.
std::vector<float> floats_of(const at::Tensor& tensor) {
  const at::Tensor dense = tensor.contiguous();
  std::vector<float> out(static_cast<std::size_t>(dense.numel()));
  std::memcpy(out.data(), dense.data_ptr<float>(), out.size() * sizeof(float));
  return out;
}

/// The MLP's width: ffn_hidden, or 4 · hidden when it is 0.
std::int64_t ffn_width(const GptConfig& c) {
  return c.ffn_hidden != 0 ? c.ffn_hidden : 4 * c.hidden;
}

}  // namespace

void validate(const GptConfig& c) {
  const auto positive = [](const char* name, std::int64_t value, std::int64_t most) {
    if (value < 1 || value > most) {
      throw InvalidConfig("gpt model: " + std::string(name) + " " + std::to_string(value) +
                          "; expected 1 to " + std::to_string(most));
    }
  };
  positive("vocab", c.vocab, std::int64_t{1} << 20);
  positive("hidden", c.hidden, std::int64_t{1} << 16);
  positive("heads", c.heads, c.hidden);
  positive("layers", c.layers, std::int64_t{1} << 12);
  positive("seq_len", c.seq_len, std::int64_t{1} << 16);
  positive("microbatch_size", c.microbatch_size, std::int64_t{1} << 16);
  if (c.ffn_hidden != 0) positive("ffn_hidden", c.ffn_hidden, std::int64_t{1} << 18);
  if (c.hidden % c.heads != 0) {
    throw InvalidConfig("gpt model: hidden " + std::to_string(c.hidden) +
                        " must be divisible by heads " + std::to_string(c.heads));
  }
  if (static_cast<double>(c.microbatch_size) * static_cast<double>(c.seq_len) >
      static_cast<double>(GptStage::kMaxTokens)) {
    throw InvalidConfig(
        "gpt model: microbatch_size · seq_len = " + std::to_string(c.microbatch_size * c.seq_len) +
        " tokens; at most " + std::to_string(GptStage::kMaxTokens) + " per microbatch");
  }
  // The largest tensor a microbatch makes: the attention scores (b·heads·s²), the QKV, MLP or
  // logits rows (b·s·width). Refused here rather than as std::bad_alloc inside libtorch.
  const auto tokens = static_cast<double>(c.microbatch_size * c.seq_len);
  const auto ffn = static_cast<double>(ffn_width(c));
  const double largest =
      std::max({static_cast<double>(c.microbatch_size * c.heads) * static_cast<double>(c.seq_len) *
                    static_cast<double>(c.seq_len),
                tokens * std::max({3.0 * static_cast<double>(c.hidden), ffn,
                                   static_cast<double>(c.vocab)})});
  if (largest > static_cast<double>(GptStage::kMaxTensorElements)) {
    throw InvalidConfig("gpt model: a microbatch's largest tensor would hold " +
                        std::to_string(static_cast<std::int64_t>(largest)) +
                        " elements (attention scores b·heads·s², or b·s·max(3·hidden, ffn, "
                        "vocab)); at most " +
                        std::to_string(GptStage::kMaxTensorElements));
  }
}

std::vector<std::int64_t> synthetic_sample(const GptConfig& config, std::int64_t sample) {
  validate(config);
  if (sample < 0) {
    throw InvalidConfig("synthetic sample " + std::to_string(sample) + "; expected 0 or more");
  }
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(config.seq_len + 1));
  const std::uint64_t base =
      splitmix64(config.seed ^ splitmix64(static_cast<std::uint64_t>(sample)));
  for (std::int64_t i = 0; i <= config.seq_len; ++i) {
    const std::uint64_t draw = splitmix64(base + static_cast<std::uint64_t>(i));
    out.push_back(static_cast<std::int64_t>(draw % static_cast<std::uint64_t>(config.vocab)));
  }
  return out;
}

MicrobatchData synthetic_microbatch(const GptConfig& config, std::int64_t first_sample) {
  MicrobatchData out;
  for (std::int64_t i = 0; i < config.microbatch_size; ++i) {
    const std::vector<std::int64_t> sample = synthetic_sample(config, first_sample + i);
    out.tokens.insert(out.tokens.end(), sample.begin(), sample.end() - 1);
    out.labels.insert(out.labels.end(), sample.begin() + 1, sample.end());
  }
  return out;
}

struct GptStage::Impl {
  /// The slots of one layer's parameters in the layout.
  struct LayerSlots {
    std::int64_t input_norm_weight, input_norm_bias, qkv_weight, qkv_bias, proj_weight, proj_bias,
        post_norm_weight, post_norm_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  };
  /// What a microbatch keeps from its F to its W.
  struct Microbatch {
    at::Tensor input;                ///< leaf activation (not on the first stage)
    at::Tensor output;               ///< the output node (data freed unless last)
    std::vector<at::Tensor> leaves;  ///< kAutograd: this microbatch's parameter leaves
    DeferredList deferred;
    bool input_done = false;
  };

  GptConfig config;
  StageSlice slice;
  Backward mode;
  std::int64_t ffn = 0;
  std::vector<ParameterSlot> layout;
  at::Tensor parameters;               ///< flat
  at::Tensor gradients;                ///< flat
  std::vector<at::Tensor> views;       ///< per slot, into parameters
  std::vector<at::Tensor> grad_views;  ///< per slot, into gradients
  std::vector<LayerSlots> layer_slots;
  std::int64_t word = -1, position = -1, final_norm_weight = -1, final_norm_bias = -1, head = -1;
  at::Tensor causal_mask;
  at::Tensor anchor;
  std::map<std::int64_t, Microbatch> in_flight;

  /// Elements of the whole layout.
  [[nodiscard]] std::int64_t total() const {
    return layout.empty() ? 0 : layout.back().offset + layout.back().numel;
  }

  std::int64_t add(const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t numel = 1;
    for (const std::int64_t d : shape) numel *= d;
    const std::int64_t offset = total();
    layout.push_back({.name = name, .shape = std::move(shape), .offset = offset, .numel = numel});
    return static_cast<std::int64_t>(layout.size()) - 1;
  }

  void build_layout() {
    const std::int64_t h = config.hidden;
    if (slice.first) {
      word = add(std::string(kWordEmbeddings), {config.vocab, h});
      position = add("embedding.position", {config.seq_len, h});
    }
    for (std::int64_t i = slice.first_layer; i < slice.first_layer + slice.layers; ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      layer_slots.push_back({.input_norm_weight = add(p + "input_norm.weight", {h}),
                             .input_norm_bias = add(p + "input_norm.bias", {h}),
                             .qkv_weight = add(p + "attention.qkv.weight", {3 * h, h}),
                             .qkv_bias = add(p + "attention.qkv.bias", {3 * h}),
                             .proj_weight = add(p + "attention.proj.weight", {h, h}),
                             .proj_bias = add(p + "attention.proj.bias", {h}),
                             .post_norm_weight = add(p + "post_attention_norm.weight", {h}),
                             .post_norm_bias = add(p + "post_attention_norm.bias", {h}),
                             .fc1_weight = add(p + "mlp.fc1.weight", {ffn, h}),
                             .fc1_bias = add(p + "mlp.fc1.bias", {ffn}),
                             .fc2_weight = add(p + "mlp.fc2.weight", {h, ffn}),
                             .fc2_bias = add(p + "mlp.fc2.bias", {h})});
    }
    if (slice.last) {
      final_norm_weight = add("final_norm.weight", {h});
      final_norm_bias = add("final_norm.bias", {h});
      // Tied, the head is the word embeddings, or the last stage's copy of them.
      head = config.tied_embeddings && slice.first
                 ? word
                 : add(std::string(kTiedHeadCopy), {config.vocab, h});
    }
  }

  void initialise() {
    parameters = at::zeros({total()}, at::kFloat);
    gradients = at::zeros({total()}, at::kFloat);
    for (const ParameterSlot& slot : layout) {
      at::Tensor view = parameters.narrow(0, slot.offset, slot.numel).view(slot.shape);
      const bool bias = slot.name.ends_with(".bias");
      const bool norm = slot.name.find("norm.weight") != std::string::npos;
      if (norm) {
        view.fill_(1.0);
      } else if (!bias) {
        // A tied head copy starts as the word embeddings do.
        const bool copy = config.tied_embeddings && slot.name == kTiedHeadCopy;
        at::Generator generator = at::detail::createCPUGenerator(
            parameter_seed(config.seed, copy ? std::string(kWordEmbeddings) : slot.name));
        view.normal_(0.0, kInitStd, generator);
      }
      views.push_back(view);
      grad_views.push_back(gradients.narrow(0, slot.offset, slot.numel).view(slot.shape));
    }
  }

  /// The parameter of `slot` as this microbatch's forward uses it.
  at::Tensor param(Microbatch& mb, std::int64_t slot) {
    if (mode == Backward::kSplit) return views[static_cast<std::size_t>(slot)];
    return mb.leaves[static_cast<std::size_t>(slot)];
  }

  at::Tensor linear(Microbatch& mb, const at::Tensor& x, std::int64_t weight, std::int64_t bias) {
    // Without a bias, an empty tensor: a custom function's inputs must all be defined.
    const at::Tensor b = bias >= 0 ? param(mb, bias) : at::empty({0}, at::kFloat);
    if (mode == Backward::kAutograd) {
      return at::linear(x, param(mb, weight),
                        bias >= 0 ? c10::optional<at::Tensor>(b) : c10::nullopt);
    }
    return LinearFunction::apply(x, param(mb, weight), b, weight, bias, address_of(mb.deferred));
  }

  at::Tensor norm(Microbatch& mb, const at::Tensor& x, std::int64_t weight, std::int64_t bias) {
    if (mode == Backward::kAutograd) {
      return at::layer_norm(x, {config.hidden}, param(mb, weight), param(mb, bias), kNormEps);
    }
    const at::Tensor normalised = at::layer_norm(x, {config.hidden}, {}, {}, kNormEps);
    return AffineFunction::apply(normalised, param(mb, weight), param(mb, bias), weight, bias,
                                 address_of(mb.deferred));
  }

  at::Tensor layer(Microbatch& mb, at::Tensor x, const LayerSlots& s) {
    const std::int64_t b = config.microbatch_size;
    const std::int64_t seq = config.seq_len;
    const std::int64_t h = config.hidden;
    const std::int64_t heads = config.heads;
    const std::int64_t d = h / heads;
    const at::Tensor qkv =
        linear(mb, norm(mb, x, s.input_norm_weight, s.input_norm_bias), s.qkv_weight, s.qkv_bias);
    const std::vector<at::Tensor> parts = qkv.chunk(3, -1);
    const auto heads_first = [&](const at::Tensor& t) {
      return t.reshape({b, seq, heads, d}).transpose(1, 2);
    };
    const at::Tensor q = heads_first(parts[0]);
    const at::Tensor k = heads_first(parts[1]);
    const at::Tensor v = heads_first(parts[2]);
    const at::Tensor scores =
        at::matmul(q, k.transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(d)));
    const at::Tensor probs =
        at::softmax(scores.masked_fill(causal_mask, -std::numeric_limits<double>::infinity()), -1);
    const at::Tensor context = at::matmul(probs, v).transpose(1, 2).reshape({b, seq, h});
    x = x + linear(mb, context, s.proj_weight, s.proj_bias);
    const at::Tensor up =
        linear(mb, norm(mb, x, s.post_norm_weight, s.post_norm_bias), s.fc1_weight, s.fc1_bias);
    return x + linear(mb, at::gelu(up), s.fc2_weight, s.fc2_bias);
  }

  void apply_deferred(const Deferred& d) {
    at::Tensor& weight = grad_views[static_cast<std::size_t>(d.weight)];
    const std::int64_t h = config.hidden;
    switch (d.kind) {
      case Deferred::Kind::kLinear: {
        const at::Tensor g = d.grad.reshape({-1, d.grad.size(-1)});
        const at::Tensor x = d.input.reshape({-1, d.input.size(-1)});
        weight.add_(g.t().mm(x));
        if (d.bias >= 0) grad_views[static_cast<std::size_t>(d.bias)].add_(g.sum(0));
        break;
      }
      case Deferred::Kind::kAffine: {
        const at::Tensor g = d.grad.reshape({-1, h});
        weight.add_((g * d.input.reshape({-1, h})).sum(0));
        grad_views[static_cast<std::size_t>(d.bias)].add_(g.sum(0));
        break;
      }
      case Deferred::Kind::kEmbedding: {
        weight.index_add_(0, d.input.reshape({-1}), d.grad.reshape({-1, h}));
        grad_views[static_cast<std::size_t>(d.bias)]
            .narrow(0, 0, d.grad.size(1))
            .add_(d.grad.sum(0));
        break;
      }
    }
  }

  Microbatch& find(std::int64_t microbatch, const char* what) {
    auto it = in_flight.find(microbatch);
    require(it != in_flight.end(),
            std::string(what) + " of microbatch " + std::to_string(microbatch) + " before its F");
    return it->second;
  }
};

GptStage::GptStage(const GptConfig& config, const StageSlice& slice, Backward backward)
    : impl_(std::make_unique<Impl>()) {
  validate(config);
  require(slice.first_layer >= 0 && slice.layers >= 0 &&
              slice.first_layer + slice.layers <= config.layers,
          "layers [" + std::to_string(slice.first_layer) + ", " +
              std::to_string(slice.first_layer + slice.layers) + ") outside the model's " +
              std::to_string(config.layers));
  require(slice.layers > 0 || slice.first || slice.last,
          "a stage of no layers, neither first nor last, holds nothing");
  Impl& m = *impl_;
  m.config = config;
  m.slice = slice;
  m.mode = backward;
  m.ffn = ffn_width(config);
  // The layout only names and sizes the parameters (validate's bounds keep its sums in range);
  // nothing is allocated before the count is checked.
  m.build_layout();
  require(m.total() <= kMaxParameters, std::to_string(m.total()) + " parameters; at most " +
                                           std::to_string(kMaxParameters) + " per stage");
  m.initialise();
  m.causal_mask = at::ones({config.seq_len, config.seq_len}, at::kBool).triu(1);
  m.anchor = at::zeros({}, at::kFloat).requires_grad_(true);
}

GptStage::~GptStage() = default;
GptStage::GptStage(GptStage&&) noexcept = default;
GptStage& GptStage::operator=(GptStage&&) noexcept = default;

std::vector<float> GptStage::forward(std::int64_t microbatch, const StageInput& input) {
  Impl& m = *impl_;
  const GptConfig& c = m.config;
  const std::int64_t tokens = c.microbatch_size * c.seq_len;
  require(!m.in_flight.contains(microbatch),
          "F of microbatch " + std::to_string(microbatch) + " again before its backward");
  const auto check_ids = [&](std::span<const std::int64_t> ids, const char* what) {
    require(std::ssize(ids) == tokens,
            std::string(what) + ": " + std::to_string(ids.size()) +
                " given; expected microbatch_size · seq_len = " + std::to_string(tokens));
    for (const std::int64_t id : ids) {
      require(id >= 0 && id < c.vocab, std::string(what) + ": token " + std::to_string(id) +
                                           " outside the vocabulary of " + std::to_string(c.vocab));
    }
  };
  if (m.slice.first) {
    check_ids(input.tokens, "tokens");
  } else {
    require(std::ssize(input.activation) == tokens * c.hidden,
            "activation: " + std::to_string(input.activation.size()) +
                " floats given; expected microbatch_size · seq_len · hidden = " +
                std::to_string(tokens * c.hidden));
  }
  if (m.slice.last) check_ids(input.labels, "labels");

  Impl::Microbatch& mb = m.in_flight[microbatch];
  try {
    if (m.mode == Backward::kAutograd) {
      for (const at::Tensor& view : m.views)
        mb.leaves.push_back(view.detach().requires_grad_(true));
    }
    at::Tensor x;
    if (m.slice.first) {
      const at::Tensor ids = copy_of(input.tokens, {c.microbatch_size, c.seq_len}, at::kLong);
      if (m.mode == Backward::kAutograd) {
        x = at::embedding(m.param(mb, m.word), ids) +
            m.param(mb, m.position).narrow(0, 0, c.seq_len);
      } else {
        x = EmbeddingFunction::apply(m.anchor, ids, m.param(mb, m.word), m.param(mb, m.position),
                                     m.word, m.position, address_of(mb.deferred));
      }
    } else {
      mb.input = copy_of(input.activation, {c.microbatch_size, c.seq_len, c.hidden}, at::kFloat)
                     .requires_grad_(true);
      x = mb.input;
    }
    for (const Impl::LayerSlots& s : m.layer_slots) x = m.layer(mb, x, s);
    if (m.slice.last) {
      const at::Tensor labels = copy_of(input.labels, {tokens}, at::kLong);
      const at::Tensor logits =
          m.linear(mb, m.norm(mb, x, m.final_norm_weight, m.final_norm_bias), m.head, -1);
      mb.output = at::cross_entropy_loss(logits.reshape({tokens, c.vocab}), labels);
      return {mb.output.item<float>()};
    }
    std::vector<float> out = floats_of(x);
    // Megatron's deallocate_output_tensor: the copy went out; the node stays for I.
    mb.output = x;
    mb.output.set_data(at::empty({1}, at::kFloat));
    return out;
  } catch (...) {
    m.in_flight.erase(microbatch);
    throw;
  }
}

std::vector<float> GptStage::backward_input(std::int64_t microbatch,
                                            std::span<const float> output_grad) {
  Impl& m = *impl_;
  const GptConfig& c = m.config;
  Impl::Microbatch& mb = m.find(microbatch, "I");
  require(!mb.input_done, "I of microbatch " + std::to_string(microbatch) + " again");
  at::Tensor grad;
  if (m.slice.last) {
    require(output_grad.size() == 1,
            "the last stage's output gradient: " + std::to_string(output_grad.size()) +
                " floats given; expected 1, the loss's factor");
    grad = at::full({}, output_grad[0], at::kFloat);
  } else {
    const std::int64_t n = c.microbatch_size * c.seq_len * c.hidden;
    require(std::ssize(output_grad) == n, "output gradient: " + std::to_string(output_grad.size()) +
                                              " floats given; expected " + std::to_string(n));
    grad = copy_of(output_grad, {c.microbatch_size, c.seq_len, c.hidden}, at::kFloat);
  }
  torch::autograd::Engine::get_default_engine().execute(
      {torch::autograd::impl::gradient_edge(mb.output)}, {grad}, /*keep_graph=*/false,
      /*create_graph=*/false, /*accumulate_grad=*/true);
  mb.output = at::Tensor();
  mb.input_done = true;
  std::vector<float> out;
  if (!m.slice.first) {
    out = floats_of(mb.input.grad());
    mb.input = at::Tensor();
  }
  if (m.mode == Backward::kAutograd) {
    for (std::size_t i = 0; i < mb.leaves.size(); ++i) {
      if (mb.leaves[i].grad().defined()) m.grad_views[i].add_(mb.leaves[i].grad());
    }
    mb.leaves.clear();
  }
  return out;
}

void GptStage::backward_weight(std::int64_t microbatch) {
  Impl& m = *impl_;
  Impl::Microbatch& mb = m.find(microbatch, "W");
  require(mb.input_done, "W of microbatch " + std::to_string(microbatch) + " before its I");
  const at::NoGradGuard no_grad;
  for (const Deferred& d : mb.deferred) m.apply_deferred(d);
  m.in_flight.erase(microbatch);
}

std::vector<float> GptStage::backward(std::int64_t microbatch, std::span<const float> output_grad) {
  std::vector<float> out = backward_input(microbatch, output_grad);
  backward_weight(microbatch);
  return out;
}

const std::vector<ParameterSlot>& GptStage::parameter_layout() const { return impl_->layout; }

std::span<float> GptStage::flat_parameters() {
  return {impl_->parameters.data_ptr<float>(), static_cast<std::size_t>(impl_->parameters.numel())};
}

std::span<float> GptStage::flat_gradients() {
  return {impl_->gradients.data_ptr<float>(), static_cast<std::size_t>(impl_->gradients.numel())};
}

void GptStage::zero_gradients() { impl_->gradients.zero_(); }

std::int64_t GptStage::microbatches_in_flight() const {
  return static_cast<std::int64_t>(impl_->in_flight.size());
}

}  // namespace metron::exec
