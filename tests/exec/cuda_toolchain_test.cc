// The CUDA toolchain as built: these run on any machine with the toolkit, GPU or not.

#include <gtest/gtest.h>

#include "metron/exec/cuda/cuda_info.h"

namespace metron::exec::cuda {
namespace {

// A libnccl older or newer than the nccl.h we compiled against is the classic source of
// "unhandled system error" at communicator creation; catch it at test time instead.
TEST(CudaToolchain, NcclLibraryMatchesHeader) {
  const int header = nccl_header_version();
  EXPECT_GT(header, 0);
  EXPECT_EQ(nccl_library_version(), header)
      << "the loaded libnccl is not the one nccl.h describes; check LD_LIBRARY_PATH";
}

TEST(CudaToolchain, QueryNeverThrowsAndReportsVersions) {
  CudaInfo info;
  ASSERT_NO_THROW(info = query_cuda());
  EXPECT_GT(info.runtime_version, 0) << info.error;
  EXPECT_EQ(info.nccl_version, nccl_header_version()) << info.error;
  EXPECT_GE(info.device_count, 0);
  if (info.device_count == 0) {
    EXPECT_FALSE(info.error.empty()) << "no device but no error text to say why";
  }
}

}  // namespace
}  // namespace metron::exec::cuda
