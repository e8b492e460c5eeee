#pragma once
// What the GPU benchmark programs (cuda_profile, gpu_validate) share before they measure: their
// command line (`-o FILE [--quick] [--only TEXT] [--skip TEXT]
// [--trace-dir DIR]`) and the GPU they run on, with the preset
// that holds its datasheet figures.

#include <iostream>
#include <optional>
#include <string>

#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/models/hardware_presets.h"

namespace metron::bench {

struct GpuBench {
  std::string output;     ///< -o FILE; empty when not given
  bool quick = false;     ///< --quick: a smoke run
  std::string only;       ///< --only TEXT (gpu_validate): the steps whose name contains TEXT
  std::string skip;       ///< --skip TEXT (gpu_validate): leave out the steps whose name has it
  std::string trace_dir;  ///< --trace-dir DIR (gpu_validate); empty when not given
  exec::cuda::CudaInfo info;
  std::string device;  ///< e.g. "NVIDIA H100 80GB HBM3 (sm_90)"
  std::optional<models::HardwareSpec> preset;
};

/// Parses the command line and finds the GPU. Prints the usage or the error under `program`'s
/// name and returns nullopt (exit 2) for a bad command line, a missing -o when `need_output`, no
/// GPU, or, when `need_preset`, a GPU no preset describes.
inline std::optional<GpuBench> gpu_bench_setup(int argc, char** argv, const std::string& program,
                                               bool need_output, bool need_preset) {
  GpuBench out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) {
      out.output = argv[++i];
    } else if (arg == "--quick") {
      out.quick = true;
    } else if (arg == "--only" && i + 1 < argc) {
      out.only = argv[++i];
    } else if (arg == "--skip" && i + 1 < argc) {
      out.skip = argv[++i];
    } else if (arg == "--trace-dir" && i + 1 < argc) {
      out.trace_dir = argv[++i];
    } else {
      std::cerr << "usage: " << program << (need_output ? " -o FILE" : " [-o FILE]")
                << " [--quick] [--only TEXT] [--skip TEXT] [--trace-dir DIR]\n";
      return std::nullopt;
    }
  }
  if (need_output && out.output.empty()) {
    std::cerr << program << ": error: expected -o FILE\n";
    return std::nullopt;
  }
  out.info = exec::cuda::query_cuda();
  if (out.info.device_count == 0) {
    std::cerr << program << ": error: no CUDA device (" << out.info.error << ")\n";
    return std::nullopt;
  }
  out.device = exec::cuda::CudaCompute({}).device_description();
  out.preset = models::hardware_preset_for_gpu(out.device);
  if (need_preset && !out.preset) {
    std::cerr << program << ": error: no hardware preset for " << out.device
              << "; expected an A100, H100 or H200\n";
    return std::nullopt;
  }
  return out;
}

}  // namespace metron::bench
