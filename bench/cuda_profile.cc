// Measures the GPU the way the CUDA backend runs operations (metron::exec::cuda, Note [cuda
// compute]) and writes the figures as JSON, next to the datasheet figures metron's preset for
// that GPU uses: square GEMMs of each dtype (the GEMM efficiency curve), the layer GEMMs of
// GPT-3 175B at tp 8 and Llama 3 8B at tp 1 in bf16 and fp8, attention's batched products and the
// streaming kernel (achievable HBM bandwidth). models/profiles/h100-sxm-measured.json was written
// by it (issue 19).
//
//   cuda_profile -o FILE [--quick]      --quick: fewer sizes and iterations (a smoke run)
//
// Every figure is the median of the measured iterations (5, after one warm-up) of one task that
// repeats the operation enough times to last milliseconds. Needs a GPU; exits 2 without one.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpu_bench_setup.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/models/hardware_presets.h"

namespace {

using metron::ir::DType;
using metron::ir::Operation;
using metron::ir::OperationKind;
namespace cuda = metron::exec::cuda;
namespace models = metron::models;

double flops_of(const Operation& op) {
  return 2.0 * static_cast<double>(op.batch) * static_cast<double>(op.m) *
         static_cast<double>(op.n) * static_cast<double>(op.k);
}

/// Repetitions that make one task last about 20 ms at 500 TFLOP/s (or 3 GB/s·ms for streams),
/// at least 3 and at most 2000.
std::int32_t repetitions_for(double work) {
  return static_cast<std::int32_t>(std::clamp(std::round(1e13 / work), 3.0, 2000.0));
}

models::Precision precision_of(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return models::Precision::kFp32;
    case DType::kFp16:
      return models::Precision::kFp16;
    case DType::kFp8:
      return models::Precision::kFp8;
    default:
      return models::Precision::kBf16;
  }
}

nlohmann::json gemm_entry(const Operation& op, const cuda::CudaRunOptions& run,
                          const std::optional<models::HardwareSpec>& preset) {
  nlohmann::json out = {{"name", op.name},
                        {"dtype", metron::ir::to_string(op.dtype)},
                        {"m", op.m},
                        {"n", op.n},
                        {"k", op.k},
                        {"batch", op.batch},
                        {"repetitions", op.count}};
  try {
    const double seconds = cuda::measure_operation_seconds(op, run);
    out["seconds"] = seconds;
    out["tflops"] = flops_of(op) / seconds / 1e12;
    if (preset) {
      if (const std::optional<double> peak = preset->gpu.peak(precision_of(op.dtype))) {
        out["fraction_of_datasheet_peak"] = flops_of(op) / seconds / *peak;
      }
    }
    std::cerr << fmt::format("  {:<22} {:>5} {:>6}x{:>6}x{:>6} b{:<4} {:9.2f} TFLOP/s\n", op.name,
                             metron::ir::to_string(op.dtype), op.m, op.n, op.k, op.batch,
                             flops_of(op) / seconds / 1e12);
  } catch (const metron::Error& e) {
    out["error"] = e.what();
    std::cerr << "  " << op.name << " " << metron::ir::to_string(op.dtype) << ": " << e.what()
              << "\n";
  }
  return out;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  return fmt::format("{:04}-{:02}-{:02}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday);
}

int run(int argc, char** argv) {
  const std::optional<metron::bench::GpuBench> setup =
      metron::bench::gpu_bench_setup(argc, argv, "cuda_profile", /*need_output=*/true,
                                     /*need_preset=*/false);
  if (!setup) return 2;
  const auto& [output, quick, only, skip, trace_dir, info, device, preset] = *setup;
  static_cast<void>(only);  // one sweep, no steps to choose from
  static_cast<void>(skip);
  static_cast<void>(trace_dir);  // no step runs here
  const cuda::CudaRunOptions run{.iterations = quick ? 2 : 5, .warmup = 1};
  nlohmann::json doc = {
      {"gpu", device},
      {"cuda_runtime", info.runtime_version},
      {"cuda_driver", info.driver_version},
      {"nccl", info.nccl_version},
      {"date", today()},
      {"command", "cuda_profile -o " + output + (quick ? " --quick" : "")},
      {"method",
       "each figure: median of measured iterations of one task repeating the operation, CUDA "
       "events around the task (Note [cuda backend]); GEMMs through cuBLASLt, layout TN, fp32 "
       "accumulation, fp8 e4m3 with bf16 output (Note [cuda compute])"}};
  if (preset) {
    doc["datasheet"] = {{"preset", preset->name},
                        {"bf16_flops", preset->gpu.peak(models::Precision::kBf16).value_or(0)},
                        {"fp8_flops", preset->gpu.peak(models::Precision::kFp8).value_or(0)},
                        {"fp32_flops", preset->gpu.peak(models::Precision::kFp32).value_or(0)},
                        {"hbm_bandwidth", preset->gpu.hbm_bandwidth}};
  }

  std::cerr << "square GEMMs\n";
  const std::vector<std::int64_t> sizes =
      quick ? std::vector<std::int64_t>{1024, 8192}
            : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384};
  nlohmann::json& gemms = doc["gemm"] = nlohmann::json::array();
  for (const DType dtype : {DType::kBf16, DType::kFp16, DType::kFp8, DType::kFp32}) {
    for (const std::int64_t n : sizes) {
      Operation op{
          .name = "square", .kind = OperationKind::kGemm, .m = n, .n = n, .k = n, .dtype = dtype};
      op.count = repetitions_for(flops_of(op));
      gemms.push_back(gemm_entry(op, run, preset));
    }
  }

  // The linear GEMMs of a transformer layer's forward, as the cost model lists them, in bf16 and
  // in fp8 (what parallel.fp8 runs, Note [fp8 training]): GPT-3 175B (h 12288, ffn 49152) at tp 8,
  // microbatch 1 x 2048 tokens, and Llama 3 8B (h 4096, GQA qkv 6144, SwiGLU ffn 14336) at tp 1,
  // 1 x 8192 tokens, the shape of NeMo's Llama 3 8B FP8 run (metron validate).
  struct LayerGemms {
    const char* key;
    std::int64_t tokens;
    std::vector<std::tuple<const char*, std::int64_t, std::int64_t>> gemms;  // name, n, k
  };
  const std::vector<LayerGemms> layers = {
      {"gpt3_175b_tp8_gemm",
       2048,
       {{"qkv", 4608, 12288},
        {"attention-proj", 12288, 1536},
        {"mlp-up", 6144, 12288},
        {"mlp-down", 12288, 6144}}},
      {"llama3_8b_tp1_gemm",
       8192,
       {{"qkv", 6144, 4096},
        {"attention-proj", 4096, 4096},
        {"mlp-gate-up", 28672, 4096},
        {"mlp-down", 4096, 14336}}},
  };
  for (const LayerGemms& layer : layers) {
    std::cerr << layer.key << "\n";
    nlohmann::json& entries = doc[layer.key] = nlohmann::json::array();
    for (const DType dtype : {DType::kBf16, DType::kFp8}) {
      for (const auto& [name, n, k] : layer.gemms) {
        Operation op{.name = name,
                     .kind = OperationKind::kGemm,
                     .m = layer.tokens,
                     .n = n,
                     .k = k,
                     .dtype = dtype};
        op.count = repetitions_for(flops_of(op));
        entries.push_back(gemm_entry(op, run, preset));
      }
    }
  }

  // Efficiency by shape (issue 18, item 1): a grid of m x n x k in bf16 and fp8, the measured
  // table a shape-aware GEMM efficiency is checked against. m is the token count of a
  // microbatch, n and k span the widths of hidden, qkv, ffn and tensor-parallel shards.
  std::cerr << "GEMM grid\n";
  nlohmann::json& grid = doc["gemm_grid"] = nlohmann::json::array();
  const std::vector<std::int64_t> grid_m =
      quick ? std::vector<std::int64_t>{2048} : std::vector<std::int64_t>{512, 2048, 8192, 16384};
  const std::vector<std::int64_t> grid_nk =
      quick ? std::vector<std::int64_t>{1024, 8192}
            : std::vector<std::int64_t>{768, 1536, 3072, 6144, 12288, 24576, 49152};
  for (const DType dtype : {DType::kBf16, DType::kFp8}) {
    for (const std::int64_t m : grid_m) {
      for (const std::int64_t n : grid_nk) {
        for (const std::int64_t k : grid_nk) {
          Operation op{
              .name = "grid", .kind = OperationKind::kGemm, .m = m, .n = n, .k = k, .dtype = dtype};
          op.count = repetitions_for(flops_of(op));
          grid.push_back(gemm_entry(op, run, preset));
        }
      }
    }
  }

  std::cerr << "attention products\n";
  nlohmann::json& attention = doc["batched_gemm"] = nlohmann::json::array();
  for (const std::int64_t seq : {1024, 2048, 4096}) {
    for (const auto& [name, m, n, k] :
         {std::tuple{"attention-scores", seq, seq, std::int64_t{128}},
          std::tuple{"attention-values", seq, std::int64_t{128}, seq}}) {
      Operation op{.name = name,
                   .kind = OperationKind::kBatchedGemm,
                   .m = m,
                   .n = n,
                   .k = k,
                   .batch = 96,
                   .dtype = DType::kBf16};
      op.count = repetitions_for(flops_of(op));
      attention.push_back(gemm_entry(op, run, preset));
    }
  }

  std::cerr << "streaming kernel\n";
  nlohmann::json& streams = doc["stream"] = nlohmann::json::array();
  for (std::int64_t bytes = std::int64_t{3} << 20; bytes <= (std::int64_t{3} << 31);
       bytes *= quick ? 64 : 4) {
    Operation op{.name = "add", .kind = OperationKind::kElementwise, .m = 1, .bytes = bytes};
    op.count = static_cast<std::int32_t>(
        std::clamp(std::round(3e10 / static_cast<double>(bytes)), 3.0, 2000.0));
    nlohmann::json entry = {{"bytes", bytes}, {"repetitions", op.count}};
    try {
      const double seconds = cuda::measure_operation_seconds(op, run);
      entry["seconds"] = seconds;
      entry["bytes_per_second"] = static_cast<double>(bytes) / seconds;
      if (preset) {
        entry["fraction_of_datasheet_bandwidth"] =
            static_cast<double>(bytes) / seconds / preset->gpu.hbm_bandwidth;
      }
      std::cerr << fmt::format("  {:>12} bytes {:9.1f} GB/s\n", bytes,
                               static_cast<double>(bytes) / seconds / 1e9);
    } catch (const metron::Error& e) {
      entry["error"] = e.what();
    }
    streams.push_back(entry);
  }
  // The time of one tiny kernel among thousands back to back on one stream (issue 18, item 3):
  // what a layer of many small kernels pays per kernel beyond its work, the floor of the
  // streaming kernel and of a cuBLASLt call (host launch included when it is the slower side).
  std::cerr << "back-to-back tiny kernels\n";
  nlohmann::json& launch = doc["tiny_kernel"] = nlohmann::json::array();
  for (const Operation& op : {Operation{.name = "add-4KiB",
                             .kind = OperationKind::kElementwise,
                             .m = 1,
                             .bytes = 4096,
                             .count = 2000},
                              Operation{.name = "add-1MiB",
                              .kind = OperationKind::kElementwise,
                              .m = 1,
                              .bytes = 1 << 20,
                              .count = 2000},
                              Operation{.name = "gemm-64",
                              .kind = OperationKind::kGemm,
                              .m = 64,
                              .n = 64,
                              .k = 64,
                              .count = 2000,
                              .dtype = DType::kBf16},
                              Operation{.name = "gemm-128",
                              .kind = OperationKind::kGemm,
                              .m = 128,
                              .n = 128,
                              .k = 128,
                              .count = 2000,
                              .dtype = DType::kBf16}}) {
    nlohmann::json entry = {{"name", op.name}, {"repetitions", op.count}};
    try {
      const double seconds = cuda::measure_operation_seconds(op, run);
      entry["seconds_per_kernel"] = seconds;
      std::cerr << fmt::format("  {:<10} {:8.2f} us per kernel\n", op.name, seconds * 1e6);
    } catch (const metron::Error& e) {
      entry["error"] = e.what();
    }
    launch.push_back(entry);
  }

  metron::write_file_atomically(output, doc.dump(2) + "\n");
  std::cerr << "wrote " << output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "cuda_profile: error: " << e.what() << "\n";
    return 2;
  }
}
