// The compute cost model: the op inventory of a transformer layer, the embedding, the LM head and
// Adam, and their roofline times (Note [compute accounting] in compute_cost.h).
//
// Note [op inventory]: per rank and microbatch, with T = b·s/cp tokens, Tr = T/t under sequence
// parallelism, e bytes per element and a 1-byte mask only for "gelu" (dropout) models:
//   F  input-norm (Tr·h, 2e) · qkv GEMM T x (h + 2·kv·dh)/t x h · attention-scores (b·a/t
//      batches of s/cp x s x dh) · softmax (2e) · attention-dropout (2e+1) · attention-values
//      (s/cp x dh x s) · attention-out T x h x h/t · attention-residual (3e+mask) ·
//      post-attention-norm · MLP (gelu: up, gelu 2e, down; squared-relu: up, squared-relu 2e,
//      down; swiglu: gate-up, swiglu 3e, down;
//      MoE: router T x E x h, dispatch, the expert MLP on T·top_k tokens, combine) ·
//      mlp-residual. A GEMM moves e·(mk + kn + mn) bytes.
//   I  the reverse of F: <gemm>-dgrad (m, k, n); a batched GEMM's -dgrad-a (m, k, n) and
//      -dgrad-b (k, n, m); <elementwise>-backward at 3e per element (dropout and residuals
//      2e + mask, the loss 4 + e).
//   W  <gemm>-wgrad (k, n, m) for each weight GEMM, in backward order.
// The head: final-norm · lm-head GEMM T x V/t x h · the loss as Megatron's vocab-parallel
// cross-entropy runs it (Note [loss kernels]).
// Megatron's iteration-FLOPs formula (Narayanan et al. SC'21, eq. 3) follows from these GEMMs;
// tests/models/compute_cost_test.cc checks it.

#include "metron/models/compute_cost.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

constexpr detail::EnumNames<OpKind, 5> kOpKindNames{{
    {OpKind::kGemm, "gemm"},
    {OpKind::kBatchedGemm, "batched-gemm"},
    {OpKind::kElementwise, "elementwise"},
    {OpKind::kFusedAttention, "fused-attention"},
    {OpKind::kFusedAttentionBackward, "fused-attention-backward"},
}};
// FlashAttention's benchmark convention, which the kernel tables use: a causal mask halves the
// forward's FLOPs, and the backward does 2.5 times the forward's (it recomputes the scores).
constexpr double kCausalShare = 0.5;
constexpr double kBackwardToForward = 2.5;

// Output tile of the quantization model: NVIDIA's "Matrix Multiplication Background User's
// Guide" explains tile and wave quantization with cuBLAS tiles of 256x128, 128x128, 128x64 and
// smaller; we take the 128x128 middle one for every shape. cuBLAS picks smaller tiles for small
// shapes, so this overstates their loss somewhat; a profile entry corrects a shape that matters.
constexpr std::int64_t kTile = 128;
// PyTorch and Megatron keep a dropout mask as one byte (bool) per element.
constexpr double kMaskBytes = 1;
constexpr double kFp32Bytes = 4;
// Adam with fp32 main weights (mixed precision): read and write the main weights (4 + 4) and
// both moments (8 + 8), read the fp32 gradients (4); plus writing the model-dtype copy, which is
// the main weights themselves in fp32.
constexpr double kAdamFp32Bytes = 28;

// A size split over `parts` ranks. Sizes validate() requires to divide (heads, ffn_hidden,
// seq_len under sequence parallelism) divide exactly; the vocabulary is padded
// (ModelSpec::vocab_per_rank).
std::int64_t shard(std::int64_t size, std::int64_t parts) { return (size + parts - 1) / parts; }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

OpCost gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, double e,
            std::int64_t batch = 1, OpKind kind = OpKind::kGemm) {
  const double per_gemm_bytes =
      e * (double(m) * double(k) + double(k) * double(n) + double(m) * double(n));
  return {.name = std::move(name),
          .kind = kind,
          .m = m,
          .n = n,
          .k = k,
          .batch = batch,
          .flops = 2.0 * double(batch) * double(m) * double(n) * double(k),
          .bytes = double(batch) * per_gemm_bytes};
}

// A GEMM on the FP8 tensor cores (Note [fp8 training]): both operands one byte, the output in
// the model's dtype.
OpCost fp8_gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, double e) {
  OpCost op = gemm(std::move(name), m, n, k, e);
  op.fp8 = true;
  op.bytes = double(m) * double(k) + double(k) * double(n) + e * double(m) * double(n);
  return op;
}

OpCost batched_gemm(std::string name, std::int64_t batch, std::int64_t m, std::int64_t n,
                    std::int64_t k, double e) {
  return gemm(std::move(name), m, n, k, e, batch, OpKind::kBatchedGemm);
}

OpCost elementwise(std::string name, std::int64_t elements, double bytes_per_element) {
  return {.name = std::move(name),
          .kind = OpKind::kElementwise,
          .m = elements,
          .bytes = double(elements) * bytes_per_element};
}

// A forward op and what its backward costs, so that I can be derived from F: an element-wise
// op's backward moves `backward_bytes` per element; a GEMM derives its products from its shape,
// and an FP8 one casts its output gradient first at `backward_bytes` per element. A cast into FP8
// has no backward of its own (the gradient passes straight through).
struct ForwardOp {
  OpCost op;
  double backward_bytes = 0;
  bool no_backward = false;  ///< an FP8 cast, or a loss step whose gradient is another's
};

ForwardOp ew(std::string name, std::int64_t elements, double forward_bytes, double backward_bytes) {
  return {elementwise(std::move(name), elements, forward_bytes), backward_bytes};
}

// The sizes of Note [op inventory] for one rank and microbatch.
struct Dims {
  std::int64_t b;            // microbatch size
  std::int64_t s;            // full sequence (keys and values after cp's exchange)
  std::int64_t s_local;      // s / cp: this rank's queries
  std::int64_t tokens;       // T = b·s/cp
  std::int64_t tokens_sp;    // Tr: T/t under sequence parallelism, else T
  std::int64_t t;            // tp
  std::int64_t h;            // hidden
  std::int64_t heads_local;  // a/t
  std::int64_t kv;           // KV heads (all of them; qkv's n is split as a whole)
  std::int64_t dh;           // head dim
  double e;                  // bytes per element of the model dtype
  double mask;               // dropout mask bytes per element (0 without dropout)
  bool fused;                // one flash-style attention kernel
  double cast;               // bytes per element of a cast into FP8; 0: linear GEMMs not in FP8
};

// Note [fp8 training]: a cast reads the tensor once (twice under current scaling, whose amax
// comes from the tensor itself) and writes it in FP8 row- and column-wise.
double fp8_cast_bytes(Fp8Recipe recipe, double e) {
  constexpr double kRowAndColumnWise = 2;
  switch (recipe) {
    case Fp8Recipe::kOff:
      return 0;
    case Fp8Recipe::kDelayed:
      return e + kRowAndColumnWise;
    case Fp8Recipe::kCurrent:
      return 2 * e + kRowAndColumnWise;
  }
  return 0;
}

Dims dims_of(const ModelSpec& model, const LayerShape& shape) {
  const std::int64_t tokens = shape.tokens();
  return {.b = shape.batch,
          .s = shape.seq,
          .s_local = shape.seq / shape.cp,
          .tokens = tokens,
          .tokens_sp = shape.sequence_parallel ? shard(tokens, shape.tp) : tokens,
          .t = shape.tp,
          .h = model.hidden,
          .heads_local = shard(model.heads, shape.tp),
          .kv = model.num_kv_heads(),
          .dh = model.head_dim(),
          .e = element_bytes(model.dtype),
          .mask = has_dropout(model) ? kMaskBytes : 0,
          .fused = shape.fused_attention,
          .cast = fp8_cast_bytes(shape.fp8, element_bytes(model.dtype))};
}

// One of the layer's linear GEMMs, X[m,k] · W[k,n]: in the model's dtype, or under FP8 the casts
// of X and W and then the GEMM on the FP8 tensor cores (Note [fp8 training]).
void add_linear(std::vector<ForwardOp>& ops, const Dims& d, const std::string& name, std::int64_t m,
                std::int64_t n, std::int64_t k) {
  if (d.cast == 0) {
    ops.push_back({gemm(name, m, n, k, d.e)});
    return;
  }
  ops.push_back({.op = elementwise(name + "-cast", m * k, d.cast), .no_backward = true});
  ops.push_back({.op = elementwise(name + "-weight-cast", k * n, d.cast), .no_backward = true});
  ops.push_back({.op = fp8_gemm(name, m, n, k, d.e), .backward_bytes = d.cast});
}

// The MLP block on `tokens` tokens of width `ffn` (split over t): dense, or one expert.
void add_mlp(std::vector<ForwardOp>& ops, const ModelSpec& model, const Dims& d,
             std::int64_t tokens, std::int64_t ffn) {
  const std::int64_t ffn_local = shard(ffn, d.t);
  switch (model.mlp) {
    case MlpKind::kGelu:
      add_linear(ops, d, "mlp-up", tokens, ffn_local, d.h);
      ops.push_back(ew("gelu", tokens * ffn_local, 2 * d.e, 3 * d.e));
      break;
    case MlpKind::kSquaredRelu:
      // ReLU² reads and writes as GeLU does; its backward reads the gradient and the input.
      add_linear(ops, d, "mlp-up", tokens, ffn_local, d.h);
      ops.push_back(ew("squared-relu", tokens * ffn_local, 2 * d.e, 3 * d.e));
      break;
    case MlpKind::kSwiglu:
      add_linear(ops, d, "mlp-gate-up", tokens, 2 * ffn_local, d.h);
      ops.push_back(ew("swiglu", tokens * ffn_local, 3 * d.e, 3 * d.e));
      break;
  }
  add_linear(ops, d, "mlp-down", tokens, d.h, ffn_local);
}

// The fused kernel: the FLOPs of QKᵀ and ·V, reading Q, K, V and writing O (per head; K and V
// counted per query head, as the kernel loads them), nothing score-sized. Its backward
// (input_grads_of) reads Q, K, V, O and dO and writes dQ, dK and dV: twice these bytes.
OpCost fused_attention(const Dims& d, std::int64_t batch) {
  const double qo = 2.0 * double(batch) * double(d.s_local) * double(d.dh);
  const double kv = 2.0 * double(batch) * double(d.s) * double(d.dh);
  return {.name = "attention",
          .kind = OpKind::kFusedAttention,
          .m = d.s_local,
          .n = d.s,
          .k = d.dh,
          .batch = batch,
          .flops = 4.0 * double(batch) * double(d.s_local) * double(d.s) * double(d.dh),
          .bytes = d.e * (qo + kv)};
}

// Forward ops 3-6: what selective recompute re-runs.
void add_attention_core(std::vector<ForwardOp>& ops, const Dims& d) {
  const std::int64_t batch = d.b * d.heads_local;
  if (d.fused) {
    const OpCost forward = fused_attention(d, batch);
    ops.push_back({forward, 2 * forward.bytes});
    return;
  }
  const std::int64_t scores = batch * d.s_local * d.s;
  ops.push_back({batched_gemm("attention-scores", batch, d.s_local, d.s, d.dh, d.e)});
  ops.push_back(ew("softmax", scores, 2 * d.e, 3 * d.e));
  if (d.mask > 0) {
    ops.push_back(ew("attention-dropout", scores, 2 * d.e + d.mask, 2 * d.e + d.mask));
  }
  ops.push_back({batched_gemm("attention-values", batch, d.s_local, d.dh, d.s, d.e)});
}

std::vector<ForwardOp> layer_forward(const ModelSpec& model, const LayerShape& shape) {
  const Dims d = dims_of(model, shape);
  const std::int64_t hidden_elements = d.tokens_sp * d.h;
  std::vector<ForwardOp> ops;
  ops.push_back(ew("input-norm", hidden_elements, 2 * d.e, 3 * d.e));
  add_linear(ops, d, "qkv", d.tokens, shard(d.h + 2 * d.kv * d.dh, d.t), d.h);
  add_attention_core(ops, d);
  add_linear(ops, d, "attention-out", d.tokens, d.h, shard(d.h, d.t));
  ops.push_back(ew("attention-residual", hidden_elements, 3 * d.e + d.mask, 2 * d.e + d.mask));
  ops.push_back(ew("post-attention-norm", hidden_elements, 2 * d.e, 3 * d.e));
  if (model.moe) {
    // Tokens are balanced over the experts and the ep ranks, so each rank's experts see
    // top_k tokens per local token in all.
    const std::int64_t routed = d.tokens * model.moe->top_k * d.h;
    ops.push_back({gemm("router", d.tokens, model.moe->experts, d.h, d.e)});
    ops.push_back(ew("moe-dispatch", routed, 2 * d.e, 3 * d.e));
    add_mlp(ops, model, d, d.tokens * model.moe->top_k, model.moe->ffn_hidden);
    ops.push_back(ew("moe-combine", routed, 2 * d.e, 3 * d.e));
  } else {
    add_mlp(ops, model, d, d.tokens, model.ffn_size());
  }
  ops.push_back(ew("mlp-residual", hidden_elements, 3 * d.e + d.mask, 2 * d.e + d.mask));
  return ops;
}

std::vector<OpCost> forward_of(const std::vector<ForwardOp>& ops) {
  std::vector<OpCost> out;
  for (const ForwardOp& f : ops) out.push_back(f.op);
  return out;
}

// I: the activation gradients in reverse order. C[m,n] = A[m,k]·B[k,n] gives dA = dC·Bᵀ
// (m, k, n) and dB = Aᵀ·dC (k, n, m); a weight GEMM needs only dA here (dB is its W).
std::vector<OpCost> input_grads_of(const std::vector<ForwardOp>& ops, double e) {
  std::vector<OpCost> out;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const OpCost& f = it->op;
    switch (f.kind) {
      case OpKind::kGemm:
        if (f.fp8) {
          out.push_back(elementwise(f.name + "-grad-cast", f.m * f.n, it->backward_bytes));
          out.push_back(fp8_gemm(f.name + "-dgrad", f.m, f.k, f.n, e));
        } else {
          out.push_back(gemm(f.name + "-dgrad", f.m, f.k, f.n, e));
        }
        break;
      case OpKind::kBatchedGemm:
        out.push_back(batched_gemm(f.name + "-dgrad-a", f.batch, f.m, f.k, f.n, e));
        out.push_back(batched_gemm(f.name + "-dgrad-b", f.batch, f.k, f.n, f.m, e));
        break;
      case OpKind::kElementwise:
        if (!it->no_backward)
          out.push_back(elementwise(f.name + "-backward", f.m, it->backward_bytes));
        break;
      case OpKind::kFusedAttention: {
        OpCost b = f;
        b.name = f.name + "-backward";
        b.kind = OpKind::kFusedAttentionBackward;
        b.flops = 2 * f.flops;
        b.bytes = it->backward_bytes;
        out.push_back(std::move(b));
        break;
      }
      case OpKind::kFusedAttentionBackward:
        break;
    }
  }
  return out;
}

// W: dB = Aᵀ·dC for each weight GEMM, in backward (reverse) order.
std::vector<OpCost> weight_grads_of(const std::vector<ForwardOp>& ops, double e) {
  std::vector<OpCost> out;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const OpCost& f = it->op;
    if (f.kind != OpKind::kGemm) continue;
    // An FP8 wgrad reads the column-wise copies its forward and backward casts wrote.
    out.push_back(f.fp8 ? fp8_gemm(f.name + "-wgrad", f.k, f.n, f.m, e)
                        : gemm(f.name + "-wgrad", f.k, f.n, f.m, e));
  }
  return out;
}

std::vector<OpCost> concat(std::vector<OpCost> a, const std::vector<OpCost>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// F, I, W or B of a forward list (kRecompute is the caller's business).
std::vector<OpCost> phase_of(const std::vector<ForwardOp>& ops, ComputePhase phase, double e) {
  switch (phase) {
    case ComputePhase::kForward:
      return forward_of(ops);
    case ComputePhase::kBackwardInput:
      return input_grads_of(ops, e);
    case ComputePhase::kBackwardWeight:
      return weight_grads_of(ops, e);
    case ComputePhase::kBackward:
      return concat(input_grads_of(ops, e), weight_grads_of(ops, e));
    case ComputePhase::kRecompute:
      break;
  }
  return {};
}

// Note [loss kernels]: Megatron's vocab-parallel cross-entropy (megatron/core/tensor_parallel/
// cross_entropy.py; the same kernels in Megatron-LM 2021's mpu/cross_entropy.py) is a chain of
// PyTorch kernels over the rank's T x V/t logits, each a pass over memory, per element:
//   logits-fp32     .float() of the model-dtype logits            read e, write 4
//   logits-max      max over the vocabulary                       read 4
//   logits-shift    -= max, in place                              read 4, write 4
//   logits-exp      exp, in place                                 read 4, write 4
//   logits-sum      sum over the vocabulary                       read 4
//   loss-softmax    div_ by the sum, in place; kept for backward  read 4, write 4
// (the target gather and the per-token loss are T-sized). Backward: grad_input.mul_ by the
// output gradient, in place (read 4, write 4), then autograd's cast of that fp32 gradient back
// to the logits' dtype, the backward of .float() (read 4, write e). So e + 36 bytes forward and
// 12 + e backward, where a single fused pass would move e + 4 and 4 + e. This is Megatron's
// default; --cross-entropy-loss-fusion compiles some steps together and is not modelled. An fp32
// model's .float() returns its input: no cast either way.
void add_loss(std::vector<ForwardOp>& ops, const Dims& d, std::int64_t logits) {
  constexpr double kInPlace = 2 * kFp32Bytes;
  if (d.e < kFp32Bytes) {
    ops.push_back(ew("logits-fp32", logits, d.e + kFp32Bytes, kFp32Bytes + d.e));
  }
  ops.push_back({.op = elementwise("logits-max", logits, kFp32Bytes), .no_backward = true});
  ops.push_back({.op = elementwise("logits-shift", logits, kInPlace), .no_backward = true});
  ops.push_back({.op = elementwise("logits-exp", logits, kInPlace), .no_backward = true});
  ops.push_back({.op = elementwise("logits-sum", logits, kFp32Bytes), .no_backward = true});
  ops.push_back(ew("loss-softmax", logits, kInPlace, kInPlace));
}

std::vector<ForwardOp> head_forward(const ModelSpec& model, const LayerShape& shape) {
  const Dims d = dims_of(model, shape);
  const std::int64_t vocab_local = model.vocab_per_rank(d.t);
  std::vector<ForwardOp> ops = {ew("final-norm", d.tokens_sp * d.h, 2 * d.e, 3 * d.e),
                                {gemm("lm-head", d.tokens, vocab_local, d.h, d.e)}};
  add_loss(ops, d, d.tokens * vocab_local);
  return ops;
}

double sum_flops(const std::vector<OpCost>& ops) {
  double flops = 0;
  for (const OpCost& op : ops) flops += op.flops;
  return flops;
}

}  // namespace

std::string_view to_string(OpKind kind) noexcept { return detail::name_of(kOpKindNames, kind); }

bool is_fused_attention(OpKind kind) noexcept {
  return kind == OpKind::kFusedAttention || kind == OpKind::kFusedAttentionBackward;
}

std::string OpCost::profile_key() const {
  const std::string mnk = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  switch (kind) {
    case OpKind::kGemm:
      return "gemm:" + mnk;
    case OpKind::kBatchedGemm:
      return "batched-gemm:" + std::to_string(batch) + "x" + mnk;
    case OpKind::kFusedAttention:
    case OpKind::kFusedAttentionBackward:
      return std::string(to_string(kind)) + ":" + std::to_string(batch) + "x" + mnk;
    case OpKind::kElementwise:
      break;
  }
  return "elementwise:" + name + ":" + std::to_string(m);
}

std::vector<OpCost> layer_ops(const ModelSpec& model, const LayerShape& shape, ComputePhase phase,
                              Recompute recompute) {
  if (phase != ComputePhase::kRecompute) {
    return phase_of(layer_forward(model, shape), phase, element_bytes(model.dtype));
  }
  switch (recompute) {
    case Recompute::kNone:
      return {};
    case Recompute::kSelective: {
      std::vector<ForwardOp> core;
      add_attention_core(core, dims_of(model, shape));
      return forward_of(core);
    }
    case Recompute::kFull:
      return forward_of(layer_forward(model, shape));
  }
  return {};
}

std::vector<OpCost> embedding_ops(const ModelSpec& model, const LayerShape& shape,
                                  ComputePhase phase) {
  const Dims d = dims_of(model, shape);
  std::vector<OpCost> forward = {elementwise("embedding", d.tokens_sp * d.h, 2 * d.e)};
  if (d.mask > 0) {
    forward.push_back(elementwise("embedding-dropout", d.tokens_sp * d.h, 2 * d.e + d.mask));
  }
  // The lookup has no activation gradient; its weight gradient is a scatter-add of the output
  // gradients into the table rows (read gradient, read and write the row).
  const std::vector<OpCost> weight = {elementwise("embedding-wgrad", d.tokens * d.h, 3 * d.e)};
  switch (phase) {
    case ComputePhase::kForward:
      return forward;
    case ComputePhase::kBackwardWeight:
    case ComputePhase::kBackward:
      return weight;
    case ComputePhase::kBackwardInput:
    case ComputePhase::kRecompute:
      break;
  }
  return {};
}

std::vector<OpCost> head_ops(const ModelSpec& model, const LayerShape& shape, ComputePhase phase) {
  return phase_of(head_forward(model, shape), phase, element_bytes(model.dtype));
}

std::vector<OpCost> optimizer_ops(std::int64_t parameters, Precision model_dtype) {
  const double e = element_bytes(model_dtype);
  // An fp32 model has no separate low-precision copy to write.
  const double per_parameter = e < kFp32Bytes ? kAdamFp32Bytes + e : kAdamFp32Bytes;
  return {elementwise("adam", parameters, per_parameter)};
}

ComputeModel::ComputeModel(HardwareSpec hardware, Precision dtype, const CostProfile* profile)
    : hardware_(std::move(hardware)),
      dtype_(dtype),
      peak_flops_(0),
      fp8_peak_flops_(hardware_.gpu.peak(Precision::kFp8)),
      profile_(profile) {
  const std::optional<double> peak = hardware_.gpu.peak(dtype_);
  if (!peak) {
    throw InvalidConfig("hardware \"" + hardware_.name + "\": GPU \"" + hardware_.gpu.name +
                        "\" has no peak_flops for dtype \"" + std::string(to_string(dtype_)) +
                        "\"");
  }
  peak_flops_ = *peak;
}

double ComputeModel::gemm_efficiency(const OpCost& op) const {
  if (op.kind == OpKind::kElementwise) return 1.0;
  if (is_fused_attention(op.kind)) {
    // What fraction of the peak the kernel's time works out to, for tables of ops.
    const double seconds = fused_attention_compute_time(op);
    return seconds > 0 ? op.flops / (seconds * peak_flops_) : 1.0;
  }
  const GpuSpec& gpu = hardware_.gpu;
  const double large =
      op.fp8 ? gpu.fp8_gemm_efficiency.value_or(gpu.gemm_efficiency) : gpu.gemm_efficiency;
  if (gpu.sm_count == 0 || op.m <= 0 || op.n <= 0) return large;
  // Tile quantization: partial edge tiles cost as much as full ones.
  const std::int64_t tiles_m = ceil_div(op.m, kTile);
  const std::int64_t tiles_n = ceil_div(op.n, kTile);
  const double tile_util =
      (double(op.m) * double(op.n)) / (double(tiles_m * kTile) * double(tiles_n * kTile));
  // Wave quantization: each SM runs one tile at a time, so a partial last wave idles SMs.
  const std::int64_t tiles = op.batch * tiles_m * tiles_n;
  const std::int64_t waves = ceil_div(tiles, gpu.sm_count);
  const double wave_util = double(tiles) / (double(waves) * double(gpu.sm_count));
  // The fixed time per output tile, as the k it is worth at one SM's rate (Note [gemm tile
  // overhead]).
  double overhead_share = 1;
  if (gpu.gemm_tile_overhead > 0 && op.k > 0) {
    const double sm_rate = peak_for(op) * large / double(gpu.sm_count);
    const double k0 = gpu.gemm_tile_overhead * sm_rate / (2.0 * double(kTile) * double(kTile));
    overhead_share = double(op.k) / (double(op.k) + k0);
  }
  return large * tile_util * wave_util * overhead_share;
}

double ComputeModel::op_time(const OpCost& op) const {
  if (profile_ != nullptr) {
    const Precision precision = op.fp8 ? Precision::kFp8 : dtype_;
    if (const std::optional<double> measured = profile_->compute(op.profile_key(), precision)) {
      return *measured;
    }
  }
  const GpuSpec& gpu = hardware_.gpu;
  double compute = 0;
  if (is_fused_attention(op.kind)) {
    compute = fused_attention_compute_time(op);
  } else if (op.flops > 0) {
    compute = op.flops / (peak_for(op) * gemm_efficiency(op));
  }
  const double memory = op.bytes / (gpu.hbm_bandwidth * gpu.memory_efficiency);
  // Note [kernel floor]: no kernel among many back to back finishes sooner, however little it
  // does; an op without work launches none.
  if (op.flops <= 0 && op.bytes <= 0) return 0;
  const bool gemm = op.kind == OpKind::kGemm || op.kind == OpKind::kBatchedGemm;
  const double floor = gemm ? std::max(gpu.kernel_floor, gpu.gemm_floor) : gpu.kernel_floor;
  return std::max({compute, memory, floor});
}

double ComputeModel::peak_for(const OpCost& op) const {
  if (!op.fp8) return peak_flops_;
  if (!fp8_peak_flops_) {
    throw InvalidConfig("hardware \"" + hardware_.name + "\": GPU \"" + hardware_.gpu.name +
                        "\" has no peak_flops for \"fp8\", which FP8 training (parallel.fp8) "
                        "needs for GEMM \"" +
                        op.name + "\"");
  }
  return *fp8_peak_flops_;
}

double ComputeModel::fused_attention_compute_time(const OpCost& op) const {
  const bool backward = op.kind == OpKind::kFusedAttentionBackward;
  const double forward_flops = backward ? op.flops / 2 : op.flops;
  if (const auto& table = hardware_.gpu.fused_attention) {
    const auto seq = static_cast<double>(op.n);
    const double convention_flops = kCausalShare * forward_flops;  // the table's forward FLOPs
    return backward ? kBackwardToForward * convention_flops / table->at(table->backward, seq)
                    : convention_flops / table->at(table->forward, seq);
  }
  // No measured kernel: its products as batched GEMMs (scores m x n x k, values m x k x n).
  const OpCost scores = gemm("", op.m, op.n, op.k, 0, op.batch, OpKind::kBatchedGemm);
  return op.flops / (peak_flops_ * gemm_efficiency(scores));
}

PhaseCost ComputeModel::cost(std::span<const OpCost> ops) const {
  PhaseCost total;
  for (const OpCost& op : ops) {
    total.flops += op.flops;
    total.bytes += op.bytes;
    total.seconds += op_time(op);
  }
  return total;
}

LayerPhaseCosts layer_phase_costs(const ModelSpec& model, const LayerShape& shape,
                                  Recompute recompute, const ComputeModel& compute) {
  LayerPhaseCosts out;
  out.forward = compute.cost(layer_ops(model, shape, ComputePhase::kForward));
  out.backward_input = compute.cost(layer_ops(model, shape, ComputePhase::kBackwardInput));
  out.backward_weight = compute.cost(layer_ops(model, shape, ComputePhase::kBackwardWeight));
  out.backward = {.flops = out.backward_input.flops + out.backward_weight.flops,
                  .bytes = out.backward_input.bytes + out.backward_weight.bytes,
                  .seconds = out.backward_input.seconds + out.backward_weight.seconds};
  out.recompute = compute.cost(layer_ops(model, shape, ComputePhase::kRecompute, recompute));
  return out;
}

double iteration_flops(const ModelSpec& model, const ParallelSpec& spec, bool with_recompute) {
  const std::optional<std::int64_t> microbatches = spec.microbatches();
  if (!microbatches) {
    throw InvalidConfig(
        "iteration_flops: the number of microbatches is unknown; expected num_microbatches, or "
        "global_batch divisible by microbatch_size * dp");
  }
  const LayerShape shape = layer_shape(model, spec);
  // The model's FLOPs on its own vocabulary: the padding's columns are work the GPUs do, not the
  // model's (MFU and the papers' formulas count V).
  ModelSpec unpadded = model;
  unpadded.make_vocab_size_divisible_by = 1;
  const auto flops = [&](ComputePhase phase) {
    return sum_flops(layer_ops(model, shape, phase, spec.recompute));
  };
  double layer = flops(ComputePhase::kForward) + flops(ComputePhase::kBackwardInput) +
                 flops(ComputePhase::kBackwardWeight);
  if (with_recompute) layer += flops(ComputePhase::kRecompute);
  const double head = sum_flops(head_ops(unpadded, shape, ComputePhase::kForward)) +
                      sum_flops(head_ops(unpadded, shape, ComputePhase::kBackwardInput)) +
                      sum_flops(head_ops(unpadded, shape, ComputePhase::kBackwardWeight));
  // Each rank of a tp·cp group computes its share of the same microbatch's layer.
  const double replicas = double(spec.tp * spec.cp) * double(*microbatches) * double(spec.dp);
  return (double(model.layers) * layer + head) * replicas;
}

}  // namespace metron::models
