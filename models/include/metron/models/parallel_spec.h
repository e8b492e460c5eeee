#pragma once
// How a model is split over GPUs and batched: the `parallel` object of a scenario.
// Note [parallel JSON]:
//
//   {"tp": 8, "pp": 16, "dp": 8, "vp": 2, "cp": 1, "ep": 1, "sequence_parallel": true,
//    "microbatch_size": 1, "global_batch": 1536, "num_microbatches": null, "seq_len": 2048,
//    "recompute": "none", "attention": "unfused", "tp_comm_overlap": false, "fp8": "off",
//    "scatter_gather_p2p": false, "first_stage_layers": null, "last_stage_layers": null,
//    "pipeline_layers": [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]}
//
// Every key is optional: sizes default to 1, sequence_parallel to false, microbatch_size to 1,
// recompute to "none", attention to "unfused", tp_comm_overlap to false, fp8 to "off",
// scatter_gather_p2p to false (Megatron-Core has no such option); seq_len
// defaults to the model's (null = unset); global_batch and num_microbatches may be null. The number
// of microbatches per iteration comes from num_microbatches when given, else from global_batch /
// (microbatch_size · dp); when both are given they must agree.
//
// Note [uneven stages]: first_stage_layers and last_stage_layers are Megatron-Core's
// --decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers: the transformer
// layers of the first and of the last pipeline rank; the other ranks split the rest evenly, and
// each rank splits its layers evenly over its vp chunks (Megatron-Core's
// get_num_layers_to_build). Unset, every rank holds layers/pp. Llama 3 405B's 126 layers on
// pp 16, for instance: first and last 7, the 14 others 8. pipeline_layers names every rank's
// count instead, pp of them adding up to the layers, each divisible by vp (any split, such as
// 8, 8 x 14, 6, which first/last cannot express); it excludes the first/last counts and is
// written to JSON only when given. account_for_embedding_in_pipeline_split and
// account_for_loss_in_pipeline_split are Megatron-Core's other way (get_transformer_layer_offset,
// get_num_layers_to_build): the layers plus one for the embedding and one for the loss split
// evenly over the pp·vp virtual stages, and the first (last) virtual stage holds one layer less
// for the embedding (loss). Llama 3 405B's 126 layers + 2 on pp 16, vp 2: every virtual stage 4
// layers, the first and the last 3. They replace the other forms (Megatron applies them only to
// an otherwise even split), each virtual stage keeps at least one layer, and they follow the
// looped placement of Megatron's schedules (stage s on rank s mod pp); written to JSON only when
// set.
//
// Rank layout (Megatron's default order "tp-cp-ep-dp-pp"): tp varies fastest, then cp, then dp,
// then pp; the ep ranks of an expert layer are carved out of the dp·cp ranks. This decides which
// groups sit inside a node (see group_placement.h).
//
// Which model state the data-parallel ranks shard (distributed optimizer, ZeRO stage) belongs to
// the sync policy (the scenario's "sync"), not here: memory_model.h takes it as a StatePolicy.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/models/model_spec.h"

namespace metron::models {

/// Activation recomputation (Korthikanti et al. 2022): none; selective recomputes the attention
/// core (QKᵀ, softmax, dropout, ·V) in the backward; full recomputes each layer's forward from
/// its stored input.
enum class Recompute { kNone, kSelective, kFull };

/// "none", "selective", "full".
std::string_view to_string(Recompute recompute) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<Recompute> parse_recompute(std::string_view name) noexcept;

/// How the attention core runs. unfused: QKᵀ and ·V as batched GEMMs with the s×s scores
/// written, softmaxed and dropped out in memory (Megatron's own kernels, the 2021 runs); fused:
/// one flash-style kernel that keeps the scores on chip (FlashAttention, cuDNN's fused attention
/// — what Transformer Engine runs by default), so neither time nor memory pays for s×s tensors.
enum class AttentionKernel { kUnfused, kFused };

/// "unfused", "fused".
std::string_view to_string(AttentionKernel kernel) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<AttentionKernel> parse_attention_kernel(std::string_view name) noexcept;

/// FP8 training as Transformer Engine runs it (Note [fp8 training] in compute_cost.h): off (every
/// GEMM in the model's dtype); delayed (TE's DelayedScaling, Megatron's --fp8-format hybrid
/// default: scales from the amax history of earlier steps, so a cast is one pass); current
/// (Float8CurrentScaling: the amax of the tensor itself, one more read before the cast).
enum class Fp8Recipe { kOff, kDelayed, kCurrent };

/// "off", "delayed", "current".
std::string_view to_string(Fp8Recipe recipe) noexcept;
/// The inverse of to_string; nullopt for any other text.
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name) noexcept;

/// Parallel sizes and batching (see Note [parallel JSON]).
struct ParallelSpec {
  std::int64_t tp = 1;             ///< tensor parallel
  std::int64_t pp = 1;             ///< pipeline parallel (stages' ranks)
  std::int64_t dp = 1;             ///< data parallel
  std::int64_t vp = 1;             ///< model chunks per pipeline rank (interleaving, V schedules)
  std::int64_t cp = 1;             ///< context parallel (sequence split for attention)
  std::int64_t ep = 1;             ///< expert parallel (MoE), within dp·cp
  bool sequence_parallel = false;  ///< Megatron SP: norms/dropout split over tp (needs tp > 1)
  std::int64_t microbatch_size = 1;
  std::optional<std::int64_t> global_batch;      ///< samples per iteration, all replicas
  std::optional<std::int64_t> num_microbatches;  ///< per pipeline per iteration
  std::optional<std::int64_t> seq_len;           ///< default: the model's
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kUnfused;
  /// Megatron's --tp-comm-overlap (Transformer Engine's userbuffers): each tensor-parallel
  /// all-gather and reduce-scatter is pipelined with the GEMM it feeds or follows
  /// (Note [layer collectives]). Needs sequence parallelism when tp > 1, as in Megatron.
  bool tp_comm_overlap = false;
  /// The transformer layers' linear GEMMs in FP8 (Note [fp8 training]); needs a GPU with an fp8
  /// peak.
  Fp8Recipe fp8 = Fp8Recipe::kOff;
  /// Megatron-LM 2.x's --scatter-gather-tensors-in-pipeline (on by default there, gone from
  /// Megatron-Core): each tensor-parallel rank sends 1/tp of the boundary tensor to the next
  /// stage, which all-gathers it over its tensor-parallel group (Narayanan et al. SC'21 §4.1;
  /// Note [pipeline scatter/gather] in lowering/intra_layer.h).
  bool scatter_gather_p2p = false;
  /// Layers of the first and of the last pipeline rank (Note [uneven stages]); unset: even.
  std::optional<std::int64_t> first_stage_layers;
  std::optional<std::int64_t> last_stage_layers;
  /// Every pipeline rank's layers (Note [uneven stages]); empty: even, or first/last.
  std::vector<std::int64_t> pipeline_layers;
  /// Megatron-Core's --account-for-embedding-in-pipeline-split and
  /// --account-for-loss-in-pipeline-split (Note [uneven stages]): the embedding, the loss,
  /// counts as one more layer of the first, the last, virtual pipeline stage.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;

  /// Whether the layers split other than evenly (Note [uneven stages]).
  [[nodiscard]] bool uneven_split() const {
    return first_stage_layers || last_stage_layers || !pipeline_layers.empty() ||
           account_for_embedding_in_pipeline_split || account_for_loss_in_pipeline_split;
  }
  /// tp · pp · dp · cp: the GPUs one configuration occupies.
  [[nodiscard]] std::int64_t gpus() const { return tp * pp * dp * cp; }
  /// num_microbatches, else global_batch / (microbatch_size · dp); nullopt when neither is set
  /// (or the division is not exact: validate() reports that).
  [[nodiscard]] std::optional<std::int64_t> microbatches() const;
  /// seq_len, else the model's.
  [[nodiscard]] std::int64_t sequence_length(const ModelSpec& model) const {
    return seq_len.value_or(model.seq_len);
  }
  /// Sequence parallelism in effect: requested and tp > 1 (Megatron turns it off at tp = 1).
  [[nodiscard]] bool sp() const { return sequence_parallel && tp > 1; }
  /// The pipeline scatter/gather in effect: requested, tp > 1 and pp > 1, without sequence
  /// parallelism, whose boundary tensor is already split over tp (Megatron-LM's 2022
  /// megatron/p2p_communication.py skips the scatter/gather there too).
  [[nodiscard]] bool p2p_scatter_gather() const {
    return scatter_gather_p2p && tp > 1 && pp > 1 && !sp();
  }

  friend bool operator==(const ParallelSpec&, const ParallelSpec&) = default;
};

/// The transformer layers of each pipeline rank (Note [uneven stages]). Throws InvalidConfig
/// when they do not add up: a first or last count with pp = 1 or not below the layers, the rest
/// not divisible by the other ranks, a rank's layers not divisible by vp; pipeline_layers with
/// first/last, with other than pp counts or with a sum other than the layers.
std::vector<std::int64_t> pipeline_rank_layers(const ModelSpec& model, const ParallelSpec& spec);

/// The layers of each of the pp·vp virtual stages in the looped order (stage s on rank s mod
/// pp): rank layers / vp, or under account_for_* the accounted split (Note [uneven stages]).
/// Throws InvalidConfig as pipeline_rank_layers does, and for ranks whose layers vp does not
/// divide.
std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& model, const ParallelSpec& spec);

/// Throws InvalidConfig listing every problem of `spec` for `model` (and `gpus` when given):
/// non-positive sizes; layers that do not split over the pipeline ranks and their vp chunks
/// (pipeline_rank_layers); vp > 1 with pp = 1; heads and kv_heads not
/// divisible by tp; ffn_hidden not divisible by tp; seq_len not divisible by tp (cp·tp when
/// cp > 1) under sequence parallelism or by 2·cp under context parallelism (Megatron's
/// load-balanced split); neither global_batch nor num_microbatches; global_batch not divisible by
/// microbatch_size·dp, or disagreeing with num_microbatches; tp_comm_overlap with tp > 1 but
/// without sequence parallelism; ep > 1 on a dense model; experts not
/// divisible by ep; dp·cp not divisible by ep; gpus != tp·pp·dp·cp; any size over its limit
/// (Note [input limits] in limits.h).
/// @code
///   validate(ParallelSpec{.tp = 8, .pp = 16, .dp = 8, .global_batch = 1536},
///            model_preset("gpt3-175b"), 1024);
/// @endcode
void validate(const ParallelSpec& spec, const ModelSpec& model,
              std::optional<std::int64_t> gpus = std::nullopt);

/// The checks of validate() that need no model: positive sizes and Note [input limits] (each size,
/// tp·pp·dp·cp, microbatches and microbatches·pp·vp). Throws InvalidConfig listing every problem.
void validate_sizes(const ParallelSpec& spec);

/// The canonical JSON text (every key of Note [parallel JSON], unset optionals as null), one
/// line, final newline. parallel_from_json(to_json(s)) == s.
std::string to_json(const ParallelSpec& spec);

/// Reads a spec (no validation against a model: that needs the model, see validate). A wrong
/// type or a non-positive size throws ParseError naming the key; unknown keys are counted in
/// `diagnostics` as "unknown_key" when given.
ParallelSpec parallel_from_json(std::string_view text, const std::string& source = "<json>",
                                Diagnostics* diagnostics = nullptr);

}  // namespace metron::models
