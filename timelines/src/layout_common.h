#pragma once
// Private: what the merged and the per-rank layouts share (rows of streams, slice names, tags).

#include <cstdint>
#include <string>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/traces/trace_events.h"

namespace metron::timelines::detail {

inline constexpr std::int64_t kHostTid = 1;
inline constexpr std::int64_t kBubbleTid = 90;
inline constexpr std::int64_t kAnnotationTid = 91;

/// tid of every stream by StreamId, per Note [merged trace layout] (merged_trace.h).
std::vector<std::int64_t> stream_tids(const ir::Graph& graph);

/// "F3 mb=3 chunk=0", "SEND_F3 mb=3 ->r1", "all-reduce dp0 bytes=N", "host wait".
std::string slice_name(const ir::Graph& graph, const ir::Task& task);

/// rank (given), stage, microbatch, chunk (when tagged), task.
void add_task_args(std::vector<traces::Arg>& args, std::int64_t rank, const ir::Task& task,
                   ir::TaskId id);

/// HBM samples of one rank: static bytes + each (time, dynamic bytes) sample, times + offset.
void add_memory_counter(traces::TraceDocument& doc, std::int64_t pid, std::int64_t tid,
                        const std::vector<std::pair<std::int64_t, std::int64_t>>& samples,
                        std::int64_t static_bytes, std::int64_t offset_ns);

}  // namespace metron::timelines::detail
