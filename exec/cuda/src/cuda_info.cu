// Queries of the CUDA runtime and NCCL. Every call's status is checked and turned into text in
// CudaInfo::error: without a GPU or driver the runtime returns errors, and that must not abort.

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "metron/exec/cuda/cuda_info.h"

namespace metron::exec::cuda {
namespace {

void append_error(std::string& errors, const char* call, const char* reason) {
  if (!errors.empty()) errors += "; ";
  errors += call;
  errors += ": ";
  errors += reason;
}

void record(std::string& errors, const char* call, cudaError_t status) {
  if (status == cudaSuccess) return;
  append_error(errors, call, cudaGetErrorString(status));
  // A failed runtime call leaves a sticky "last error"; clear it so later calls start clean.
  static_cast<void>(cudaGetLastError());
}

}  // namespace

CudaInfo query_cuda() {
  CudaInfo info;
  record(info.error, "cudaRuntimeGetVersion", cudaRuntimeGetVersion(&info.runtime_version));
  record(info.error, "cudaDriverGetVersion", cudaDriverGetVersion(&info.driver_version));
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  record(info.error, "cudaGetDeviceCount", status);
  info.device_count = status == cudaSuccess ? count : 0;
  const ncclResult_t nccl_status = ncclGetVersion(&info.nccl_version);
  if (nccl_status != ncclSuccess) {
    append_error(info.error, "ncclGetVersion", ncclGetErrorString(nccl_status));
    info.nccl_version = 0;
  }
  return info;
}

int nccl_library_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
}

int nccl_header_version() noexcept { return NCCL_VERSION_CODE; }

}  // namespace metron::exec::cuda
