#pragma once
// The compute cost model: every GEMM, attention product and element-wise op of a transformer
// layer (and of the embedding, the LM head and loss, and the optimizer step) with its FLOPs and
// HBM bytes, and its time on a GPU by roofline with a size-dependent GEMM efficiency.
// Note [compute accounting]:
//
//   FLOPs are matrix FLOPs only (2 per multiply-add), as in Megatron's and PaLM's accounting;
//   element-wise ops (norms, softmax, dropout, activations, residual adds, the loss, Adam) carry
//   flops = 0 and are costed by their bytes. Attention counts the full s×s score matrix, as
//   Megatron's formula and its fused (non-flash) softmax kernels do.
//
//   Phases: F forward; I the input (activation) gradients, which hold the whole attention-core
//   backward and every element-wise backward; W the weight gradients (one GEMM per weight
//   matrix, as many FLOPs as its forward); B = I + W; recompute = what Recompute re-runs before
//   a backward (nothing; the attention core; or the whole forward); optimizer = Adam.
//
//   Time of one op = max(flops / (peak · gemm efficiency), bytes / (HBM bandwidth · memory
//   efficiency)); a CostProfile entry for the op's key replaces it. The GEMM efficiency is the
//   GPU's large-GEMM efficiency times tile and wave quantization over its SMs (NVIDIA's "Matrix
//   Multiplication Background User's Guide") times the tile overhead's share (Note [gemm tile
//   overhead]); constants are documented in hardware_presets.cc.
//
// Note [gemm tile overhead]: each 128×128 output tile of a GEMM costs a fixed time t
// (gpu.gemm_tile_overhead: filling the k-loop's pipeline, writing the tile) besides its k-loop,
// which one SM runs at rate R = peak · efficiency / sm_count. The k-loop of a tile takes
// 2·128²·k / R, so the tile takes (k + k0) / k times that, with k0 = t · R / (2·128²): the GEMM
// reaches k / (k + k0) of its efficiency. A short inner dimension pays most: a tensor-parallel
// row-parallel GEMM (k = h / tp) more than the column-parallel one before it. On the H100 (t =
// 1.1 µs, bench/cuda_profile's grid) k0 is about 190 in bf16 and, as fp8 runs the loop faster,
// about 330 in fp8; at k = 1536 (GPT-3 175B's attention-out at tp 8) a bf16 GEMM loses 11 %, at
// k = 12288 under 2 %.
//
// Note [kernel floor]: one kernel among thousands back to back on one stream takes at least
// gpu.kernel_floor (a GEMM call at least gpu.gemm_floor), however little it does: its launch,
// ramp-up and drain, or the host's launch when that is the slower side. So an op's time is
// max(roofline, floor); an op without FLOPs or bytes runs no kernel and costs 0. A layer of many
// small kernels (a small hidden size, a short sequence, tiny experts) pays it per op; a large
// model's ops take far longer than the floor, and their measured efficiencies already hold their
// own fixed costs. On the H100 the floors are 3.4 us and 6.2 us (bench/cuda_profile's tiny
// kernels); a CostProfile entry replaces the whole time, floor included.
//
//   Fused attention (LayerShape::fused_attention): the attention core is one op, "attention"
//   (and "attention-backward" in I), with the same matrix FLOPs as QKᵀ and ·V (and their four
//   gradient products), no score-sized element-wise ops, and Q, K, V, O (and their gradients) as
//   its only HBM traffic. Its time comes from the GPU's measured kernel table
//   (gpu.fused_attention): the causal kernel does half the products, so forward time =
//   (FLOPs / 2) / forward(s) and backward time = 2.5 · (forward FLOPs / 2) / backward(s), the
//   tables' own convention (the backward recomputes the scores, hence 2.5 rather than 2).
//   Without a table it is costed like the two products at the GEMM efficiency, causal mask
//   ignored.
//
// Note [fp8 training]: parallel.fp8 runs the transformer layers' linear GEMMs as Transformer
// Engine does under Megatron-Core: qkv, attention-out and the MLP's (each expert's) up or gate-up
// and down, with their dgrad and wgrad, on the FP8 tensor cores (OpCost::fp8): timed at the GPU's
// fp8 peak times gpu.fp8_gemm_efficiency with the usual tile and wave quantization, operands of
// one byte, the output in the model's dtype; a profile entry is looked up at dtype fp8. The
// attention core, the router, the LM head, the embedding and every element-wise op stay in the
// model's dtype (TE's defaults: no FP8 attention; Megatron keeps the output layer out of FP8).
// Before each FP8 GEMM its operands are cast: in F the input X (m×k, "<gemm>-cast") and the
// weight (k×n, "<gemm>-weight-cast", every microbatch), in I the output gradient (m×n,
// "<gemm>-grad-cast"); W reuses the transposed copies these casts wrote. A cast is an
// element-wise op that reads the tensor (e bytes) and writes it in FP8 row- and column-wise (the
// transposed copy Hopper's FP8 GEMMs need for the other product): e + 2 bytes per element under
// delayed scaling, whose scale comes from the amax history, and 2e + 2 under current scaling,
// which first reads the tensor for its amax. By this count the casts of TE's own GEMM benchmark
// run at stream bandwidth (hardware_presets.cc). Not modelled: TE's fusion of a cast into the
// norm or activation before it (counted as a separate pass here), its cache of the weights' casts
// across microbatches (Megatron's is_first_microbatch), and FP8 all-gathers under sequence
// parallelism (the cast is counted on the gathered input). MoE experts run as one MLP over the
// routed tokens (Note [op inventory]), so their weight casts count one expert's weights.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "metron/models/cost_kinds.h"
#include "metron/models/cost_profile.h"
#include "metron/models/hardware_spec.h"
#include "metron/models/layer_shape.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"

namespace metron::models {

/// How an op is computed, which decides its roofline and its profile key.
enum class OpKind {
  kGemm,            ///< C[m,n] = A[m,k] · B[k,n]
  kBatchedGemm,     ///< `batch` independent GEMMs (attention's QKᵀ and ·V)
  kElementwise,     ///< memory-bound: norms, softmax, dropout, activations, adds, loss, optimizer
  kFusedAttention,  ///< a flash-style attention forward: `batch` heads of m queries
                    ///< against n keys, head dim k (Note [compute accounting])
  kFusedAttentionBackward,  ///< its backward, same shape
};

/// "gemm", "batched-gemm", "elementwise", "fused-attention", "fused-attention-backward".
std::string_view to_string(OpKind kind) noexcept;

/// True for kFusedAttention and kFusedAttentionBackward.
bool is_fused_attention(OpKind kind) noexcept;

/// One op on one rank for one microbatch.
struct OpCost {
  std::string name;  ///< what it is, e.g. "qkv", "attention-scores", "softmax", "mlp-down"
  OpKind kind = OpKind::kElementwise;
  std::int64_t m = 0;      ///< GEMM rows; element-wise: elements
  std::int64_t n = 0;      ///< GEMM columns; element-wise: 0
  std::int64_t k = 0;      ///< GEMM inner size; element-wise: 0
  std::int64_t batch = 1;  ///< batched GEMM count; otherwise 1
  double flops = 0;        ///< matrix FLOPs (Note [compute accounting])
  double bytes = 0;        ///< HBM bytes read + written
  bool fp8 = false;        ///< a GEMM on the FP8 tensor cores (Note [fp8 training])

  /// The key a CostProfile stores this op's measured time under: "gemm:MxNxK",
  /// "batched-gemm:BATCHxMxNxK", "elementwise:<name>:<elements>",
  /// "fused-attention:BATCHxMxNxK", "fused-attention-backward:BATCHxMxNxK".
  [[nodiscard]] std::string profile_key() const;

  friend bool operator==(const OpCost&, const OpCost&) = default;
};

/// The ops of one transformer layer for `phase` (Note [compute accounting]), in execution order.
/// kRecompute gives what `recompute` re-runs (empty for kNone); the optimizer step is not a layer
/// phase (see optimizer_ops).
std::vector<OpCost> layer_ops(const ModelSpec& model, const LayerShape& shape, ComputePhase phase,
                              Recompute recompute = Recompute::kNone);

/// The first stage's extras: token (and "gelu" models' position) embedding lookup and dropout.
std::vector<OpCost> embedding_ops(const ModelSpec& model, const LayerShape& shape,
                                  ComputePhase phase);

/// The last stage's extras: final norm, the vocabulary-parallel LM head GEMM and cross-entropy.
std::vector<OpCost> head_ops(const ModelSpec& model, const LayerShape& shape, ComputePhase phase);

/// One Adam step over `parameters` parameters held (as their optimizer shard) on one rank: reads
/// and writes the fp32 main weights and both moments, reads the gradients, writes the model's
/// weights in `model_dtype`.
std::vector<OpCost> optimizer_ops(std::int64_t parameters, Precision model_dtype);

/// Totals of a list of ops.
struct PhaseCost {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
};

/// Times ops on one GPU of `hardware` at `dtype` (the precision GEMMs run in).
class ComputeModel {
 public:
  /// `profile`, when given, must outlive the model.
  ComputeModel(HardwareSpec hardware, Precision dtype, const CostProfile* profile = nullptr);

  /// The fraction of its peak (the fp8 one for an FP8 GEMM) a GEMM of this shape reaches (1 for
  /// element-wise ops).
  [[nodiscard]] double gemm_efficiency(const OpCost& op) const;
  /// Seconds: the profile's entry for op.profile_key() at this dtype (fp8 for an FP8 GEMM), else
  /// the roofline. Throws InvalidConfig for an FP8 GEMM on a GPU without an fp8 peak.
  [[nodiscard]] double op_time(const OpCost& op) const;
  /// The compute-bound time of a fused attention op (Note [compute accounting]).
  [[nodiscard]] double fused_attention_compute_time(const OpCost& op) const;
  /// Sums of flops, bytes and op_time.
  [[nodiscard]] PhaseCost cost(std::span<const OpCost> ops) const;

  [[nodiscard]] const HardwareSpec& hardware() const { return hardware_; }
  [[nodiscard]] Precision dtype() const { return dtype_; }

 private:
  /// The peak FLOP/s `op` runs against: the fp8 one for an FP8 GEMM, else the dtype's.
  [[nodiscard]] double peak_for(const OpCost& op) const;

  HardwareSpec hardware_;
  Precision dtype_;
  double peak_flops_;                     // hardware_.gpu.peak(dtype_); InvalidConfig when absent
  std::optional<double> fp8_peak_flops_;  // hardware_.gpu.peak(kFp8)
  const CostProfile* profile_;
};

/// One layer's cost in every phase.
struct LayerPhaseCosts {
  PhaseCost forward;
  PhaseCost backward_input;
  PhaseCost backward_weight;
  PhaseCost backward;   ///< backward_input + backward_weight
  PhaseCost recompute;  ///< under the given Recompute
};

LayerPhaseCosts layer_phase_costs(const ModelSpec& model, const LayerShape& shape,
                                  Recompute recompute, const ComputeModel& compute);

/// Matrix FLOPs of one training iteration over all GPUs: every layer's F, recompute, I and W
/// plus the LM head's F, I and W, for global_batch = microbatches · microbatch_size · dp samples.
/// With `with_recompute` false the recompute is left out ("model FLOPs", the MFU numerator). The
/// LM head counts the model's own vocabulary, not the padded one the GPUs compute.
/// For a "gelu" model with ffn = 4h, full recompute and tp = cp = 1 this is Megatron's
/// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
double iteration_flops(const ModelSpec& model, const ParallelSpec& spec, bool with_recompute);

}  // namespace metron::models
