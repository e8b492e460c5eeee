#pragma once
// How Kineto and NCCL name communication (docs/TRACES.md §2.6): the NCCL kernel names CUPTI
// reports, c10d's collective names, Kineto's dtype names, and the collective args Kineto copies
// onto a communication kernel. Shared by the merged and the per-rank layouts.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/timelines/timeline.h"
#include "metron/traces/trace_events.h"

namespace metron::timelines {

/// c10's ScalarType name: "Float", "BFloat16", "Half", "Float8_e4m3fn", "Long", "Int", "Byte".
std::string_view kineto_dtype(ir::DType dtype) noexcept;

/// Bytes per element of `dtype`.
std::int64_t dtype_size(ir::DType dtype) noexcept;

/// c10d's name of what a communication task does: "allreduce", "_reduce_scatter_base",
/// "_allgather_base", "reduce", "broadcast", "all_to_allv", "send", "recv". Empty for compute
/// and host waits.
std::string c10d_collective_name(const ir::Task& task);

/// The kernel NCCL >= 2.19 runs for a communication task, e.g.
/// "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"; sends,
/// receives and all-to-all run "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)".
/// Empty for compute and host waits.
std::string nccl_kernel_name(const ir::Task& task);

/// The pg_name and description of the default (world) process group, which PyTorch creates
/// first; point-to-point transfers go through it.
inline constexpr std::string_view kDefaultPgName = "0";
inline constexpr std::string_view kDefaultPgDescription = "default_pg";

/// Kineto's collective args for a communication task (docs/TRACES.md §2.6): "Collective name",
/// "In msg nelems" / "Out msg nelems" in elements of the dtype (all-gather's input and
/// reduce-scatter's output are the per-rank shard, ir::Collective::bytes being the full buffer;
/// a task standing for `count` calls gives their total), "Group size", "dtype",
/// "Process Group Name", "Process Group Description", "Process Group Ranks" ("[0, 1, 2, 3]")
/// from `layout`, and "Src Rank" / "Dst Rank" (world ranks) for sends and receives, which go
/// through the default process group. Empty for compute and host waits.
std::vector<traces::Arg> communication_args(const ir::Graph& graph, ir::TaskId id,
                                            const WorldLayout& layout);

}  // namespace metron::timelines
