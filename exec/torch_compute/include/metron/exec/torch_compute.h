#pragma once
// The CPU backend's compute payload: runs the operations of a compute task on libtorch CPU tensors,
// so that each task the executor measures is the task the cost model priced (issue 16, "Payload").
// libtorch stays behind a pimpl: clang cannot parse libtorch 1.13's headers in C++20, and they cost
// seconds per file, so no torch header may reach a file that includes this one.
//
// Note [torch compute] (what each operation kind runs, in which dtype, and why):
//   - kGemm m×n×k: at::mm_out(C[m,n], A[m,k], B[k,n]) into a preallocated C. kBatchedGemm:
//     at::bmm_out over [batch,m,k]·[batch,k,n]. Sizes in elements are the IR's own.
//   - kElementwise: at::add_out(z, x, y) over fp32 tensors of N elements, N = ceil(bytes / 12): an
//     out-of-place add reads 2 and writes 1 element of 4 bytes, so one repetition moves about
//     `bytes`, the traffic the cost model prices (an element-wise op is priced by its bytes, not
//     by its elements). An add goes through the same TensorIterator loop as real activations and
//     norms; a copy could become a bare memcpy. Without `bytes`, N = m.
//   - Every operation runs `count` times in a row, in the task's order.
//   - A task without operations (graphs built without the payload, explicit-cost graphs) runs
//     square fp32 GEMMs whose 2·n³ add up to its flops within 1 % (n at most 4096, repeated as
//     often as needed, then smaller ones for the rest); nothing when flops is 0.
//   - dtype: everything runs in fp32, whatever the IR's dtype. In libtorch 1.13 on CPU, fp16 GEMMs
//     are not implemented ("addmm_impl_cpu_" not implemented for 'Half'), there is no fp8, and
//     bf16 GEMMs go to oneDNN, whose speed depends on the CPU's instruction set far more than on
//     the operation. Measured, 512³ at::mm, one Xeon with AMX (Sapphire Rapids class), 2 cores:
//     fp32 (OpenBLAS) 175 GFLOP/s on 1 thread, 275 on 2; bf16 1,050 GFLOP/s with AMX, but 107
//     with oneDNN limited to AVX512_CORE_BF16, 36 with AVX512_CORE, and no result but a dnnl::error
//     with AVX2 (ONEDNN_MAX_CPU_ISA). So a bf16 measurement would describe which
//     fallback kernel this CPU has, and may not run at all; fp32 BLAS is fast everywhere. On
//     AMX machines this makes a bf16 op measure up to ~4× slower than bf16 could run.
//   - Tensors are cached by shape and reused across calls: allocation is not what is measured.
//     Inputs are shared by all callers (filled with ones once: products stay finite however
//     often they run); each running operation checks an output out of a per-shape pool, so two
//     threads never write the same tensor at once. prepare() allocates a shape's inputs and one
//     output; a second concurrent caller of one shape allocates a second output the first time.
//   - One operation whose tensors would exceed 8 GiB is refused with InvalidConfig, before any
//     allocation, rather than failing with std::bad_alloc.
//   - intra_op_threads sets both ATen's pool (at::set_num_threads) and OpenBLAS's own pthreads,
//     which at::set_num_threads does not reach in Debian's build: ranks share the machine's cores.

#include <cstdint>
#include <memory>
#include <string_view>

#include "metron/ir/task.h"

namespace metron::exec {

/// Runs compute tasks' operations on libtorch CPU tensors (Note [torch compute]).
/// @code
///   exec::TorchCompute compute(exec::TorchCompute::Options{.intra_op_threads = 2});
///   compute.prepare(task_compute);  // allocate before the timed iterations
///   compute.run(task_compute);      // what the stream thread times
/// @endcode
class TorchCompute {
 public:
  struct Options {
    std::int32_t intra_op_threads = 1;  ///< at::set_num_threads for this process (ranks share the
                                        ///< machine's cores)
  };

  /// Sets the process's intra-op threads. Throws InvalidConfig for intra_op_threads < 1.
  explicit TorchCompute(const Options& options);
  ~TorchCompute();
  TorchCompute(const TorchCompute&) = delete;
  TorchCompute& operator=(const TorchCompute&) = delete;

  /// Runs every operation of `compute`, each `count` times, in order. Thread-safe: several stream
  /// threads of one rank may call it at once. Throws InvalidConfig naming the operation when its
  /// sizes are negative or its tensors too large, and BackendError naming it when libtorch fails.
  void run(const ir::Compute& compute);

  /// Allocates the tensors `compute` needs now, so the first run() does not pay for it (the
  /// executor calls it for every compute task before the timed iterations). Throws as run().
  void prepare(const ir::Compute& compute);

  /// The dtype the operations really run in, for the result ("fp32": see the Note).
  static std::string_view compute_dtype_name();

  /// The libtorch version the operations run on ("1.13.0"), for measurement records.
  static std::string_view library_version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Stops the worker threads the BLAS library started when it was loaded (OpenBLAS's pthread
/// build starts them before main), so that the process is single-threaded again and may fork its
/// ranks (exec::launch_local requires it). OpenBLAS starts them again on its next threaded call;
/// its own fork handler does the same stop, so this only makes the state explicit before the
/// launcher checks it. Does nothing under a BLAS without such threads.
void stop_blas_threads();

}  // namespace metron::exec
