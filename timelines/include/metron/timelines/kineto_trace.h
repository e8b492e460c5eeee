#pragma once
// Per-rank traces shaped as Kineto writes them (docs/TRACES.md §6.2), one per graph rank, so that
// Holistic Trace Analysis runs unchanged on a directory of them (§2.8). Note [kineto trace
// layout]:
//
//   File "rank-<world rank>.json", distributedInfo {backend "nccl", rank, world_size, pg_count,
//   pg_config (the default pg "0" of every world rank, then the layout's groups), nccl_version}.
//   Host: pid = kHostPidBase + world rank (a stable stand-in for the OS pid, clear of device
//   indices), one main thread with tid = pid (as Linux numbers a main thread), named
//   "thread <tid> (main)". On it: a `ProfilerStep#0` user_annotation spanning the step, and per
//   kernel a `cuda_runtime` `cudaLaunchKernel` of kLaunchNs with args correlation, External id
//   and cbid. Launch times: each at its task's issue time (issue_times()), one after another
//   when a burst is issued at one time (the host thread makes one call at a time); a launch that
//   would start less than kLaunchLeadNs before its kernel moves back to that, and earlier
//   launches with it as far as needed, so the host may be shown running ahead of a host wait by
//   a few microseconds. Every time in every rank's file is then offset by the same whole number
//   of microseconds so that the earliest launch is at ts >= 0 (the step starts at that offset).
//   GPU: pid = the local device index, process_sort_index 5000000 + device; one row per stream,
//   tid = the merged layout's stream tid (7 compute, 20 tp, 21 dp, ...; merged_trace.h), named
//   "stream <tid> <stream name>". Device work is `cat: kernel`: compute named as in the merged
//   trace ("F3 mb=3 chunk=0"), communication named as NCCL's kernels (kineto_names.h) with
//   Kineto's collective args; every kernel has args device, stream, correlation, External id,
//   rank (world), task, and stage / microbatch / chunk when tagged. `ac2g` s/f flows join each
//   launch to its kernel (s after the launch, f with "bp": "e" after the kernel). A kernel that
//   waits for a kernel of another stream gets what CUDA shows for it: a `cudaEventRecord` after
//   the producer's launch, a `cudaStreamWaitEvent` before the consumer's, and a zero-long
//   "Stream Wait Event" (`cat: cuda_sync`) at the kernel's start on the consumer stream's sync
//   row "stream <tid> (sync)" (tid + 1000, as Kineto moves syncs off the kernel rows), so that
//   HTA's critical path follows dependencies across streams. The "HBM"
//   counter (static + dynamic bytes) is on the compute stream's row. Host waits, bubbles and
//   zero-length or never-run tasks are left out.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/timelines/timeline.h"
#include "metron/traces/trace_events.h"

namespace metron::timelines {

/// The host process's pid is kHostPidBase + world rank.
inline constexpr std::int64_t kHostPidBase = 1'000'000;
/// Kineto's kExceedMaxPid: GPU processes sort after the host's.
inline constexpr std::int64_t kGpuSortIndexBase = 5'000'000;
/// Nominal duration of one cudaLaunchKernel (the simulator does not model launch cost): a few
/// microseconds, as measured, and at least 2 µs so that it keeps a positive duration after HTA
/// rounds ns traces (ts up, end down to whole µs), which critical-path analysis needs.
inline constexpr std::int64_t kLaunchNs = 2000;
/// A launch starts at least this long before its kernel: HTA's queue length sorts launches and
/// kernels by their rounded ts, not stably, and would count a kernel before its launch.
inline constexpr std::int64_t kLaunchLeadNs = 1000;
/// The NCCL version distributedInfo names.
inline constexpr const char* kNcclVersion = "2.21.5";

/// "rank-<world rank>.json".
std::string rank_trace_file_name(std::int64_t world_rank);

/// One document per graph rank (by RankId), each to be written as
/// rank_trace_file_name(layout.world_rank[r]); `metadata` goes to otherData / metadata of each.
/// Throws InvalidConfig when the inputs do not fit the graph (check_inputs).
std::vector<traces::TraceDocument> rank_traces(const ir::Graph& graph, const Timeline& timeline,
                                               const WorldLayout& layout,
                                               std::vector<traces::Arg> metadata);

}  // namespace metron::timelines
