// Preset machines. Every number is copied from the cited public datasheet; none is fitted to a
// training result, so the cost models can be checked against measurements rather than tuned to
// them.
//
// Conventions: peaks are dense (the datasheets' sparsity figures halved); "GB" and "TB/s" are
// decimal as the datasheets state them (80 GB = 80e9 bytes); NVLink's "bidirectional" total per
// GPU is halved to one direction; a NIC's Gb/s line rate is divided by 8 to bytes/s.
//
// Latencies are not on datasheets. They are typical small-message figures of the kind
// microbenchmarks report (NVIDIA nccl-tests, CUDA's p2pBandwidthLatencyTest, perftest's
// ib_write_lat, vendor tuning guides): about 1 us GPU to GPU over NVLink, about 5 us GPU to GPU
// across InfiniBand once NCCL's proxy is included. They are round orders of magnitude, to be
// replaced by a measured profile of the actual cluster.

#include "metron/models/hardware_presets.h"

#include <algorithm>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "preset_lookup.h"

namespace metron::models {
namespace {

constexpr double kNvlinkLatency = 1e-6;      // s, typical (see the note above)
constexpr double kInfinibandLatency = 5e-6;  // s, typical (see the note above)

// NVIDIA DGX A100 System Architecture whitepaper and the NVIDIA A100 Tensor Core GPU datasheet
// (A100 80GB SXM column).
HardwareSpec dgx_a100() {
  return {.name = "dgx-a100",
          .gpu = {.name = "A100-SXM4-80GB",
                  .peak_flops = {{Precision::kBf16, 312e12},    // BF16 Tensor Core, dense
                                 {Precision::kFp16, 312e12},    // FP16 Tensor Core, dense
                                 {Precision::kFp32, 19.5e12}},  // FP32 (non-tensor); no FP8
                  .hbm_bandwidth = 2.039e12,                    // HBM2e, 2,039 GB/s
                  .hbm_capacity = 80'000'000'000},              // "80GB"
          .gpus_per_node = 8,                                   // DGX A100: 8 GPUs
          // Third-generation NVLink: 600 GB/s total (bidirectional) per GPU.
          .intra_node = {.bandwidth = 300e9, .latency = kNvlinkLatency},
          // DGX A100: 8x single-port ConnectX-6 HDR InfiniBand 200 Gb/s, one per GPU.
          .inter_node = {.bandwidth = 25e9, .latency = kInfinibandLatency, .topology = "fat-tree"}};
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
                  .hbm_capacity = 80'000'000'000},               // "80GB"
          .gpus_per_node = 8,                                    // DGX H100: 8 GPUs
          // Fourth-generation NVLink: 900 GB/s total (bidirectional) per GPU.
          .intra_node = {.bandwidth = 450e9, .latency = kNvlinkLatency},
          // DGX H100: 8x ConnectX-7 400 Gb/s (InfiniBand NDR), one per GPU.
          .inter_node = {.bandwidth = 50e9, .latency = kInfinibandLatency, .topology = "fat-tree"}};
}

// NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): the H100 SXM's compute and NVLink with
// 141 GB of HBM3e at 4.8 TB/s; the node as in the NVIDIA DGX H200 datasheet (8 GPUs, 8x
// ConnectX-7 400 Gb/s).
HardwareSpec h200_node() {
  HardwareSpec spec = dgx_h100();
  spec.name = "h200-node";
  spec.gpu.name = "H200-SXM-141GB";
  spec.gpu.hbm_bandwidth = 4.8e12;          // HBM3e, 4.8 TB/s
  spec.gpu.hbm_capacity = 141'000'000'000;  // "141GB"
  return spec;
}

std::vector<HardwareSpec> make_presets() { return {dgx_a100(), dgx_h100(), h200_node()}; }

}  // namespace

std::span<const HardwareSpec> hardware_presets() {
  static const std::vector<HardwareSpec> kPresets = make_presets();
  return kPresets;
}

const HardwareSpec& hardware_preset(std::string_view name) {
  return detail::find_preset(hardware_presets(), name, "hardware");
}

}  // namespace metron::models
