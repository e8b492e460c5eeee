// Kernels of the CUDA payload (cuda_kernels.h).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "cuda_kernels.h"

namespace metron::exec::cuda::detail {
namespace {

constexpr int kThreads = 256;

__device__ float pattern(std::int64_t i) {
  // A multiplicative hash of the index, mapped to [-0.5, 0.5): cheap, varied, finite products.
  const auto h = static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) * 2654435761ULL);
  return static_cast<float>(h >> 8) / 16777216.0F - 0.5F;
}

template <typename T>
__global__ void fill_kernel(T* data, std::int64_t elements) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < elements; i += stride) {
    data[i] = static_cast<T>(pattern(i));
  }
}

// 16 bytes per thread and step: eight bf16 values of x and of y in, eight of z out.
__global__ void stream_add_kernel(const uint4* x, const uint4* y, uint4* z, std::int64_t vectors) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < vectors; i += stride) {
    uint4 a = x[i];
    const uint4 b = y[i];
    auto* pa = reinterpret_cast<__nv_bfloat162*>(&a);
    const auto* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
    for (int j = 0; j < 4; ++j) pa[j] = __hadd2(pa[j], pb[j]);
    z[i] = a;
  }
}

unsigned blocks_for(std::int64_t work) {
  // Enough blocks to fill any current GPU several times over; the loops stride past the rest.
  constexpr std::int64_t kMaxBlocks = 65536;
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

}  // namespace

cudaError_t fill(void* data, std::int64_t elements, FillType type, cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  const unsigned blocks = blocks_for(elements);
  switch (type) {
    case FillType::kFloat32:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), elements);
      break;
    case FillType::kBfloat16:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), elements);
      break;
    case FillType::kFloat16:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(data), elements);
      break;
    case FillType::kFp8E4m3:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), elements);
      break;
  }
  return cudaGetLastError();
}

cudaError_t stream_add(const void* x, const void* y, void* z, std::int64_t bytes,
                       cudaStream_t stream) {
  const std::int64_t vectors = bytes / 16;
  if (vectors <= 0) return cudaSuccess;
  stream_add_kernel<<<blocks_for(vectors), kThreads, 0, stream>>>(
      static_cast<const uint4*>(x), static_cast<const uint4*>(y), static_cast<uint4*>(z), vectors);
  return cudaGetLastError();
}

}  // namespace metron::exec::cuda::detail
