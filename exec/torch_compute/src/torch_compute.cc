#include "metron/exec/torch_compute.h"

// Per-operator ATen headers, not <torch/torch.h> (~13 s per file) or <ATen/ATen.h>.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <torch/version.h>

#include <atomic>
#include <compare>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/payload_plan.h"

namespace metron::exec {
namespace {

// What one operation allocates: operations of equal shape share their tensors.
struct Shape {
  ir::OperationKind kind = ir::OperationKind::kGemm;
  std::int64_t batch = 1;
  std::int64_t m = 0;  // element-wise: elements
  std::int64_t n = 0;
  std::int64_t k = 0;
  auto operator<=>(const Shape&) const = default;
};

// Read-only inputs, shared by every caller, and the outputs no caller is writing right now.
struct Tensors {
  at::Tensor a;
  at::Tensor b;
  std::vector<at::Tensor> idle_outputs;
};

// One operation as run() sees it: its shape, its repetitions, and its name for messages.
struct Step {
  Shape shape;
  std::int64_t count = 1;
  std::string what;
};

at::TensorOptions fp32() { return at::TensorOptions().dtype(at::kFloat).device(at::kCPU); }

at::Tensor make_output(const Shape& s) {
  switch (s.kind) {
    case ir::OperationKind::kGemm:
      return at::empty({s.m, s.n}, fp32());
    case ir::OperationKind::kBatchedGemm:
      return at::empty({s.batch, s.m, s.n}, fp32());
    case ir::OperationKind::kElementwise:
      return at::empty({s.m}, fp32());
  }
  return {};
}

Tensors make_tensors(const Shape& s) {
  Tensors t;
  switch (s.kind) {
    case ir::OperationKind::kGemm:
      t.a = at::ones({s.m, s.k}, fp32());
      t.b = at::ones({s.k, s.n}, fp32());
      break;
    case ir::OperationKind::kBatchedGemm:
      t.a = at::ones({s.batch, s.m, s.k}, fp32());
      t.b = at::ones({s.batch, s.k, s.n}, fp32());
      break;
    case ir::OperationKind::kElementwise:
      t.a = at::ones({s.m}, fp32());
      t.b = at::ones({s.m}, fp32());
      break;
  }
  t.idle_outputs.push_back(make_output(s));
  return t;
}

std::string describe(const ir::Operation& op) {
  std::ostringstream out;
  out << "torch compute: operation \"" << op.name << "\" (" << ir::to_string(op.kind);
  switch (op.kind) {
    case ir::OperationKind::kGemm:
      out << " " << op.m << "x" << op.n << "x" << op.k;
      break;
    case ir::OperationKind::kBatchedGemm:
      out << " " << op.batch << "x(" << op.m << "x" << op.n << "x" << op.k << ")";
      break;
    case ir::OperationKind::kElementwise:
      out << " of " << op.m << " elements, " << op.bytes << " bytes";
      break;
  }
  out << ", count " << op.count << ")";
  return out.str();
}

// Checks each operation of `compute` and turns it into a step (square GEMMs without operations).
std::vector<Step> plan_steps(const ir::Compute& compute) {
  std::vector<Step> steps;
  if (compute.operations.empty()) {
    for (const payload::SquareGemms& g : payload::plan_square_gemms(compute.flops)) {
      std::ostringstream what;
      what << "torch compute: square gemm " << g.n << "x" << g.n << "x" << g.n << " for a task of "
           << compute.flops << " flops without operations";
      steps.push_back({{ir::OperationKind::kGemm, 1, g.n, g.n, g.n}, g.repeats, what.str()});
    }
    return steps;
  }
  for (const ir::Operation& op : compute.operations) {
    std::string what = describe(op);
    if (op.m < 0 || op.n < 0 || op.k < 0 || op.batch < 0 || op.bytes < 0 || op.count < 1) {
      throw InvalidConfig(what + ": expected sizes >= 0 and count >= 1");
    }
    const double bytes = payload::operation_tensor_bytes(op);
    if (bytes > payload::kMaxOperationBytes) {
      std::ostringstream msg;
      msg << what << ": its fp32 tensors need " << bytes / (1024.0 * 1024 * 1024)
          << " GiB, expected at most " << payload::kMaxOperationBytes / (1024.0 * 1024 * 1024)
          << " GiB";
      throw InvalidConfig(msg.str());
    }
    Shape shape{op.kind, 1, op.m, op.n, op.k};
    if (op.kind == ir::OperationKind::kBatchedGemm) shape.batch = op.batch;
    if (op.kind == ir::OperationKind::kElementwise) {
      shape = {op.kind, 1, payload::elementwise_elements(op), 0, 0};
    }
    const bool empty = op.kind == ir::OperationKind::kElementwise
                           ? shape.m == 0
                           : shape.m == 0 || shape.n == 0 || shape.batch == 0;
    if (empty) continue;  // no output element: nothing to run
    steps.push_back({shape, op.count, std::move(what)});
  }
  return steps;
}

// Debian's libtorch calls a pthreads OpenBLAS, whose threads at::set_num_threads does not set.
// Looked up at run time so that a build against another BLAS still links and runs.
void set_blas_threads(std::int32_t threads) {
  using SetThreads = void (*)(int);
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (symbol != nullptr) reinterpret_cast<SetThreads>(symbol)(threads);
}

}  // namespace

void stop_blas_threads() {
  using Shutdown = int (*)();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym returns void*
  void* symbol = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
  if (symbol != nullptr) static_cast<void>(reinterpret_cast<Shutdown>(symbol)());
}

namespace {

// Bumped by every TorchCompute construction: a thread that has not caught up with it yet copies
// the process's intra-op thread count into its own OpenMP setting (at::init_num_threads), which
// at::set_num_threads sets only for the thread that calls it.
std::atomic<std::int64_t> threads_generation{0};

void adopt_thread_count() {
  thread_local std::int64_t seen = -1;
  const std::int64_t now = threads_generation.load(std::memory_order_acquire);
  if (seen != now) {
    at::init_num_threads();
    seen = now;
  }
}

}  // namespace

struct TorchCompute::Impl {
  std::mutex mutex;
  std::map<Shape, std::unique_ptr<Tensors>> tensors;  // unique_ptr: stable while unlocked

  // An output checked out of its shape's pool, given back when the step ends (even by a throw).
  class Lease {
   public:
    Lease(Impl& impl, Tensors& t, at::Tensor out) : impl_(impl), t_(t), out_(std::move(out)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      try {
        const std::lock_guard lock(impl_.mutex);
        t_.idle_outputs.push_back(std::move(out_));
      } catch (...) {  // NOLINT(bugprone-empty-catch): a lost output is only allocated again
      }
    }
    at::Tensor& out() { return out_; }
    const Tensors& inputs() const { return t_; }

   private:
    Impl& impl_;
    Tensors& t_;
    at::Tensor out_;
  };

  // The shape's tensors, allocated on first use; allocating under the lock is fine: it happens
  // once per shape, in prepare().
  Tensors& tensors_of(const Shape& shape) {
    const std::lock_guard lock(mutex);
    std::unique_ptr<Tensors>& slot = tensors[shape];
    if (!slot) slot = std::make_unique<Tensors>(make_tensors(shape));
    return *slot;
  }

  Lease checkout(const Shape& shape) {
    Tensors& t = tensors_of(shape);
    {
      const std::lock_guard lock(mutex);
      if (!t.idle_outputs.empty()) {
        at::Tensor out = std::move(t.idle_outputs.back());
        t.idle_outputs.pop_back();
        return {*this, t, std::move(out)};
      }
    }
    return {*this, t, make_output(shape)};  // another thread holds every output of this shape
  }

  void run_step(const Step& step) {
    Lease lease = checkout(step.shape);
    const Tensors& t = lease.inputs();
    for (std::int64_t i = 0; i < step.count; ++i) {
      switch (step.shape.kind) {
        case ir::OperationKind::kGemm:
          at::mm_out(lease.out(), t.a, t.b);
          break;
        case ir::OperationKind::kBatchedGemm:
          at::bmm_out(lease.out(), t.a, t.b);
          break;
        case ir::OperationKind::kElementwise:
          at::add_out(lease.out(), t.a, t.b);
          break;
      }
    }
  }
};

namespace {

// Runs `body` for each step, translating whatever libtorch or its kernels throw (c10::Error,
// oneDNN's dnnl::error, std::bad_alloc) into BackendError naming the step.
template <typename Body>
void for_each_step(const std::vector<Step>& steps, Body body) {
  for (const Step& step : steps) {
    try {
      body(step);
    } catch (const metron::Error&) {
      throw;
    } catch (const c10::Error& e) {
      throw BackendError(step.what + ": libtorch failed: " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw BackendError(step.what + ": libtorch failed: " + e.what());
    }
  }
}

}  // namespace

TorchCompute::TorchCompute(const Options& options) : impl_(std::make_unique<Impl>()) {
  if (options.intra_op_threads < 1) {
    throw InvalidConfig("torch compute: intra_op_threads is " +
                        std::to_string(options.intra_op_threads) + ", expected >= 1");
  }
  try {
    at::set_num_threads(options.intra_op_threads);
  } catch (const c10::Error& e) {
    throw BackendError(std::string("torch compute: at::set_num_threads failed: ") +
                       e.what_without_backtrace());
  }
  set_blas_threads(options.intra_op_threads);
  threads_generation.fetch_add(1, std::memory_order_release);
}

TorchCompute::~TorchCompute() = default;

void TorchCompute::run(const ir::Compute& compute) {
  const std::vector<Step> steps = plan_steps(compute);
  if (steps.empty()) return;
  adopt_thread_count();
  for_each_step(steps, [this](const Step& step) { impl_->run_step(step); });
}

void TorchCompute::prepare(const ir::Compute& compute) {
  for_each_step(plan_steps(compute),
                [this](const Step& step) { static_cast<void>(impl_->tensors_of(step.shape)); });
}

std::string_view TorchCompute::compute_dtype_name() { return "fp32"; }

std::string_view TorchCompute::library_version() { return TORCH_VERSION; }

}  // namespace metron::exec
