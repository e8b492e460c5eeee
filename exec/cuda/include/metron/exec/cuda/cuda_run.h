#pragma once
// A graph of one rank run on one GPU: the CUDA backend, its payload and a one-rank NCCL world,
// warm-up and measured iterations, and the measured step. What the GPU tests and the GPU
// profile run; a run of several ranks adds the launcher's store for the NCCL unique id and the
// barrier before each iteration (Note [nccl world]).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "metron/exec/measured_step.h"
#include "metron/exec/operation_profile.h"
#include "metron/exec/rank_program.h"
#include "metron/ir/graph.h"
#include "metron/models/cost_profile.h"

namespace metron::exec::cuda {

class CudaCompute;
class NcclWorld;

struct CudaRunOptions {
  std::int32_t iterations = 5;               ///< measured iterations (the median is reported)
  std::int32_t warmup = 1;                   ///< iterations run first and not measured
  std::chrono::milliseconds timeout{60000};  ///< bounds every host wait
  int device = 0;
};

/// Before the timed iterations: allocates what each compute task of `program` runs (on its
/// stream's slot) and the NCCL buffer its collectives and transfers need. `world` may be null
/// when the program does not communicate. Throws as CudaCompute::prepare and NcclWorld do.
void prepare_rank(const ir::Graph& graph, const RankProgram& program, CudaCompute& compute,
                  NcclWorld* world);

/// Runs `graph`, which must have one rank, on GPU `options.device`. Sets
/// CUDA_DEVICE_MAX_CONNECTIONS from the rank's hardware queues, which acts only when nothing in
/// the process called CUDA before (Note [cuda backend]).
/// Throws InvalidConfig for a graph of several ranks or bad options, BackendError naming the
/// task when CUDA, cuBLASLt or NCCL fails or a wait times out.
MeasuredStep run_cuda_single_rank(const ir::Graph& graph, const CudaRunOptions& options);

/// Seconds one repetition of `operation` takes on the GPU: a one-task graph that runs it
/// `operation.count` times in a row, run as above; the median iteration's task time over the
/// count. What the GPU profile and its tests time operations with. Throws as above.
double measure_operation_seconds(const ir::Operation& operation, const CudaRunOptions& options);

/// Called after each operation a profile timed: how many are done of how many, its key and
/// precision name, and the seconds one repetition took.
using ProfileProgress = std::function<void(std::size_t done, std::size_t total,
                                           const std::string& what, double seconds)>;

/// `metron profile --backend cuda`'s compute part: times every distinct operation of
/// `operations` (distinct_task_operations of a step; every rank's, since the ranks of one GPU
/// model run the same kernels) with measure_operation_seconds, once per (key, precision, count),
/// and sets each key's median over its counts in `profile`. Returns how many were timed.
std::size_t profile_operations(
    const std::vector<std::vector<std::vector<ProfiledOperation>>>& operations,
    const CudaRunOptions& options, models::CostProfile& profile, const ProfileProgress& progress);

}  // namespace metron::exec::cuda
