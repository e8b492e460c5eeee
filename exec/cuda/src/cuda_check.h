#pragma once
// Every CUDA, cuBLASLt and NCCL call of the backend goes through one of these: a failed call
// becomes a BackendError that names the call, the library's reason and what the backend was
// doing, so a user reads "cuda backend: cublasLtMatmul (qkv 4096×4096×1024 bf16): ..." rather
// than a status code. Private to exec_cuda.

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <string_view>

#include "metron/base/error.h"

namespace metron::exec::cuda::detail {

inline std::string failure(std::string_view call, std::string_view context, const char* reason) {
  std::string out = "cuda backend: ";
  out += call;
  if (!context.empty()) {
    out += " (";
    out += context;
    out += ")";
  }
  out += ": ";
  out += reason;
  return out;
}

inline void check(cudaError_t status, std::string_view call, std::string_view context = {}) {
  if (status == cudaSuccess) return;
  static_cast<void>(cudaGetLastError());  // a non-sticky error would otherwise stay pending
  throw BackendError(failure(call, context, cudaGetErrorString(status)));
}

inline void check(cublasStatus_t status, std::string_view call, std::string_view context = {}) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  // cublasGetStatusString lives in libcublas, which the backend does not link.
  throw BackendError(failure(call, context, cublasLtGetStatusString(status)));
}

inline void check(ncclResult_t status, std::string_view call, std::string_view context = {}) {
  if (status == ncclSuccess) return;
  throw BackendError(failure(call, context, ncclGetErrorString(status)));
}

}  // namespace metron::exec::cuda::detail
