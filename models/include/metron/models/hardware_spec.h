#pragma once
// The machine a model is trained on: one kind of GPU, how many share a node, and the two fabrics
// between them, read from and written to JSON. Note [hardware JSON]:
//
//   {"name": "dgx-h100",
//    "gpu": {"name": "H100-SXM5-80GB",
//            "peak_flops": {"bf16": 9.894e14, "fp16": 9.894e14, "fp32": 6.69e13, "fp8": 1.9789e15},
//            "hbm_bandwidth": 3.35e12, "hbm_capacity": 80000000000,
//            "sm_count": 132, "gemm_efficiency": 0.75, "memory_efficiency": 0.85,
//            "fp8_gemm_efficiency": 0.662, "gemm_tile_overhead": 1.1e-06,
//            "kernel_floor": 3.4e-06, "gemm_floor": 6.2e-06,
//            "fused_attention": {"kernel": "cuDNN fused attention", "seq_lens": [512, 4096],
//                                "forward": [3.15e14, 5.18e14], "backward": [3.05e14, 4.99e14]}},
//    "gpus_per_node": 8,
//    "intra_node": {"bandwidth": 3.7e11, "latency": 1e-06,
//                   "size_efficiency": {"bytes": [8388608, 1073741824], "fraction": [0.32, 0.96]}},
//    "inter_node": {"bandwidth": 5e10, "latency": 5e-06, "topology": "fat-tree"},
//    "hardware_queues": 8, "compute_slowdown_during_comm": 0.0,
//    "comm_slowdown_during_compute": 0.0}
//
// Units are SI base units: FLOP/s, bytes/s, bytes, seconds.
//   gpu.peak_flops        dense (no sparsity) peak per precision; a precision the GPU lacks is
//                         left out (an A100 has no "fp8"). Keys are Precision names.
//   gpu.hbm_bandwidth     bytes/s;  gpu.hbm_capacity  bytes (an integer).
//   gpu.sm_count          streaming multiprocessors, an integer >= 0; the compute model's tile
//                         and wave quantization spreads GEMM tiles over them. 0 = unknown: no
//                         quantization.
//   gpu.gemm_efficiency   in (0, 1]: the fraction of the dense peak that large GEMMs reach
//                         (microbenchmarks, never fitted to training runs); 1 = the peak.
//   gpu.memory_efficiency in (0, 1]: the fraction of hbm_bandwidth that streaming kernels reach
//                         (STREAM-like microbenchmarks); 1 = the datasheet bandwidth.
//   gpu.fp8_gemm_efficiency
//                         optional, in (0, 1]: gemm_efficiency for FP8 GEMMs, a fraction of the
//                         fp8 peak (parallel.fp8, Note [fp8 training] in compute_cost.h).
//                         Absent: gemm_efficiency.
//   gpu.gemm_tile_overhead
//                         optional, seconds >= 0 (at most 1e-3): the fixed time one output tile
//                         of a GEMM costs on top of its k-loop (filling the loop's pipeline,
//                         writing the tile), so a GEMM of inner size k reaches k / (k + k0) of
//                         its efficiency, k0 being the k this time is worth at one SM's share of
//                         the GEMM rate (Note [gemm tile overhead] in compute_cost.h); measured
//                         by bench/cuda_profile's GEMM grid. Absent: 0, no such cost.
//   gpu.kernel_floor      optional, seconds >= 0 (at most 1e-3): the least time one kernel
//   gpu.gemm_floor        takes among many back to back on one stream, whatever little work it
//                         does (launch, ramp-up and drain); gemm_floor is the same for one GEMM
//                         call, whose library launch costs more (Note [kernel floor] in
//                         compute_cost.h); measured by bench/cuda_profile's tiny kernels.
//                         Absent: 0, no floor.
//   gpu.fused_attention   optional: the throughput of the flash-style attention kernel that
//                         "attention": "fused" runs, measured for causal attention with head
//                         dim 128 at each sequence length, in FLOP/s by FlashAttention's
//                         benchmark convention (forward 4·b·s²·heads·head_dim halved for the
//                         causal mask; backward 2.5 times the forward), so published kernel
//                         benchmarks can be copied as they are. seq_lens ascend; forward and
//                         backward have one positive entry per length; between two lengths the
//                         throughput is interpolated in log(seq), outside it is the nearest.
//                         Absent: the fused kernel is costed as its two products at the GEMM
//                         efficiency (compute_cost.h).
//   intra_node.bandwidth  bytes/s per GPU, one direction: the bus bandwidth NCCL's ring reaches
//                         on large messages (nccl-tests busbw), which is below the NVLink line
//                         rate (half the "bidirectional" figure) by NCCL's protocol overhead.
//   inter_node.bandwidth  bytes/s per GPU, one direction: its NIC's share of the multi-node
//                         bus bandwidth (at most its line rate / 8).
//   *.size_efficiency     optional: the fraction of `bandwidth` a collective of `bytes`
//   (nccl-tests'
//                         size S) reaches, measured (nccl-tests sweeps): NCCL needs large messages
//                         to fill its channels. bytes ascend; fractions in (0, 1]; interpolated in
//                         log(bytes), the nearest end outside. Absent: 1 at every size.
//   *.latency             seconds for a small message, >= 0.
//   inter_node.topology   free text naming the network ("fat-tree", "rail-optimized", ...).
//   inter_node.nccl_host_cpu
//                         optional, "intel" or "amd": the nodes' host CPU vendor, which NCCL's
//                         tuner keys its network overheads on; given, collectives over several
//                         nodes follow NCCL's protocol model (Note [nccl protocols] in
//                         comm_cost.h), absent, the alpha–beta ring on the latencies.
//   hardware_queues       concurrent streams a GPU runs (CUDA's default connection count, 8).
//   compute_slowdown_during_comm
//                         while communication overlaps compute, compute takes (1 + this) times
//                         as long; >= 0, 0 means perfect overlap.
//   comm_slowdown_during_compute
//                         while compute runs on a rank of a collective or transfer, the
//                         communication takes (1 + this) times as long; >= 0. The two share one
//                         device (SMs and HBM on a GPU, the cores and memory on a CPU).
//
// Required: everything but gpu.sm_count (default 0), gpu.gemm_efficiency (default 1.0),
// gpu.memory_efficiency (default 1.0), gpu.fp8_gemm_efficiency (absent),
// gpu.gemm_tile_overhead, gpu.kernel_floor and gpu.gemm_floor (default 0), gpu.fused_attention
// (absent), hardware_queues (default 8),
// compute_slowdown_during_comm and comm_slowdown_during_compute (default 0.0).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/models/model_spec.h"

namespace metron::models {

/// `ys` at `x` for a table measured at ascending `xs`: linear in log(x) between the two nearest
/// points, the nearest end's value outside (kernel and collective sweeps double their sizes).
double interpolate_in_log(const std::vector<double>& xs, const std::vector<double>& ys, double x);

/// The fraction of a fabric's bandwidth a collective reaches by its size (Note [hardware JSON]).
struct SizeEfficiency {
  std::vector<double> bytes;     ///< ascending
  std::vector<double> fraction;  ///< in (0, 1]

  [[nodiscard]] double at(double size) const { return interpolate_in_log(bytes, fraction, size); }

  friend bool operator==(const SizeEfficiency&, const SizeEfficiency&) = default;
};

/// A fused attention kernel's measured throughput by sequence length (gpu.fused_attention in
/// Note [hardware JSON]).
struct AttentionKernelTable {
  std::string kernel;            ///< which kernel was measured, for people
  std::vector<double> seq_lens;  ///< ascending
  std::vector<double> forward;   ///< FLOP/s, FlashAttention's causal convention
  std::vector<double> backward;  ///< FLOP/s, the same convention (2.5x the forward's FLOPs)

  /// Throughput at `seq` from `values` (forward or backward): interpolated in log(seq) between
  /// the two nearest lengths, the nearest end's value outside the table.
  [[nodiscard]] double at(const std::vector<double>& values, double seq) const {
    return interpolate_in_log(seq_lens, values, seq);
  }

  friend bool operator==(const AttentionKernelTable&, const AttentionKernelTable&) = default;
};

/// One GPU: its dense peak compute per precision, its memory, and what fraction of both its
/// kernels reach (the roofline of compute_cost.h).
struct GpuSpec {
  std::string name;
  std::map<Precision, double> peak_flops;     // FLOP/s; a precision the GPU lacks is absent
  double hbm_bandwidth = 0;                   // bytes/s
  std::int64_t hbm_capacity = 0;              // bytes
  std::int64_t sm_count = 0;                  // 0 = unknown: no tile/wave quantization
  double gemm_efficiency = 1.0;               // (0, 1]: fraction of the peak large GEMMs reach
  double memory_efficiency = 1.0;             // (0, 1]: fraction of hbm_bandwidth streams reach
  std::optional<double> fp8_gemm_efficiency;  // (0, 1] of the fp8 peak; absent: gemm_efficiency
  double gemm_tile_overhead = 0;  // seconds per GEMM output tile beyond its k-loop; 0: none
  double kernel_floor = 0;        // seconds: the least one kernel takes back to back; 0: none
  double gemm_floor = 0;          // seconds: the same for one GEMM call; 0: none
  std::optional<AttentionKernelTable> fused_attention;  // absent: costed as its GEMMs

  /// The dense peak FLOP/s at `precision`, or nullopt when the GPU does not support it.
  [[nodiscard]] std::optional<double> peak(Precision precision) const {
    const auto it = peak_flops.find(precision);
    return it == peak_flops.end() ? std::nullopt : std::optional<double>(it->second);
  }

  friend bool operator==(const GpuSpec&, const GpuSpec&) = default;
};

/// The GPU-to-GPU links inside a node (NVLink / NVSwitch).
struct IntraNodeFabric {
  double bandwidth = 0;                           // bytes/s per GPU, one direction
  double latency = 0;                             // seconds
  std::optional<SizeEfficiency> size_efficiency;  // absent: the bandwidth at every size

  friend bool operator==(const IntraNodeFabric&, const IntraNodeFabric&) = default;
};

/// The network between nodes (InfiniBand / RoCE).
struct InterNodeNetwork {
  double bandwidth = 0;                           // bytes/s per GPU (its NIC), one direction
  double latency = 0;                             // seconds
  std::string topology;                           // e.g. "fat-tree"
  std::optional<SizeEfficiency> size_efficiency;  // absent: the bandwidth at every size
  // The nodes' host CPU vendor as NCCL's tuner keys on it, "intel" or "amd": collectives across
  // nodes are then priced by NCCL's own protocol model (Note [nccl protocols] in comm_cost.h);
  // empty: by the alpha–beta ring on `latency`.
  std::string nccl_host_cpu;

  friend bool operator==(const InterNodeNetwork&, const InterNodeNetwork&) = default;
};

/// A cluster of identical nodes (see Note [hardware JSON]).
struct HardwareSpec {
  static constexpr std::int64_t kDefaultHardwareQueues = 8;

  std::string name;
  GpuSpec gpu;
  std::int64_t gpus_per_node = 0;
  IntraNodeFabric intra_node;
  InterNodeNetwork inter_node;
  std::int64_t hardware_queues = kDefaultHardwareQueues;
  double compute_slowdown_during_comm = 0.0;
  double comm_slowdown_during_compute = 0.0;

  friend bool operator==(const HardwareSpec&, const HardwareSpec&) = default;
};

/// Throws InvalidConfig listing every problem: non-positive (or non-finite) peaks, bandwidths,
/// capacity, gpus_per_node and hardware_queues; no peak at all; a negative sm_count;
/// gemm_efficiency or memory_efficiency outside (0, 1]; a fused_attention table that is empty,
/// of unequal lengths, not ascending or not positive; a size_efficiency likewise, or with a
/// fraction above 1; negative (or non-finite) latencies and
/// slow-downs; an empty topology.
void validate(const HardwareSpec& spec);

/// The canonical JSON text of a spec: keys in Note [hardware JSON] order, peaks in Precision
/// order, one line, final newline. hardware_from_json(to_json(s)) == s.
std::string to_json(const HardwareSpec& spec);

/// Reads and validates a spec. Malformed JSON throws ParseError at source:line:col; a wrong type
/// or an out-of-range number throws ParseError naming the key (`hw.json: gpu.hbm_bandwidth:
/// expected a positive number, got "x"`); an empty topology throws InvalidConfig (see validate).
/// Unknown keys are counted in `diagnostics` as "unknown_key" when given; an unknown precision
/// under gpu.peak_flops is an error, not a diagnostic.
/// @code
///   Diagnostics diagnostics;
///   HardwareSpec hw = hardware_from_json(read_file("hw.json"), "hw.json", &diagnostics);
/// @endcode
HardwareSpec hardware_from_json(std::string_view text, const std::string& source = "<json>",
                                Diagnostics* diagnostics = nullptr);

/// Reads a hardware file in either form: a bare spec, as hardware_from_json, or a measured
/// document (Note [measured hardware]), which `metron profile --sweep` writes and
/// models/profiles/cpu-local.json is:
///
///   {"hardware": {...a spec...},
///    "measurement": {"command": "metron profile --sweep ...", "date": "...", ...}}
///
/// "measurement" is optional and free-form (an object; its contents are not read). Errors as
/// hardware_from_json, with the document's paths ("hardware.gpu.hbm_bandwidth: ..."); unknown keys
/// at the top level and in the spec are counted in `diagnostics`.
HardwareSpec hardware_from_file_json(std::string_view text, const std::string& source = "<json>",
                                     Diagnostics* diagnostics = nullptr);

}  // namespace metron::models
