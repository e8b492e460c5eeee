#include "metron/exec/cuda/cuda_compute.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "cuda_kernels.h"
#include "metron/base/error.h"
#include "metron/exec/payload_plan.h"

namespace metron::exec::cuda {
namespace {

using detail::check;

constexpr std::uint64_t kWorkspaceBytes = std::uint64_t{32} << 20;
constexpr std::int64_t kMaxSquareGemm = 8192;
constexpr std::int64_t kVectorBytes = 16;  // stream_add works on 16-byte vectors
/// The largest of an element-wise op's three buffers; a larger op runs as passes over it.
constexpr std::int64_t kMaxStreamBytes = std::int64_t{256} << 20;

/// A device allocation that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::int64_t bytes, std::string_view what) {
    if (bytes <= 0) return;
    check(cudaMalloc(&data_, static_cast<std::size_t>(bytes)), "cudaMalloc", what);
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  [[nodiscard]] void* get() const noexcept { return data_; }

 private:
  void* data_ = nullptr;
};

/// The dtype a GEMM runs in: integer dtypes have no GEMM of their own and run as bf16.
ir::DType gemm_dtype(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFp32:
    case ir::DType::kBf16:
    case ir::DType::kFp16:
    case ir::DType::kFp8:
      return dtype;
    case ir::DType::kInt64:
    case ir::DType::kInt32:
    case ir::DType::kUint8:
      break;
  }
  return ir::DType::kBf16;
}

std::int64_t input_bytes(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFp32:
      return 4;
    case ir::DType::kFp8:
      return 1;
    default:
      return 2;
  }
}

/// fp8 GEMMs write bf16; the others write their input type.
std::int64_t output_bytes(ir::DType dtype) {
  return dtype == ir::DType::kFp8 ? 2 : input_bytes(dtype);
}

cudaDataType input_type(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFp32:
      return CUDA_R_32F;
    case ir::DType::kFp16:
      return CUDA_R_16F;
    case ir::DType::kFp8:
      return CUDA_R_8F_E4M3;
    default:
      return CUDA_R_16BF;
  }
}

cudaDataType output_type(ir::DType dtype) {
  return dtype == ir::DType::kFp8 ? CUDA_R_16BF : input_type(dtype);
}

detail::FillType fill_type(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F:
      return detail::FillType::kFloat32;
    case CUDA_R_16F:
      return detail::FillType::kFloat16;
    case CUDA_R_8F_E4M3:
      return detail::FillType::kFp8E4m3;
    default:
      return detail::FillType::kBfloat16;
  }
}

/// "qkv gemm 4096×4096×1024 bf16": how errors name an operation.
std::string describe(const ir::Operation& op) {
  std::string out = op.name.empty() ? "unnamed" : op.name;
  out += " ";
  out += ir::to_string(op.kind);
  if (op.kind == ir::OperationKind::kElementwise) {
    out += " of " + std::to_string(op.bytes) + " bytes";
  } else {
    out += " " + std::to_string(op.m) + "x" + std::to_string(op.n) + "x" + std::to_string(op.k);
    if (op.batch != 1) out += " batch " + std::to_string(op.batch);
  }
  out += " ";
  out += ir::to_string(op.dtype);
  return out;
}

using GemmKey = std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, ir::DType>;

GemmKey gemm_key(const ir::Operation& op) {
  const bool batched = op.kind == ir::OperationKind::kBatchedGemm;
  return {batched, op.m, op.n, op.k, batched ? op.batch : 1, gemm_dtype(op.dtype)};
}

/// Bytes of each of x, y and z an element-wise operation streams through (Note [cuda compute]).
std::int64_t stream_bytes(const ir::Operation& op) {
  const std::int64_t bytes = op.bytes > 0 ? (op.bytes + 2) / 3 : op.m * input_bytes(op.dtype);
  return (bytes + kVectorBytes - 1) / kVectorBytes * kVectorBytes;
}

/// The size of the buffers that carry it: at most kMaxStreamBytes.
std::int64_t stream_buffer_bytes(const ir::Operation& op) {
  return std::min(stream_bytes(op), kMaxStreamBytes);
}

/// One GEMM shape: descriptors, the chosen algorithm, shared inputs and an output per slot.
struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::int64_t output_bytes = 0;
  DeviceBuffer in_a;
  DeviceBuffer in_b;
  std::map<std::int32_t, DeviceBuffer> out;  ///< by stream slot

  Gemm() = default;
  ~Gemm() {
    if (c != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(c));
    if (b != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(b));
    if (a != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(a));
    if (desc != nullptr) static_cast<void>(cublasLtMatmulDescDestroy(desc));
  }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  Gemm(Gemm&&) = delete;
  Gemm& operator=(Gemm&&) = delete;
};

/// One element-wise size: shared inputs and an output per slot.
struct Stream {
  DeviceBuffer x;
  DeviceBuffer y;
  std::map<std::int32_t, DeviceBuffer> z;
};

/// One entry of what a task runs: an operation and how often (an int64: the square GEMMs that
/// stand for a large task may repeat more often than Operation::count holds).
struct Work {
  ir::Operation op;
  std::int64_t repeats = 1;
};

std::vector<Work> work_of(const ir::Compute& compute) {
  std::vector<Work> out;
  if (!compute.operations.empty()) {
    for (const ir::Operation& op : compute.operations) {
      // A GEMM with a zero size (or none repeated) does no work; a negative one is an error that
      // prepare() names.
      const bool empty_gemm = op.kind != ir::OperationKind::kElementwise &&
                              (op.m == 0 || op.n == 0 || op.k == 0 || op.batch == 0);
      if (!empty_gemm && op.count != 0) out.push_back({op, op.count});
    }
    return out;
  }
  for (const payload::SquareGemms& g : payload::plan_square_gemms(compute.flops, kMaxSquareGemm)) {
    out.push_back({ir::Operation{.name = "square",
                                 .kind = ir::OperationKind::kGemm,
                                 .m = g.n,
                                 .n = g.n,
                                 .k = g.n,
                                 .dtype = ir::DType::kBf16},
                   g.repeats});
  }
  return out;
}

void set_layout_batch(cublasLtMatrixLayout_t layout, std::int64_t batch, std::int64_t stride,
                      const std::string& what) {
  const auto count = static_cast<std::int32_t>(batch);
  check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                         sizeof count),
        "cublasLtMatrixLayoutSetAttribute", what);
  check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &stride, sizeof stride),
        "cublasLtMatrixLayoutSetAttribute", what);
}

}  // namespace

struct CudaCompute::Impl {
  int device = 0;
  cublasLtHandle_t lt = nullptr;
  std::map<GemmKey, std::unique_ptr<Gemm>> gemms;
  std::map<std::int64_t, std::unique_ptr<Stream>> streams;  ///< by stream_buffer_bytes
  std::map<std::int32_t, DeviceBuffer> workspaces;          ///< by slot

  ~Impl() {
    gemms.clear();
    if (lt != nullptr) static_cast<void>(cublasLtDestroy(lt));
  }

  void fill(const DeviceBuffer& buffer, std::int64_t elements, cudaDataType type,
            const std::string& what) {
    check(detail::fill(buffer.get(), elements, fill_type(type), nullptr), "fill kernel", what);
  }

  // Refuses an operation whose tensors would take more than half the free device memory.
  static void check_fits(double bytes, const std::string& what) {
    std::size_t free = 0;
    std::size_t total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", what);
    if (bytes > static_cast<double>(free) / 2) {
      throw InvalidConfig("cuda compute: operation " + what + " needs " +
                          std::to_string(static_cast<std::int64_t>(bytes)) +
                          " bytes of tensors; expected at most half the device's free memory (" +
                          std::to_string(free / 2) + " bytes)");
    }
  }

  Gemm& prepare_gemm(const ir::Operation& op, std::int32_t slot) {
    const std::string what = describe(op);
    if (op.m < 1 || op.n < 1 || op.k < 1 || op.batch < 1 || op.batch > INT32_MAX) {
      throw InvalidConfig("cuda compute: operation " + what +
                          ": expected positive sizes and a batch below 2^31");
    }
    // (A GEMM with a zero size does no work: work_of() leaves it out before it gets here.)
    const ir::DType dtype = gemm_dtype(op.dtype);
    const auto [m, n, k, batch] = std::tuple{op.m, op.n, op.k, std::get<4>(gemm_key(op))};
    std::unique_ptr<Gemm>& entry = gemms[gemm_key(op)];
    if (!entry) {
      const double elements_in = static_cast<double>(batch) * static_cast<double>(m * k + k * n);
      const double elements_out = static_cast<double>(batch) * static_cast<double>(m * n);
      check_fits(elements_in * static_cast<double>(input_bytes(dtype)) +
                     elements_out * static_cast<double>(output_bytes(dtype)),
                 what);
      auto gemm = std::make_unique<Gemm>();
      check(cublasLtMatmulDescCreate(&gemm->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            "cublasLtMatmulDescCreate", what);
      const cublasOperation_t transpose = CUBLAS_OP_T;
      const cublasOperation_t keep = CUBLAS_OP_N;
      check(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                           sizeof transpose),
            "cublasLtMatmulDescSetAttribute", what);
      check(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep,
                                           sizeof keep),
            "cublasLtMatmulDescSetAttribute", what);
      // Column-major "TN": A is stored k×m and transposed, B k×n, C m×n.
      const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
      check(cublasLtMatrixLayoutCreate(&gemm->a, input_type(dtype), u(k), u(m), k),
            "cublasLtMatrixLayoutCreate", what);
      check(cublasLtMatrixLayoutCreate(&gemm->b, input_type(dtype), u(k), u(n), k),
            "cublasLtMatrixLayoutCreate", what);
      check(cublasLtMatrixLayoutCreate(&gemm->c, output_type(dtype), u(m), u(n), m),
            "cublasLtMatrixLayoutCreate", what);
      if (batch > 1) {
        set_layout_batch(gemm->a, batch, k * m, what);
        set_layout_batch(gemm->b, batch, k * n, what);
        set_layout_batch(gemm->c, batch, m * n, what);
      }
      cublasLtMatmulPreference_t preference = nullptr;
      check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate", what);
      const std::uint64_t workspace = kWorkspaceBytes;
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
      const cublasStatus_t heuristic =
          set != CUBLAS_STATUS_SUCCESS
              ? set
              : cublasLtMatmulAlgoGetHeuristic(lt, gemm->desc, gemm->a, gemm->b, gemm->c, gemm->c,
                                               preference, 1, &result, &found);
      static_cast<void>(cublasLtMatmulPreferenceDestroy(preference));
      check(heuristic, "cublasLtMatmulAlgoGetHeuristic", what);
      if (found == 0) {
        throw BackendError("cuda backend: cuBLASLt has no algorithm for " + what + " on " +
                           device_name() +
                           " (fp8 GEMMs need compute capability 8.9 or later and sizes that are "
                           "multiples of 16)");
      }
      gemm->algo = result.algo;
      gemm->output_bytes = static_cast<std::int64_t>(elements_out) * output_bytes(dtype);
      const auto a_elements = batch * k * m;
      const auto b_elements = batch * k * n;
      gemm->in_a = DeviceBuffer(a_elements * input_bytes(dtype), what);
      gemm->in_b = DeviceBuffer(b_elements * input_bytes(dtype), what);
      fill(gemm->in_a, a_elements, input_type(dtype), what);
      fill(gemm->in_b, b_elements, input_type(dtype), what);
      entry = std::move(gemm);
    }
    if (!entry->out.contains(slot))
      entry->out.emplace(slot, DeviceBuffer(entry->output_bytes, what));
    return *entry;
  }

  Stream& prepare_stream(const ir::Operation& op, std::int32_t slot) {
    const std::string what = describe(op);
    if (op.m < 0 || op.bytes < 0) {
      throw InvalidConfig("cuda compute: operation " + what + ": expected no negative size");
    }
    const std::int64_t bytes = stream_buffer_bytes(op);
    std::unique_ptr<Stream>& entry = streams[bytes];
    if (!entry) {
      check_fits(3.0 * static_cast<double>(bytes), what);
      entry = std::make_unique<Stream>();
      entry->x = DeviceBuffer(bytes, what);
      entry->y = DeviceBuffer(bytes, what);
      fill(entry->x, bytes / 2, CUDA_R_16BF, what);
      fill(entry->y, bytes / 2, CUDA_R_16BF, what);
    }
    if (!entry->z.contains(slot)) entry->z.emplace(slot, DeviceBuffer(bytes, what));
    return *entry;
  }

  [[nodiscard]] std::string device_name() const {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      return "device " + std::to_string(device);
    }
    return std::string(properties.name) + " (sm_" + std::to_string(properties.major) +
           std::to_string(properties.minor) + ")";
  }
};

CudaCompute::CudaCompute(const Options& options) : impl_(std::make_unique<Impl>()) {
  impl_->device = options.device;
  check(cudaSetDevice(options.device), "cudaSetDevice", "device " + std::to_string(options.device));
  check(cublasLtCreate(&impl_->lt), "cublasLtCreate");
}

CudaCompute::~CudaCompute() = default;

void CudaCompute::prepare(const ir::Compute& compute, std::int32_t slot) {
  check(cudaSetDevice(impl_->device), "cudaSetDevice");
  for (const Work& w : work_of(compute)) {
    if (w.op.kind == ir::OperationKind::kElementwise) {
      impl_->prepare_stream(w.op, slot);
    } else {
      impl_->prepare_gemm(w.op, slot);
    }
  }
  if (!impl_->workspaces.contains(slot)) {
    impl_->workspaces.emplace(
        slot, DeviceBuffer(static_cast<std::int64_t>(kWorkspaceBytes), "cuBLASLt workspace"));
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "filling the payload's tensors");
}

void CudaCompute::enqueue(const ir::Compute& compute, std::int32_t slot, CUstream_st* stream) {
  const auto workspace = impl_->workspaces.find(slot);
  for (const Work& w : work_of(compute)) {
    const ir::Operation& op = w.op;
    if (op.kind == ir::OperationKind::kElementwise) {
      const auto found = impl_->streams.find(stream_buffer_bytes(op));
      METRON_ASSERT(found != impl_->streams.end() && found->second->z.contains(slot),
                    "cuda compute: " + describe(op) + " was not prepared");
      const Stream& s = *found->second;
      void* z = s.z.at(slot).get();
      for (std::int64_t i = 0; i < w.repeats; ++i) {
        for (std::int64_t left = stream_bytes(op); left > 0; left -= kMaxStreamBytes) {
          check(
              detail::stream_add(s.x.get(), s.y.get(), z, std::min(left, kMaxStreamBytes), stream),
              "stream_add kernel", describe(op));
        }
      }
      continue;
    }
    const auto found = impl_->gemms.find(gemm_key(op));
    METRON_ASSERT(found != impl_->gemms.end() && found->second->out.contains(slot) &&
                      workspace != impl_->workspaces.end(),
                  "cuda compute: " + describe(op) + " was not prepared");
    const Gemm& g = *found->second;
    void* out = g.out.at(slot).get();
    const float alpha = 1.0F;
    const float beta = 0.0F;
    for (std::int64_t i = 0; i < w.repeats; ++i) {
      check(cublasLtMatmul(impl_->lt, g.desc, &alpha, g.in_a.get(), g.a, g.in_b.get(), g.b, &beta,
                           out, g.c, out, g.c, &g.algo, workspace->second.get(), kWorkspaceBytes,
                           stream),
            "cublasLtMatmul", describe(op));
    }
  }
}

std::string CudaCompute::device_description() const { return impl_->device_name(); }

}  // namespace metron::exec::cuda
