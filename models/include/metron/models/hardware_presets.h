#pragma once
// Well-known machines by name, from vendor datasheets (sources in hardware_presets.cc):
//   dgx-a100    8x A100-SXM4-80GB, NVLink3, 8x HDR InfiniBand 200 Gb/s
//   dgx-h100    8x H100-SXM5-80GB, NVLink4, 8x ConnectX-7 400 Gb/s
//   h200-node   8x H200-SXM-141GB, H100's compute and fabric, HBM3e
// and the machine the CPU backend runs on, from a measured profile:
//   cpu-local   libtorch CPU GEMM and element-wise throughput, Gloo loopback latency and
//               bandwidth, measured by `metron profile --sweep` into models/profiles/cpu-local.json

#include <optional>
#include <span>
#include <string_view>

#include "metron/models/hardware_spec.h"

namespace metron::models {

/// Every preset, in the order listed above.
std::span<const HardwareSpec> hardware_presets();

/// The preset called `name`. Throws InvalidConfig listing the names, with a "did you mean" hint
/// for a close one.
/// @code
///   const HardwareSpec& h100 = hardware_preset("dgx-h100");
/// @endcode
const HardwareSpec& hardware_preset(std::string_view name);

/// The preset of the GPU a CUDA device name names, by its model ("NVIDIA H100 80GB HBM3" ->
/// dgx-h100, "A100" -> dgx-a100, "H200" -> h200-node), for checking a GPU against its
/// datasheet; nullopt for a GPU no preset describes.
std::optional<HardwareSpec> hardware_preset_for_gpu(std::string_view device_name);

}  // namespace metron::models
