#pragma once
// One rank of a graph run on the CUDA backend, from rendezvous to the measurements gathered at
// rank 0: what `metron run --backend cuda` executes in each worker process, whether the local
// launcher forked it or torchrun, srun or mpirun started it. The ranks meet through metron's own
// TcpStore (Note [tcp store]), so no libtorch is needed: its barrier starts each iteration, and
// NCCL's unique ids and the measurements travel through it (Note [nccl world]).

#include <optional>

#include "metron/exec/measured_step.h"
#include "metron/exec/rank_run.h"
#include "metron/exec/rank_store.h"
#include "metron/ir/graph.h"

namespace metron::exec::cuda {

/// Runs rank `rendezvous.rank` of `graph` on GPU `device` (its index on this machine; one GPU per
/// rank, since NCCL refuses two ranks of a communicator on one GPU). Sets
/// CUDA_DEVICE_MAX_CONNECTIONS from the rank's hardware queues before the first CUDA call, so the
/// process must not have used CUDA before. Returns the measured step at rank 0, nullopt
/// elsewhere. Throws InvalidConfig when the world size does not match the graph or the device
/// does not exist, BackendError naming the rank and the task on a failure.
std::optional<MeasuredStep> run_cuda_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                          int device, const RunOptions& options,
                                          const StatusSink& status);

}  // namespace metron::exec::cuda
