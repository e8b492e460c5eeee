#pragma once
// The CUDA backend's compute payload: runs the operations of a compute task on one GPU, so that
// each task the executor measures there is the task the cost model priced, as the CPU payload
// does with libtorch (Note [torch compute]). CUDA types stay out of this header (a stream is the
// runtime's opaque CUstream_st*), so code that only drives the backend needs no CUDA headers.
//
// Note [cuda compute] (what each operation kind runs, in which dtype, and why):
//   - kGemm m×n×k: one cuBLASLt matmul D[m,n] = A·B in the operation's dtype: bf16 and fp16 with
//     fp32 accumulation, fp32 as plain fp32 (no TF32: the presets' fp32 peak is the non-tensor
//     one), fp8 e4m3 inputs with a bf16 output (Hopper and later; elsewhere cuBLASLt finds no
//     algorithm and the task fails naming the operation). Layout "TN" (A transposed), the one
//     fp8 requires and the fastest for the others. kBatchedGemm: the same with `batch` strided
//     matrices. Integer dtypes run as bf16. The algorithm is cuBLASLt's first heuristic choice
//     for a 32 MiB workspace, chosen once per shape.
//   - kElementwise: a streaming kernel of our own, z = x + y over bytes/3 bytes of each (rounded
//     up to 16), so one repetition moves the operation's `bytes`, the traffic the cost model
//     prices; without `bytes`, m elements of the dtype. Buffers hold at most 256 MiB each: a
//     larger operation (an optimizer step over the whole model state moves tens of GB) runs as
//     passes over them, which moves the same bytes through HBM (256 MiB is far beyond any L2)
//     without taking the memory the model state would occupy.
//   - Every operation runs `count` times in a row, in the task's order, on the task's stream.
//   - A task without operations runs square bf16 GEMMs whose 2·n³ add up to its flops
//     (payload::plan_square_gemms, n at most 8192); nothing when flops is 0.
//   - Tensors are allocated by prepare() with cudaMalloc, outside the stream-ordered pool the
//     graph's memory effects use (their peak is measured apart from the payload's), filled once
//     with varied small values (a GPU multiplies zeros at a higher clock). Inputs are shared;
//     each stream slot has its own outputs and cuBLASLt workspace, so work on two streams never
//     writes one buffer. One operation's tensors may take at most half the free device memory:
//     beyond that prepare() refuses with InvalidConfig naming the operation.

#include <cstdint>
#include <memory>
#include <string>

#include "metron/ir/task.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*

namespace metron::exec::cuda {

/// Runs compute tasks' operations on a GPU (Note [cuda compute]).
/// @code
///   cuda::CudaCompute compute({.device = 0});
///   compute.prepare(task_compute, slot);        // before the timed iterations
///   compute.enqueue(task_compute, slot, stream); // asynchronous, on the task's stream
/// @endcode
class CudaCompute {
 public:
  struct Options {
    int device = 0;  ///< the CUDA device the tensors live on
  };

  /// Makes `device` current and creates the cuBLASLt handle. Throws BackendError.
  explicit CudaCompute(const Options& options);
  ~CudaCompute();
  CudaCompute(const CudaCompute&) = delete;
  CudaCompute& operator=(const CudaCompute&) = delete;
  CudaCompute(CudaCompute&&) = delete;
  CudaCompute& operator=(CudaCompute&&) = delete;

  /// Allocates and fills what `compute` needs on stream slot `slot` (an index of the rank's
  /// streams) and chooses its GEMM algorithms. Synchronous. Throws InvalidConfig naming an
  /// operation whose sizes are negative or too large, BackendError naming one CUDA refuses.
  void prepare(const ir::Compute& compute, std::int32_t slot);

  /// Enqueues every operation of `compute` on `stream`, each `count` times, in order; prepare()
  /// with this slot came first. Throws BackendError naming the operation a call fails for, and
  /// InternalError when the task was not prepared.
  void enqueue(const ir::Compute& compute, std::int32_t slot, CUstream_st* stream);

  /// The device name and compute capability, e.g. "NVIDIA H100 80GB HBM3 (sm_90)".
  [[nodiscard]] std::string device_description() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace metron::exec::cuda
