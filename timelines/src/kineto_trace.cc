// Note [kineto trace layout] (kineto_trace.h).

#include "metron/timelines/kineto_trace.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <variant>

#include "layout_common.h"
#include "metron/timelines/kineto_names.h"

namespace metron::timelines {
namespace {

/// CUPTI's callback id of cudaLaunchKernel (cupti_runtime_cbid.h), as Kineto writes it in cbid.
constexpr std::int64_t kLaunchKernelCbid = 211;
constexpr std::int64_t kMicrosecond = 1000;
/// A stream's sync row: Kineto moves sync events off the kernels' row (docs/TRACES.md §2.2).
constexpr std::int64_t kSyncTidOffset = 1000;

/// A kernel of the rank: its task, and when it was issued and started (trace time, no offset).
struct Launch {
  ir::TaskId task;
  std::int64_t issue = 0;
  std::int64_t kernel_start = 0;
  /// Kernels of other streams it waits for (its event-wait dependencies that ran), each a
  /// cudaStreamWaitEvent just before the launch.
  std::vector<ir::TaskId> waits;
  bool recorded = false;  ///< a kernel of another stream waits for it: a cudaEventRecord after
  std::int64_t slot = 0;  ///< when its first host call (a wait, else the launch) starts

  /// Host calls in its slot: waits, the launch, the record.
  [[nodiscard]] std::int64_t calls() const { return std::ssize(waits) + 1 + (recorded ? 1 : 0); }
  /// When its cudaLaunchKernel starts.
  [[nodiscard]] std::int64_t start() const { return slot + std::ssize(waits) * kLaunchNs; }
};

/// Places each launch at its issue time, one after another (the host thread runs one call at a
/// time), then moves back any that would start less than kLaunchLeadNs before its kernel, and
/// those before it as far as needed (Note [kineto trace layout]). A launch's slot holds its
/// stream waits, the launch and its event record, kLaunchNs each.
void place_launches(std::vector<Launch>& launches) {
  std::int64_t free_at = std::numeric_limits<std::int64_t>::min();
  for (Launch& l : launches) {
    l.slot = std::max(l.issue, free_at);
    free_at = l.slot + l.calls() * kLaunchNs;
  }
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  for (auto it = launches.rbegin(); it != launches.rend(); ++it) {
    const std::int64_t latest =
        it->kernel_start - kLaunchLeadNs - std::ssize(it->waits) * kLaunchNs;
    it->slot = std::min({it->slot, latest, next - it->calls() * kLaunchNs});
    next = it->slot;
  }
}

/// The default (world) group, then the layout's groups and pipeline groups once per pg_name
/// (docs/TRACES.md §2.7).
std::vector<traces::ProcessGroupConfig> process_groups(const WorldLayout& layout) {
  std::vector<traces::ProcessGroupConfig> groups;
  traces::ProcessGroupConfig world{.pg_name = std::string(kDefaultPgName),
                                   .pg_desc = std::string(kDefaultPgDescription)};
  for (std::int64_t r = 0; r < layout.world_size; ++r) world.ranks.push_back(r);
  groups.push_back(std::move(world));
  std::set<std::string> seen{std::string(kDefaultPgName)};
  for (const std::vector<GroupNaming>* list : {&layout.groups, &layout.pipeline_groups}) {
    for (const GroupNaming& g : *list) {
      if (!seen.insert(g.pg_name).second) continue;
      groups.push_back({.pg_name = g.pg_name, .pg_desc = g.description, .ranks = g.world_ranks});
    }
  }
  return groups;
}

/// The kernels of `rank` in issue order, their launches placed.
std::vector<Launch> rank_launches(const ir::Graph& graph, const Timeline& timeline,
                                  const std::vector<std::int64_t>& issue, ir::RankId rank) {
  std::vector<Launch> launches;
  for (ir::TaskId id : graph.issue_order(rank)) {
    const ir::Task& t = graph.task(id);
    const TaskSpan& span = timeline.tasks[id.index()];
    if (!t.stream.valid() || span.start_ns < 0 || span.end_ns <= span.start_ns) continue;
    // A task that ran was issued; an issue time after its start (an inconsistent input) is
    // capped so that the launch still precedes its kernel.
    const std::int64_t issued = std::clamp<std::int64_t>(issue[id.index()], 0, span.start_ns);
    launches.push_back({.task = id, .issue = issued, .kernel_start = span.start_ns});
  }
  // Cross-stream event waits between kernels of the rank, in Kineto's CUDA sync vocabulary, so
  // that HTA's critical path follows them; a producer issued later than its consumer (which
  // the host could not have recorded yet) is left out.
  std::map<std::int32_t, std::size_t> position;
  for (std::size_t k = 0; k < launches.size(); ++k) position[launches[k].task.value()] = k;
  for (std::size_t k = 0; k < launches.size(); ++k) {
    const ir::Task& t = graph.task(launches[k].task);
    for (ir::TaskId dep : t.deps) {
      const auto found = position.find(dep.value());
      if (found == position.end() || found->second >= k || graph.task(dep).stream == t.stream) {
        continue;
      }
      launches[k].waits.push_back(dep);
      launches[found->second].recorded = true;
    }
  }
  place_launches(launches);
  return launches;
}

/// Everything that a rank's document shares with the others.
struct Shared {
  const ir::Graph& graph;
  const Timeline& timeline;
  const WorldLayout& layout;
  const std::vector<traces::Arg>& metadata;
  std::vector<std::int64_t> tids;
  std::vector<traces::ProcessGroupConfig> groups;
  std::int64_t offset = 0;  ///< added to every time
};

traces::TraceDocument rank_trace(const Shared& shared, const std::vector<Launch>& launches,
                                 ir::RankId rank) {
  const ir::Graph& graph = shared.graph;
  const Timeline& timeline = shared.timeline;
  const WorldLayout& layout = shared.layout;
  const std::vector<std::int64_t>& tids = shared.tids;
  const std::int64_t offset = shared.offset;
  const std::int64_t world_rank = layout.world_rank[rank.index()];
  const std::int64_t device = layout.local_device[rank.index()];
  const std::int64_t host_pid = kHostPidBase + world_rank;
  const std::int64_t host_tid = host_pid;
  traces::TraceDocument doc;
  doc.metadata = shared.metadata;
  doc.rank = world_rank;
  doc.world_size = layout.world_size;
  doc.backend = "nccl";
  doc.pg_config = shared.groups;
  doc.nccl_version = kNcclVersion;

  const std::string who = "rank " + std::to_string(world_rank);
  doc.processes.push_back({.pid = host_pid, .name = who + " host", .sort_index = world_rank});
  doc.threads.push_back({.pid = host_pid,
                         .tid = host_tid,
                         .name = "thread " + std::to_string(host_tid) + " (main)",
                         .sort_index = host_tid});
  doc.processes.push_back({.pid = device,
                           .name = who + " GPU " + std::to_string(device),
                           .sort_index = kGpuSortIndexBase + device});
  std::int64_t counter_tid = 0;
  for (ir::StreamId s : graph.streams_of(rank)) {
    const std::int64_t tid = tids[s.index()];
    if (counter_tid == 0 || graph.stream(s).name == "compute") counter_tid = tid;
    doc.threads.push_back({.pid = device,
                           .tid = tid,
                           .name = "stream " + std::to_string(tid) + " " + graph.stream(s).name,
                           .sort_index = tid});
  }

  // Correlation ids: a kernel and its launch take task id + 1; event records and stream waits
  // take ids after every task's.
  std::int64_t next_correlation = std::int64_t{graph.num_tasks()} + 1;
  std::map<std::int32_t, std::int64_t> record_of;  // producer task → its cudaEventRecord's id
  std::set<std::int64_t> sync_rows;
  const auto host_call = [&](const char* name, std::int64_t start, std::int64_t correlation) {
    traces::Slice call{.pid = host_pid,
                       .tid = host_tid,
                       .name = name,
                       .cat = "cuda_runtime",
                       .start_ns = start + offset,
                       .duration_ns = kLaunchNs};
    call.args.push_back({"External id", correlation});
    call.args.push_back({"correlation", correlation});
    doc.slices.push_back(std::move(call));
  };
  for (const Launch& l : launches) {
    const ir::Task& t = graph.task(l.task);
    const TaskSpan& span = timeline.tasks[l.task.index()];
    const std::int64_t correlation = std::int64_t{l.task.value()} + 1;
    const std::int64_t tid = tids[t.stream.index()];
    std::int64_t at = l.slot;
    for (ir::TaskId producer : l.waits) {
      // The host's cudaStreamWaitEvent and the device's "Stream Wait Event" on a sync row of the
      // consumer's stream (Kineto's "stream <id> (sync)"), at the kernel's start, zero long.
      const std::int64_t wait = next_correlation++;
      host_call("cudaStreamWaitEvent", at, wait);
      at += kLaunchNs;
      traces::Slice sync{.pid = device,
                         .tid = tid + kSyncTidOffset,
                         .name = "Stream Wait Event",
                         .cat = "cuda_sync",
                         .start_ns = span.start_ns + offset,
                         .duration_ns = 0};
      sync.args.push_back({"device", device});
      sync.args.push_back({"stream", tid});
      sync.args.push_back({"correlation", wait});
      sync.args.push_back({"wait_on_stream", tids[graph.task(producer).stream.index()]});
      sync.args.push_back({"wait_on_cuda_event_record_corr_id", record_of.at(producer.value())});
      doc.slices.push_back(std::move(sync));
      sync_rows.insert(tid);
    }
    const bool communication = t.kind() != ir::TaskKind::kCompute;
    traces::Slice kernel{.pid = device,
                         .tid = tid,
                         .name = communication ? nccl_kernel_name(t) : detail::slice_name(graph, t),
                         .cat = "kernel",
                         .start_ns = span.start_ns + offset,
                         .duration_ns = span.end_ns - span.start_ns};
    kernel.args.push_back({"External id", correlation});
    kernel.args.push_back({"device", device});
    kernel.args.push_back({"stream", tid});
    kernel.args.push_back({"correlation", correlation});
    detail::add_task_args(kernel.args, world_rank, t, l.task);
    if (communication) {
      for (traces::Arg& arg : communication_args(graph, l.task, layout)) {
        kernel.args.push_back(std::move(arg));
      }
    }
    doc.slices.push_back(std::move(kernel));
    traces::Slice launch{.pid = host_pid,
                         .tid = host_tid,
                         .name = "cudaLaunchKernel",
                         .cat = "cuda_runtime",
                         .start_ns = at + offset,
                         .duration_ns = kLaunchNs};
    launch.args.push_back({"External id", correlation});
    launch.args.push_back({"cbid", kLaunchKernelCbid});
    launch.args.push_back({"correlation", correlation});
    doc.slices.push_back(std::move(launch));
    doc.flows.push_back(
        {.pid = host_pid, .tid = host_tid, .ts_ns = at + offset, .id = correlation, .start = true});
    doc.flows.push_back({.pid = device,
                         .tid = tid,
                         .ts_ns = span.start_ns + offset,
                         .id = correlation,
                         .start = false});
    if (l.recorded) {
      const std::int64_t record = next_correlation++;
      record_of[l.task.value()] = record;
      host_call("cudaEventRecord", at + kLaunchNs, record);
    }
  }
  for (std::int64_t tid : sync_rows) {
    doc.threads.push_back({.pid = device,
                           .tid = tid + kSyncTidOffset,
                           .name = "stream " + std::to_string(tid) + " (sync)",
                           .sort_index = tid + kSyncTidOffset});
  }

  // The step: from ts 0, which leaves room for launches moved before their issue time, to the
  // makespan.
  doc.slices.push_back({.pid = host_pid,
                        .tid = host_tid,
                        .name = "ProfilerStep#0",
                        .cat = "user_annotation",
                        .start_ns = 0,
                        .duration_ns = timeline.step_end_ns + offset});
  if (counter_tid != 0) {
    const auto r = rank.index();
    detail::add_memory_counter(
        doc, device, counter_tid,
        r < timeline.memory.size() ? timeline.memory[r]
                                   : std::vector<std::pair<std::int64_t, std::int64_t>>{},
        r < timeline.static_memory_bytes.size() ? timeline.static_memory_bytes[r] : 0, offset);
  }
  return doc;
}

}  // namespace

std::string rank_trace_file_name(std::int64_t world_rank) {
  return "rank-" + std::to_string(world_rank) + ".json";
}

std::vector<traces::TraceDocument> rank_traces(const ir::Graph& graph, const Timeline& timeline,
                                               const WorldLayout& layout,
                                               std::vector<traces::Arg> metadata) {
  check_inputs(graph, timeline, layout);
  const std::vector<std::int64_t> issue = issue_times(graph, timeline);
  Shared shared{.graph = graph,
                .timeline = timeline,
                .layout = layout,
                .metadata = metadata,
                .tids = detail::stream_tids(graph),
                .groups = process_groups(layout)};
  std::vector<std::vector<Launch>> launches;
  std::int64_t earliest = 0;
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    launches.push_back(rank_launches(graph, timeline, issue, ir::RankId{r}));
    if (!launches.back().empty()) earliest = std::min(earliest, launches.back().front().slot);
  }
  // The same whole number of microseconds in every file: times stay comparable across ranks,
  // and HTA's rounding to microseconds treats every kernel as it would unshifted.
  shared.offset = (-earliest + kMicrosecond - 1) / kMicrosecond * kMicrosecond;
  std::vector<traces::TraceDocument> docs;
  docs.reserve(static_cast<std::size_t>(graph.num_ranks()));
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    docs.push_back(rank_trace(shared, launches[static_cast<std::size_t>(r)], ir::RankId{r}));
  }
  return docs;
}

}  // namespace metron::timelines
