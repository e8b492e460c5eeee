#pragma once
// The few kernels of metron's own that the CUDA payload needs beside cuBLASLt (Note [cuda
// compute] in metron/exec/cuda/cuda_compute.h). Private to exec_cuda; compiled by nvcc in
// cuda_kernels.cu, called from host code compiled by the C++ compiler.

#include <cuda_runtime.h>

#include <cstdint>

namespace metron::exec::cuda::detail {

/// What fill() writes: element type of the buffer.
enum class FillType : std::uint8_t { kFloat32, kBfloat16, kFloat16, kFp8E4m3 };

/// Fills `elements` values of `type` at `data` with small values in [-0.5, 0.5) that vary with
/// the index (not zeros: a GPU multiplies zeros at a higher clock than data, and the payload
/// stands for real tensors). Asynchronous on `stream`.
cudaError_t fill(void* data, std::int64_t elements, FillType type, cudaStream_t stream);

/// z = x + y over `bytes` bytes of each (a multiple of 16, 16-byte aligned buffers), read as
/// bf16 pairs: a streaming kernel that reads 2·bytes and writes bytes, the traffic an
/// element-wise operation's `bytes` stands for. Asynchronous on `stream`.
cudaError_t stream_add(const void* x, const void* y, void* z, std::int64_t bytes,
                       cudaStream_t stream);

}  // namespace metron::exec::cuda::detail
