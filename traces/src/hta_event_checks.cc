// The Checker's HTA rules on events (TraceCheckOptions::hta): exactly what breaks an analysis of
// Holistic Trace Analysis (docs/TRACES.md §2.8; hta/common/trace_parser.py, trace.py,
// analyzers/breakdown_analysis.py, trace_counters.py, critical_path_analysis.py at f4d0062).
// What HTA merely drops without harm (a CPU event without cat, B/E pairs, instants) is not
// reported. Apart because only per-rank files are held to them.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "event_checker.h"
#include "trace_values.h"

namespace metron::traces::detail {
namespace {

/// The categories HTA's idle-time breakdown keeps as GPU work (get_idle_time_breakdown's
/// kernel_cats); every other GPU event still counts as busy time in the temporal breakdown.
bool is_kept_kernel_category(const std::string& cat) {
  return cat == "kernel" || cat == "Kernel" || cat == "gpu_memcpy" || cat == "Memcpy" ||
         cat == "gpu_memset" || cat == "Memset" || cat == "mtia_ccp_events";
}

std::optional<std::int64_t> correlation_of(const Json* args) {
  return integer(args == nullptr ? nullptr : member(*args, "correlation"));
}

}  // namespace

bool Checker::is_gpu_work_category(const std::string& cat) {
  // HTA's kernel categories (kernel)|(gpu_mem.+)|(mtia_ccp_events) (§2.8).
  return cat.find("kernel") != std::string::npos ||
         (cat.starts_with("gpu_mem") && cat.size() > 7) || cat == "mtia_ccp_events";
}

bool Checker::is_cpu_category(const std::string& cat) {
  return cat.starts_with("cpu_op") || cat == "user_annotation" ||
         (cat.size() > 8 && cat.ends_with("_runtime"));
}

void Checker::check_hta_events() {
  std::size_t steps = 0;
  std::map<std::int64_t, std::vector<std::size_t>> launches;  // cuda_runtime by correlation
  std::vector<std::size_t> gpu;                               // GPU work (args.stream)
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = info_[i];
    const Json* args = member(events_[i], "args");
    const Json* stream = args == nullptr ? nullptr : member(*args, "stream");
    if (e.ph == "X" && e.name.starts_with("ProfilerStep#") && is_cpu_category(e.cat)) ++steps;
    if (e.ph == "X" && e.cat.ends_with("_runtime")) {
      if (auto c = correlation_of(args)) launches[*c].push_back(i);
    }
    if (stream == nullptr) {
      if ((e.ph == "X" || e.ph == "B") && is_gpu_work_category(e.cat)) {
        add(i, "GPU event has no args.stream; HTA does not see it as GPU work");
      }
      continue;
    }
    // HTA takes every event with args.stream for GPU work (stream != -1).
    if (e.ph != "X") {
      add(i, "GPU event (args.stream) is not an X event; HTA drops events without dur");
      continue;
    }
    if (!e.has_cat) {
      add(i, "GPU event (args.stream) has no cat; HTA drops it");
      continue;
    }
    if (is_cpu_category(e.cat)) {
      add(i, "CPU event carries args.stream; HTA takes it for GPU work");
      continue;
    }
    if (e.cat == "gpu_user_annotation") {
      add(i, "gpu_user_annotation carries args.stream; HTA would count it as a kernel");
      continue;
    }
    if (!is_kept_kernel_category(e.cat) && e.cat != "cuda_sync") {
      add(i, "GPU event's cat \"" + e.cat +
                 "\" is none of kernel, gpu_memcpy, gpu_memset: HTA counts it as GPU time but "
                 "its idle-time breakdown drops it (\"No objects to concatenate\" when no "
                 "kernel is left)");
    }
    check_gpu_event(i, args, stream);
    gpu.push_back(i);
  }
  for (const auto& [correlation, calls] : launches) {
    for (std::size_t k = 1; k < calls.size(); ++k) {
      add(calls[k], "cuda_runtime correlation " + std::to_string(correlation) +
                        " already belongs to " + short_name(calls[0]) +
                        "; HTA's queue length needs one launch per kernel");
    }
  }
  for (std::size_t i : gpu) {
    const auto c = correlation_of(member(events_[i], "args"));
    if (!c) continue;
    const auto launch = launches.find(*c);
    if (launch == launches.end()) {
      // With two or more steps HTA keeps only kernels launched by a CPU event (trace.py,
      // filter_gpu_kernels_with_cpu_correlation); with one it keeps them all.
      if (steps >= 2 && is_gpu_work_category(info_[i].cat)) {
        add(i, "correlation " + std::to_string(*c) +
                   " has no cuda_runtime launch; with two or more ProfilerStep# markers HTA "
                   "drops the kernel");
      }
      continue;
    }
    const Event& launch_event = info_[launch->second.front()];
    if (launch_event.ts && info_[i].ts && *launch_event.ts > *info_[i].ts) {
      add(i, "starts before its launch " + short_name(launch->second.front()) +
                 "; HTA's queue length and critical path see the kernel run before it was "
                 "launched");
    }
  }
}

void Checker::check_gpu_event(std::size_t i, const Json* args, const Json* stream) {
  const std::optional<std::int64_t> s = integer(stream);
  if (!s || *s < 0) {
    add(i, "GPU event's args.stream " + stream->dump() +
               " is not an integer >= 0; HTA keys streams by integer and -1 marks CPU events");
  }
  if (!correlation_of(args)) {
    add(i, "GPU event has no integer args.correlation; HTA joins it to its launch by it");
  }
  const Event& e = info_[i];
  const bool collective = args != nullptr && member(*args, "Collective name") != nullptr;
  if (collective && !e.name.starts_with("nccl") && e.name.find("ncclKernel") == std::string::npos) {
    add(i, "collective kernel is not named nccl...; HTA counts it as computation");
  }
}

}  // namespace metron::traces::detail
