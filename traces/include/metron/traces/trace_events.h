#pragma once
// Plain trace events, independent of who produced them (simulator or executor) and of the file
// format: what a Chrome/Perfetto trace shows (docs/TRACES.md §1, §6). Times are integer nanoseconds
// from the trace start; the writer turns them into the format's microseconds.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace metron::traces {

/// An argument shown with an event: integers stay integers (docs/TRACES.md §6.3 wants integer ids).
struct Arg {
  std::string key;
  std::variant<std::int64_t, double, std::string> value;
  friend bool operator==(const Arg&, const Arg&) = default;
};

/// A complete slice (`ph: "X"`) on one row (pid, tid).
struct Slice {
  std::int64_t pid = 0;
  std::int64_t tid = 1;  ///< never 0 (Perfetto drops tid 0 rows)
  std::string name;
  std::string cat;  ///< compute, comm, memcpy, bubble, annotation, ...
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  std::vector<Arg> args;
  /// v2 flow arrow starting here (bind_id). A v2 slice carries one bind_id, so at most one of
  /// flow_out and flow_in is set (the writer rejects both); each id starts exactly one arrow.
  std::optional<std::int64_t> flow_out;
  std::optional<std::int64_t> flow_in;  ///< v2 flow arrow ending here (bind_id)
  friend bool operator==(const Slice&, const Slice&) = default;
};

/// A counter sample (`ph: "C"`): one track per (pid, name, series key).
struct CounterSample {
  std::int64_t pid = 0;
  /// A named row of the process. Perfetto attaches counters to the process, but an event without
  /// a tid makes it create a thread with tid = pid and no name, an empty row (docs/TRACES.md
  /// §1.6, "Missing tid").
  std::int64_t tid = 1;
  std::string name;  ///< e.g. "HBM"
  std::int64_t ts_ns = 0;
  std::vector<std::pair<std::string, double>> series;  ///< e.g. {"allocated_bytes", 1.2e9}
  friend bool operator==(const CounterSample&, const CounterSample&) = default;
};

/// An instant (`ph: "i"`): global (a step boundary) or on one process.
struct Instant {
  std::int64_t pid = 0;
  std::int64_t tid = 1;
  std::string name;
  std::int64_t ts_ns = 0;
  bool global = false;  ///< s:"g" when true, s:"p" otherwise
  std::vector<Arg> args;
  friend bool operator==(const Instant&, const Instant&) = default;
};

/// One end of a v1 flow arrow (`ph: "s"` or `"f"`), Kineto's launch → kernel arrow (cat and name
/// `ac2g`, id = correlation; docs/TRACES.md §2.5). Its ts lies inside a slice of the same row; the
/// writer puts it after the slices of its (ts, pid, tid), so it comes after its slice (§1.6,
/// "Flow v1"). An end (`f`) binds to its enclosing slice ("bp": "e").
struct FlowEvent {
  std::int64_t pid = 0;
  std::int64_t tid = 1;
  std::int64_t ts_ns = 0;
  std::int64_t id = 0;
  bool start = true;  ///< "s" when true, "f" (with "bp": "e") otherwise
  std::string cat = "ac2g";
  std::string name = "ac2g";
  friend bool operator==(const FlowEvent&, const FlowEvent&) = default;
};

/// One process group of distributedInfo.pg_config, as PyTorch writes it (docs/TRACES.md §2.7).
struct ProcessGroupConfig {
  std::string pg_name;  ///< e.g. "0"
  std::string pg_desc;  ///< e.g. "default_pg"
  std::string backend_config = "cuda:nccl";
  std::vector<std::int64_t> ranks;  ///< global ranks; pg_size is their count
  friend bool operator==(const ProcessGroupConfig&, const ProcessGroupConfig&) = default;
};

/// A process (one rank) and its sort position.
struct ProcessInfo {
  std::int64_t pid = 0;
  std::string name;  ///< e.g. "Rank 3 (pp=1 tp=0 dp=1)"
  std::int64_t sort_index = 0;
  friend bool operator==(const ProcessInfo&, const ProcessInfo&) = default;
};

/// A row of a process and its sort position.
struct ThreadInfo {
  std::int64_t pid = 0;
  std::int64_t tid = 1;
  std::string name;  ///< e.g. "stream 7 compute"
  std::int64_t sort_index = 0;
  friend bool operator==(const ThreadInfo&, const ThreadInfo&) = default;
};

/// Everything one trace file holds (docs/TRACES.md §6.1 header fields plus the events).
struct TraceDocument {
  /// otherData / metadata: tool, version, parallel sizes, schedule, "simulator" or "executor"...
  std::vector<Arg> metadata;
  /// distributedInfo: set for per-rank (executor / HTA) files; the merged simulator file leaves
  /// it unset.
  std::optional<std::int64_t> rank;
  std::optional<std::int64_t> world_size;
  /// distributedInfo's other keys, written only when set: backend (first, as PyTorch writes it),
  /// pg_count and pg_config (when pg_config is not empty), nccl_version (docs/TRACES.md §2.7).
  std::optional<std::string> backend;
  std::vector<ProcessGroupConfig> pg_config;
  std::optional<std::string> nccl_version;
  /// baseTimeNanoseconds: the absolute time of ts 0 (0 for the simulator; docs/TRACES.md §6.1).
  std::int64_t base_time_ns = 0;
  std::vector<ProcessInfo> processes;
  std::vector<ThreadInfo> threads;
  std::vector<Slice> slices;
  std::vector<CounterSample> counters;
  std::vector<Instant> instants;
  std::vector<FlowEvent> flows;  ///< v1 flow ends (launch → kernel arrows)
};

}  // namespace metron::traces
