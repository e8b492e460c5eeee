// Preset machines. Every number is copied from the cited public datasheet, except the latencies
// and efficiencies below, which are round readings of published microbenchmarks; none is fitted
// to a training result, so the cost models can be checked against measurements rather than
// tuned to them.
//
// Conventions: peaks are dense (the datasheets' sparsity figures halved); "GB" and "TB/s" are
// decimal as the datasheets state them (80 GB = 80e9 bytes).
//
// Fabric bandwidths are what NCCL reaches, not line rates (issue 18): the large-message bus
// bandwidth of nccl-tests (busbw), which sits below the line rate by NCCL's protocol overhead,
// from NVIDIA's NCCL talks (GTC24 S62129 / GTC25 S72583, "expected all_reduce busbw") and NCCL
// engineers' statements: NVLink3 (A100) 232 GB/s of a 300 GB/s line rate, NVLink4 (H100) 370 GB/s
// of 450 for ring collectives (NVLink SHARP all-reduces reach 480, which metron's ring and tree
// do not model); across nodes, DGX A100 (8x 200 Gb/s) 192 GB/s and DGX H100 (8x 400 Gb/s)
// 380 GB/s per node, i.e. 24 and 47.5 GB/s per GPU's NIC (line rates 25 and 50). And NCCL reaches
// its plateau only on large messages: intra_node.size_efficiency is the measured busbw by size
// over the plateau, from nccl-tests sweeps on one 8-GPU node (below).
//
// Latencies are not on datasheets. They are typical small-message figures of the kind
// microbenchmarks report (NVIDIA nccl-tests, CUDA's p2pBandwidthLatencyTest, perftest's
// ib_write_lat, vendor tuning guides): about 1 us GPU to GPU over NVLink, about 5 us GPU to GPU
// across InfiniBand once NCCL's proxy is included. They are round orders of magnitude, to be
// replaced by a measured profile of the actual cluster.
//
// SM counts are datasheet/whitepaper figures. The two efficiencies are not on datasheets either:
// they are round, conservative readings of published single-kernel microbenchmarks, and
// approximate by nature (clocks, power limits and library versions move them by several
// percent):
//   gemm_efficiency    the fraction of the dense Tensor Core peak that large, well-shaped
//                      BF16/FP16 GEMMs reach in cuBLAS: NVIDIA's "Matrix Multiplication
//                      Background User's Guide" (GEMM throughput figures) and the cuBLAS
//                      performance pages show large A100 GEMMs at roughly 80-90% of 312 TFLOP/s
//                      and large H100 SXM GEMMs at roughly 75-80% of 989 TFLOP/s; we take the
//                      low end.
//   memory_efficiency  the fraction of the HBM datasheet bandwidth a streaming kernel reaches:
//                      BabelStream / STREAM triad results on A100, H100 and H200 are roughly
//                      85-90% of the datasheet figure; we take 85%.
//   fp8_gemm_efficiency (Hopper) gemm_efficiency scaled by how close each precision gets to its
//                      peak on the same GPU: the maximum achievable matmul FLOPS of a shape sweep
//                      on H100 SXM (stas00/ml-engineering, compute/accelerator, MAMF tables) are
//                      794.5 TFLOP/s in BF16 (80.3 % of 989.4) and 1,402.6 in FP8 (70.9 % of
//                      1,978.9), so 0.75 x 70.9 / 80.3 = 0.662, which keeps FP8 GEMMs below the
//                      FP8 ceiling as gemm_efficiency keeps BF16 ones below theirs. Transformer
//                      Engine's GEMM benchmark (NVIDIA/TransformerEngine docs/examples/
//                      gemm_profiling/gemm_profiling.rst, "Worked Example: 5B Model on H200": the
//                      12 GEMMs of a layer with h 4096, ffn 16384, M 15,872 tokens; 31.968 ms in
//                      BF16, 16.785 ms in FP8 pre-quantized, GEMM kernels only) gains 1.905x
//                      rather than 2 x 0.662 / 0.75 = 1.77x, but on a power-capped H200 NVL; taken
//                      as it stands it would put FP8 GEMMs at 0.714, above the H100's measured
//                      FP8 ceiling. The same benchmark with quantization included (autocast,
//                      delayed scaling 18.978 ms) is what the casts of Note [fp8 training]
//                      reproduce at memory_efficiency.
//   gemm_tile_overhead (H100, H200) the fixed time a GEMM output tile costs beyond its k-loop
//                      (Note [gemm tile overhead] in compute_cost.h): 1.1 us, the value that
//                      best fits (least relative error) the 336 bf16 and fp8 GEMMs with
//                      m >= 2048 of bench/cuda_profile's grid (m 2048-16384, n and k
//                      768-49152), measured with cuBLASLt on an H100 SXM, 2026-11-26
//                      (models/profiles/h100-sxm-measured.json, "gemm_grid"). It brings the
//                      model's mean error over those shapes from 8.4 to 4.5 % in bf16 and from
//                      16.5 to 7.8 % in fp8 (too fast before, by 5.8 and 13.6 % on average, most
//                      at short k). The A100 has no such measurement here: 0.
//   kernel_floor,      (H100, H200) the least time one kernel takes among 2,000 back to back on
//   gemm_floor         one stream (Note [kernel floor] in compute_cost.h), measured on an H100
//                      SXM by bench/cuda_profile, 2026-11-26 (models/profiles/h100-sxm-measured
//                      .json, "tiny_kernel"): a streaming add of 4 KiB 3.43 us and of 1 MiB
//                      3.46 us, so 3.4 us; a cuBLASLt bf16 GEMM of 64^3 6.28 us and of 128^3
//                      6.14 us, so 6.2 us. The A100 has no such measurement here: 0.
// None of these is fitted to a published end-to-end training result (an MFU or a tokens/s figure):
// that would make the model agree with the very measurements it should be checked against.
// Shape-dependent losses (tile and wave quantization) are computed by compute_cost.cc from
// sm_count, not folded into these constants.

#include "metron/models/hardware_presets.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cpu_local_profile.h"
#include "metron/base/error.h"
#include "preset_lookup.h"

namespace metron::models {
namespace {

constexpr double kNvlinkLatency = 1e-6;      // s, typical (see the note above)
constexpr double kInfinibandLatency = 5e-6;  // s, typical (see the note above)
// Approximate microbenchmark readings (see the note above), not datasheet figures.
constexpr double kA100GemmEfficiency = 0.80;   // cuBLAS large GEMMs, ~80-90% of peak
constexpr double kH100GemmEfficiency = 0.75;   // cuBLAS large GEMMs, ~75-80% of peak
constexpr double kHbmStreamEfficiency = 0.85;  // BabelStream/STREAM triad, ~85-90% of peak
// H100 SXM MAMF: FP8 1,402.6 of 1,978.9 TFLOP/s, BF16 794.5 of 989.4 (note above).
constexpr double kH100Fp8GemmEfficiency = kH100GemmEfficiency * (1402.6 / 1978.9) / (794.5 / 989.4);
// s per GEMM output tile, fitted to the H100 GEMM grid measured by bench/cuda_profile (above).
constexpr double kH100GemmTileOverhead = 1.1e-6;
// s: the least one streaming kernel and one cuBLASLt GEMM take back to back on an H100 (above).
constexpr double kH100KernelFloor = 3.4e-6;
constexpr double kH100GemmFloor = 6.2e-6;

// Fused attention throughput, causal, head dim 128, FP16/BF16, TFLOP/s in FlashAttention's
// benchmark convention (forward 4·b·s²·heads·head_dim halved for the causal mask, backward 2.5x
// the forward), at the sequence lengths of FlashAttention's benchmark
// (benchmarks/benchmark_flash_attention.py: batch 16k/seq, hidden 2048). These are kernel
// microbenchmarks, not training runs.
constexpr double kTera = 1e12;
std::vector<double> attention_seq_lens() { return {512, 1024, 2048, 4096, 8192, 16384}; }

// A100: FlashAttention-2, which Transformer Engine runs on sm80 (it prefers cuDNN only on
// Hopper). Only the forward+backward figure is published, so it serves as both: the pair's
// time is then exactly the published one. Source: Dao-AILab/flash-attention
// assets/flash2_a100_fwd_bwd_benchmark.png (Dao, "FlashAttention-2", arXiv:2307.08691, Fig. 4),
// hd128 causal.
AttentionKernelTable a100_flash_attention_2() {
  const std::vector<double> fwd_bwd = {99 * kTera,  133 * kTera, 155 * kTera,
                                       173 * kTera, 182 * kTera, 189 * kTera};
  return {.kernel = "FlashAttention-2 (A100 SXM4 80GB, causal, head dim 128; forward+backward)",
          .seq_lens = attention_seq_lens(),
          .forward = fwd_bwd,
          .backward = fwd_bwd};
}

// H100: cuDNN's fused attention, which Transformer Engine selects on Hopper ("Disabling
// FlashAttention to give FusedAttention preference on Hopper+", transformer_engine/pytorch
// attention backend selection). Forward: Shah et al., "FlashAttention-3", arXiv:2407.08608,
// Fig. 5 (flash-attention assets/flash3_fp16_fwd.png), cuDNN bars, hd128 causal. Backward: the
// same paper's backward figure, cuDNN, hd128; that figure is non-causal (no causal backward is
// published), so the causal backward may be somewhat slower than this.
AttentionKernelTable h100_cudnn_fused_attention() {
  return {
      .kernel = "cuDNN 9 fused attention (H100 SXM5, causal, head dim 128)",
      .seq_lens = attention_seq_lens(),
      .forward = {315 * kTera, 410 * kTera, 484 * kTera, 518 * kTera, 529 * kTera, 539 * kTera},
      .backward = {305 * kTera, 408 * kTera, 465 * kTera, 499 * kTera, 518 * kTera, 516 * kTera}};
}

// busbw (GB/s) of a sweep that doubles its size from 2^first_log2 bytes, over its plateau.
SizeEfficiency sweep_over_plateau(const std::vector<double>& busbw, double plateau,
                                  int first_log2) {
  SizeEfficiency curve;
  for (std::size_t i = 0; i < busbw.size(); ++i) {
    curve.bytes.push_back(std::ldexp(1.0, first_log2 + static_cast<int>(i)));
    curve.fraction.push_back(busbw[i] / plateau);
  }
  return curve;
}

// all_reduce_perf -b 32k -e 16G -f 2 -g 8 on one 8x A100 80GB node (stas00/ml-engineering,
// network/README.md "Real network throughput"), busbw over its 16 GiB plateau of 234.89 GB/s,
// from 8 MiB up: smaller sizes sit on a flat ~100 us floor that the author attributes to an older
// NCCL, so they are left to the latency term (sizes below 8 MiB take the 8 MiB fraction).
SizeEfficiency a100_node_all_reduce_sweep() {
  // 8 MiB .. 16 GiB; the 16 GiB plateau is 234.89 GB/s.
  return sweep_over_plateau({109.93, 106.16, 138.49, 171.54, 176.92, 194.07, 222.72, 229.04, 231.41,
                             233.88, 234.61, 234.89},
                            234.89, 23);
}

// The same sweep on one 8x H200 node (NVLink4; torch all_reduce_bench with NCCL 2.27.7,
// stas00/ml-engineering network/README.md), busbw over its 16 GiB value of 482.26 GB/s, from
// 1 MiB up (below, a ~40 us PyTorch call floor); used for the H100 too, which has the same
// NVLink4 and NVSwitch. The sweep ran NVLS all-reduces; the ring collectives' curve has not
// been published, so its shape stands for theirs.
SizeEfficiency nvlink4_node_all_reduce_sweep() {
  // 1 MiB .. 16 GiB; the 16 GiB value is 482.26 GB/s.
  return sweep_over_plateau({39.93, 64.53, 107.16, 155.53, 219.89, 275.84, 346.51, 401.93, 436.15,
                             450.29, 463.58, 469.17, 473.1, 477.45, 482.26},
                            482.26, 20);
}

// NVIDIA DGX A100 System Architecture whitepaper and the NVIDIA A100 Tensor Core GPU datasheet
// (A100 80GB SXM column).
HardwareSpec dgx_a100() {
  return {.name = "dgx-a100",
          .gpu = {.name = "A100-SXM4-80GB",
                  .peak_flops = {{Precision::kBf16, 312e12},    // BF16 Tensor Core, dense
                                 {Precision::kFp16, 312e12},    // FP16 Tensor Core, dense
                                 {Precision::kFp32, 19.5e12}},  // FP32 (non-tensor); no FP8
                  .hbm_bandwidth = 2.039e12,                    // HBM2e, 2,039 GB/s
                  .hbm_capacity = 80'000'000'000,               // "80GB"
                  .sm_count = 108,  // NVIDIA A100 Tensor Core GPU Architecture whitepaper
                  .gemm_efficiency = kA100GemmEfficiency,
                  .memory_efficiency = kHbmStreamEfficiency,
                  .fused_attention = a100_flash_attention_2()},
          .gpus_per_node = 8,  // DGX A100: 8 GPUs
          // Third-generation NVLink: 600 GB/s total (bidirectional) per GPU, 300 one way; NCCL's
          // ring reaches 232 (see the top of this file).
          .intra_node = {.bandwidth = 232e9,
                         .latency = kNvlinkLatency,
                         .size_efficiency = a100_node_all_reduce_sweep()},
          // DGX A100: 8x single-port ConnectX-6 HDR InfiniBand 200 Gb/s, one per GPU (25 GB/s);
          // 192 GB/s multi-node busbw per node (NCCL engineer, NVIDIA/nccl#812).
          // Host: 2x AMD EPYC 7742 (DGX A100 System Architecture whitepaper), which NCCL's tuner
          // charges 2 us per network post.
          .inter_node = {.bandwidth = 24e9,
                         .latency = kInfinibandLatency,
                         .topology = "fat-tree",
                         .nccl_host_cpu = "amd"}};
}

// NVIDIA DGX H100 User Guide / DGX SuperPOD reference architecture and the NVIDIA H100 Tensor Core
// GPU datasheet (H100 SXM column).
HardwareSpec dgx_h100() {
  return {.name = "dgx-h100",
          .gpu = {.name = "H100-SXM5-80GB",
                  .peak_flops = {{Precision::kBf16, 989.4e12},   // BF16 Tensor Core, dense
                                 {Precision::kFp16, 989.4e12},   // FP16 Tensor Core, dense
                                 {Precision::kFp32, 66.9e12},    // FP32 (non-tensor)
                                 {Precision::kFp8, 1978.9e12}},  // FP8 Tensor Core, dense
                  .hbm_bandwidth = 3.35e12,                      // HBM3, 3.35 TB/s
                  .hbm_capacity = 80'000'000'000,                // "80GB"
                  .sm_count = 132,  // NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5)
                  .gemm_efficiency = kH100GemmEfficiency,
                  .memory_efficiency = kHbmStreamEfficiency,
                  .fp8_gemm_efficiency = kH100Fp8GemmEfficiency,
                  .gemm_tile_overhead = kH100GemmTileOverhead,
                  .kernel_floor = kH100KernelFloor,
                  .gemm_floor = kH100GemmFloor,
                  .fused_attention = h100_cudnn_fused_attention()},
          .gpus_per_node = 8,  // DGX H100: 8 GPUs
          // Fourth-generation NVLink: 900 GB/s total (bidirectional) per GPU, 450 one way; NCCL's
          // ring reaches 370 (see the top of this file).
          .intra_node = {.bandwidth = 370e9,
                         .latency = kNvlinkLatency,
                         .size_efficiency = nvlink4_node_all_reduce_sweep()},
          // DGX H100: 8x ConnectX-7 400 Gb/s (InfiniBand NDR), one per GPU (50 GB/s); 380 GB/s
          // multi-node busbw per node (GTC24 S62129), 46-48 GB/s per NIC (NVIDIA/nccl-tests#290).
          // Host: 2x Intel Xeon Platinum 8480C (DGX H100 User Guide), 1 us per network post to
          // NCCL's tuner.
          .inter_node = {.bandwidth = 47.5e9,
                         .latency = kInfinibandLatency,
                         .topology = "fat-tree",
                         .nccl_host_cpu = "intel"}};
}

// NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): the H100 SXM's compute (the same
// GH100 die with 132 SMs, so the same GEMM efficiency, tile overhead and kernel floors and, for
// want of an H200 measurement, the same fused attention kernel table) and NVLink with 141 GB of
// HBM3e at 4.8 TB/s; the node as in the NVIDIA DGX H200 datasheet (8 GPUs, 8x ConnectX-7
// 400 Gb/s).
HardwareSpec h200_node() {
  HardwareSpec spec = dgx_h100();
  spec.name = "h200-node";
  spec.gpu.name = "H200-SXM-141GB";
  spec.gpu.hbm_bandwidth = 4.8e12;          // HBM3e, 4.8 TB/s
  spec.gpu.hbm_capacity = 141'000'000'000;  // "141GB"
  return spec;
}

// The machine metron's CPU backend runs on: libtorch on CPU tensors and Gloo between local
// processes, measured by `metron profile --sweep` with the executor's own payload and
// communication (Note [hardware sweep] in cli/profile_sweep.h says how each number is obtained;
// the file's "measurement" block says where, when and with which command, and holds the raw
// grid). Compiled in from
// models/profiles/cpu-local.json; measure again and rebuild to describe another machine.
HardwareSpec cpu_local() {
  return hardware_from_file_json(detail::cpu_local_profile_json(),
                                 "models/profiles/cpu-local.json");
}

std::vector<HardwareSpec> make_presets() {
  return {dgx_a100(), dgx_h100(), h200_node(), cpu_local()};
}

}  // namespace

std::span<const HardwareSpec> hardware_presets() {
  static const std::vector<HardwareSpec> kPresets = make_presets();
  return kPresets;
}

const HardwareSpec& hardware_preset(std::string_view name) {
  return detail::find_preset(hardware_presets(), name, "hardware");
}

std::optional<HardwareSpec> hardware_preset_for_gpu(std::string_view device_name) {
  // Names as CUDA reports them (cudaDeviceProp::name), e.g. "NVIDIA H100 80GB HBM3".
  for (const auto& [model, preset] : {std::pair{"H100", "dgx-h100"}, std::pair{"H200", "h200-node"},
                                      std::pair{"A100", "dgx-a100"}}) {
    if (device_name.find(model) != std::string_view::npos) return hardware_preset(preset);
  }
  return std::nullopt;
}

}  // namespace metron::models
