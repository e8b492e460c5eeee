// Needs a GPU: without one, each test calls GTEST_SKIP() and CTest lists it as skipped.

#include <gtest/gtest.h>

#include "metron/exec/cuda/cuda_info.h"

namespace metron::exec::cuda {
namespace {

TEST(CudaDevice, RuntimeSeesADevice) {
  const CudaInfo info = query_cuda();
  if (info.device_count == 0) {
    GTEST_SKIP() << "no CUDA device visible (" << info.error << "); GPU tests need a GPU machine";
  }
  EXPECT_TRUE(info.error.empty()) << info.error;
  EXPECT_GT(info.driver_version, 0);
  // The driver must be at least as new as the runtime we built against, or kernels fail to load.
  EXPECT_GE(info.driver_version, info.runtime_version);
  EXPECT_GT(info.nccl_version, 0);
}

}  // namespace
}  // namespace metron::exec::cuda
