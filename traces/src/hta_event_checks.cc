// The Checker's HTA rules on events (TraceCheckOptions::hta): what HTA needs to see GPU work,
// streams and kernel launches. Apart because only per-rank executor files are held to them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "event_checker.h"
#include "trace_values.h"

namespace metron::traces::detail {

bool Checker::is_gpu_work_category(const std::string& cat) {
  // HTA's kernel categories (kernel)|(gpu_mem.+) (§2.8).
  return cat.find("kernel") != std::string::npos || (cat.starts_with("gpu_mem") && cat.size() > 7);
}

bool Checker::is_cpu_category(const std::string& cat) {
  return cat.starts_with("cpu_op") || cat == "user_annotation" ||
         (cat.size() > 8 && cat.ends_with("_runtime"));
}

void Checker::check_hta_events() {
  bool has_steps = false;
  std::set<std::int64_t> launches;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = info_[i];
    if (e.ph == "B" || e.ph == "E") add(i, "HTA drops B/E events (no dur); write X events");
    if (e.ph != "X") continue;
    if (e.name.starts_with("ProfilerStep#")) has_steps = true;
    if (!e.has_cat) add(i, "has no cat; HTA drops it");
    const Json* args = member(events_[i], "args");
    const Json* stream = args == nullptr ? nullptr : member(*args, "stream");
    if (is_cpu_category(e.cat)) {
      if (stream != nullptr) add(i, "CPU event carries args.stream; HTA takes it for GPU work");
      if (e.cat.ends_with("_runtime")) {
        if (auto c = integer(args == nullptr ? nullptr : member(*args, "correlation"))) {
          launches.insert(*c);
        }
      }
    } else if (e.cat == "gpu_user_annotation") {
      if (stream != nullptr) {
        add(i, "gpu_user_annotation carries args.stream; HTA would count it as a kernel");
      }
    } else if (stream != nullptr || is_gpu_work_category(e.cat)) {
      check_gpu_event(i, args, stream);
    }
  }
  if (!has_steps) return;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    if (info_[i].ph != "X" || !is_gpu_work_category(info_[i].cat)) continue;
    const Json* args = member(events_[i], "args");
    const auto c = integer(args == nullptr ? nullptr : member(*args, "correlation"));
    if (c && !launches.contains(*c)) {
      add(i, "correlation " + std::to_string(*c) +
                 " has no cuda_runtime launch; with ProfilerStep# markers HTA drops the kernel");
    }
  }
}

void Checker::check_gpu_event(std::size_t i, const Json* args, const Json* stream) {
  const std::optional<std::int64_t> s = integer(stream);
  if (stream == nullptr) {
    add(i, "GPU event has no args.stream; HTA does not see it as GPU work");
  } else if (!s || *s < 1) {
    add(i, "GPU event's args.stream " + stream->dump() + " is not an integer >= 1");
  }
  for (const char* key : {"device", "correlation"}) {
    if (!integer(args == nullptr ? nullptr : member(*args, key))) {
      add(i, std::string("GPU event has no integer args.") + key);
    }
  }
  const Event& e = info_[i];
  const bool collective = args != nullptr && member(*args, "Collective name") != nullptr;
  if (collective && !e.name.starts_with("nccl") && e.name.find("ncclKernel") == std::string::npos) {
    add(i, "collective kernel is not named nccl...; HTA counts it as computation");
  }
}

}  // namespace metron::traces::detail
