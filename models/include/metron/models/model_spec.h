#pragma once
// The shape of a transformer language model: what the cost and memory models need to know about
// it, read from and written to JSON. Note [model JSON]:
//
//   {"name": "llama2-70b", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
//    "ffn_hidden": 28672, "vocab": 32000, "seq_len": 4096, "dtype": "bf16",
//    "tied_embeddings": false, "mlp": "swiglu"}
//
// Required: name, layers, hidden, heads, vocab, seq_len. Optional, with their defaults:
// kv_heads (heads; fewer means grouped-query attention), ffn_hidden (4·hidden), dtype ("bf16"),
// tied_embeddings (false), mlp ("gelu"), moe (absent: a dense model),
// make_vocab_size_divisible_by (128). `moe` is an object {"experts", "top_k", "ffn_hidden"},
// all required, where ffn_hidden is one expert's width.
//
// make_vocab_size_divisible_by is Megatron's flag of that name (default 128): the embedding
// table, the LM head and the logits hold the vocabulary padded to a multiple of it times tp
// (megatron/training/tokenizer: _vocab_size_with_padding), so that each tensor-parallel shard
// is a multiple of it and the LM head's GEMMs get aligned shapes. 1 turns padding off (beyond
// the rounding up that splitting over tp needs). The FLOPs formulas of papers and MFU use the
// model's own `vocab`.
//
// `mlp` goes beyond the key list because parameter counts need it:
//   "gelu"   GPT-3 / Megatron: 2 MLP matrices, every linear layer and LayerNorm has a bias,
//            learned position embeddings;
//   "swiglu" Llama: 3 MLP matrices (gate, up, down), no biases, RMSNorm, rotary positions.
//   "squared-relu" Nemotron-4 (NeMo's `activation: squared-relu`): 2 MLP matrices with ReLU²
//            between them, linear layers without biases, LayerNorms with a bias (NeMo's
//            layernorm1p), rotary positions.
// Only "gelu" models train with dropout: Llama and Nemotron set every dropout to 0.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "metron/base/diagnostics.h"

namespace metron::models {

/// The number format weights and activations are held in (metron's dtype names).
enum class Precision { kBf16, kFp16, kFp32, kFp8 };

/// "bf16", "fp16", "fp32", "fp8".
std::string_view to_string(Precision precision) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<Precision> parse_precision(std::string_view name) noexcept;
/// Bytes of one element: 4 for fp32, 2 for bf16 and fp16, 1 for fp8.
double element_bytes(Precision precision) noexcept;

/// The feed-forward block of each layer (see Note [model JSON]).
enum class MlpKind { kGelu, kSwiglu, kSquaredRelu };

/// "gelu", "swiglu", "squared-relu".
std::string_view to_string(MlpKind kind) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<MlpKind> parse_mlp_kind(std::string_view name) noexcept;

/// Mixture of experts: every layer's MLP becomes `experts` MLPs of width `ffn_hidden` plus a
/// router, and each token goes through `top_k` of them.
struct MoeSpec {
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t ffn_hidden = 0;

  friend bool operator==(const MoeSpec&, const MoeSpec&) = default;
};

/// A transformer decoder. Unset optional sizes take the defaults of Note [model JSON].
struct ModelSpec {
  std::string name;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::optional<std::int64_t> kv_heads;
  std::optional<std::int64_t> ffn_hidden;
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;
  Precision dtype = Precision::kBf16;
  bool tied_embeddings = false;
  std::optional<MoeSpec> moe;
  MlpKind mlp = MlpKind::kGelu;
  std::optional<std::int64_t> make_vocab_size_divisible_by;

  /// kv_heads, or heads when unset.
  [[nodiscard]] std::int64_t num_kv_heads() const { return kv_heads.value_or(heads); }
  /// ffn_hidden, or 4·hidden when unset.
  [[nodiscard]] std::int64_t ffn_size() const { return ffn_hidden.value_or(4 * hidden); }
  /// hidden / heads.
  [[nodiscard]] std::int64_t head_dim() const { return hidden / heads; }
  /// make_vocab_size_divisible_by, or Megatron's default 128 when unset.
  [[nodiscard]] std::int64_t vocab_divisor() const {
    return make_vocab_size_divisible_by.value_or(kMegatronVocabDivisor);
  }
  /// The vocabulary entries one of `tp` tensor-parallel ranks holds: the vocabulary padded as
  /// Megatron pads it (to a multiple of vocab_divisor()·tp), split evenly.
  [[nodiscard]] std::int64_t vocab_per_rank(std::int64_t tp) const {
    const std::int64_t multiple = vocab_divisor() * tp;
    return (vocab + multiple - 1) / multiple * vocab_divisor();
  }
  static constexpr std::int64_t kMegatronVocabDivisor = 128;

  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// What the MLP kind implies about the rest of the layer (Note [model JSON]); the cost, memory
// and parameter models all ask these, never the kind itself, except for the MLP's own shape.
/// Whether the linear layers have biases: only "gelu" models.
bool has_linear_biases(const ModelSpec& spec) noexcept;
/// Whether the norms are LayerNorms with a bias ("gelu", "squared-relu") rather than RMSNorms.
bool has_norm_biases(const ModelSpec& spec) noexcept;
/// Whether the model trains with dropout (and so stores masks): only "gelu" models.
bool has_dropout(const ModelSpec& spec) noexcept;
/// Whether the positions are learned embeddings (only "gelu") rather than rotary, weightless.
bool has_learned_positions(const ModelSpec& spec) noexcept;

/// Throws InvalidConfig listing every problem: non-positive sizes, hidden not divisible by heads,
/// heads not divisible by kv_heads, kv_heads above heads, top_k above experts.
void validate(const ModelSpec& spec);

/// The canonical JSON text of a spec: keys in Note [model JSON] order, unset optionals left out,
/// one line, final newline. model_from_json(to_json(s)) == s.
std::string to_json(const ModelSpec& spec);

/// Reads and validates a spec. Malformed JSON throws ParseError at source:line:col; a wrong type
/// or a non-positive size throws ParseError naming the key (`model.json: hidden: expected a
/// positive integer, got "x"`); inconsistent sizes throw InvalidConfig (see validate). Unknown
/// keys are counted in `diagnostics` as "unknown_key" when given.
/// @code
///   Diagnostics diagnostics;
///   ModelSpec spec = model_from_json(read_file("model.json"), "model.json", &diagnostics);
/// @endcode
ModelSpec model_from_json(std::string_view text, const std::string& source = "<json>",
                          Diagnostics* diagnostics = nullptr);

}  // namespace metron::models
