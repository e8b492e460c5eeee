#pragma once
// What the CUDA runtime, the driver and NCCL report on this machine. No CUDA or NCCL type appears
// here, so code that only wants to print or test the toolchain needs neither header.

#include <string>

namespace metron::exec::cuda {

/// The CUDA and NCCL versions in use and the number of visible devices. Versions use the
/// libraries' own encodings (CUDA: 1000 * major + 10 * minor; NCCL: NCCL_VERSION_CODE); 0 means
/// "could not be queried".
struct CudaInfo {
  int runtime_version = 0;
  int driver_version = 0;
  int device_count = 0;
  int nccl_version = 0;
  /// Empty when every query succeeded; otherwise names each failed call and CUDA's reason, e.g.
  /// "cudaGetDeviceCount: no CUDA-capable device is detected". Never thrown: having no GPU is a
  /// normal state for a build or CI machine.
  std::string error;
};

/// Queries the runtime, the driver, the devices and NCCL. Never throws for a missing GPU or driver.
/// @code
///   CudaInfo info = metron::exec::cuda::query_cuda();
///   if (info.device_count == 0) std::cerr << "no GPU: " << info.error << "\n";
/// @endcode
CudaInfo query_cuda();

/// The version of the libnccl actually loaded (ncclGetVersion), or 0 when the call fails.
int nccl_library_version();

/// NCCL_VERSION_CODE of the nccl.h metron was compiled against.
int nccl_header_version() noexcept;

}  // namespace metron::exec::cuda
