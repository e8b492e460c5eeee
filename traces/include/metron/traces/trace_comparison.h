#pragma once
// Predicted against measured (issue 17, `metron compare`): what two merged traces of one graph
// say about the step — the simulator's (`simulate --trace`) and the executor's (`run --trace`),
// both in the layout of docs/TRACES.md §6.3 — side by side, figure by figure and task by task.
// Note [trace comparison]:
//   - A task is an `X` slice with an integer args.task (the graph's TaskId), so the same task is
//     found in both traces whatever its name; its kind is read off the name (F, B, I, W, OPT,
//     send, recv, or the collective).
//   - Per rank (the process, pid = rank): compute is the union of its "compute" slices, comm the
//     union of its "comm" slices, exposed comm the part of comm outside compute, idle the
//     iteration time minus compute, bubbles the "bubble" slices by args.reason, peak memory the
//     largest "HBM" counter value. The iteration is the latest end of any task.
//   - A communication slice (cat "comm") counts from its rendezvous: the latest start among the
//     slices with its args.comm_instance (a collective's members, a send and its receive), as
//     Note [timeline metrics] (sim/timeline_result.h) counts it, so that a receive posted long
//     before its send is idle, not communication. Its task's start and duration are the same.
//     A trace without comm_instance counts each slice whole.
//   - An error is (predicted − measured) / measured: positive when the prediction is too slow.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace metron::traces {

/// One task as a trace shows it.
struct TraceTask {
  std::int64_t task = -1;
  std::int64_t rank = 0;
  std::string name;
  std::string kind;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
};

/// One rank's figures (Note [trace comparison]).
struct TraceRank {
  std::int64_t compute_ns = 0;
  std::int64_t idle_ns = 0;
  std::int64_t comm_ns = 0;
  std::int64_t comm_exposed_ns = 0;
  std::int64_t comm_overlapped_ns = 0;
  std::map<std::string, std::int64_t> bubble_ns;  ///< by reason
  double peak_memory_bytes = 0;
};

/// A step as a merged trace shows it.
struct TraceStep {
  std::int64_t iteration_ns = 0;
  std::map<std::int64_t, TraceRank> ranks;  ///< by rank (pid)
  std::vector<TraceTask> tasks;
};

/// Reads a merged trace's JSON text. Throws ParseError naming `source` for malformed JSON or a
/// document without traceEvents, and InvalidConfig when it holds no task slice.
TraceStep read_trace_step(std::string_view text, const std::string& source);

/// "F", "B", "I", "W", "OPT", "send", "recv", the collective ("all-reduce", ...), or "other".
std::string task_kind(std::string_view slice_name);

/// The text report: iteration time; per rank compute, idle, bubble by reason, comm, exposed and
/// overlapped comm, peak memory (predicted, measured, error); per task kind the count and the
/// 10th, 50th and 90th percentiles of the duration error; the `top` tasks whose durations differ
/// most. Throws InvalidConfig when the traces share no task (not of one graph).
std::string compare_trace_steps(const TraceStep& predicted, const TraceStep& measured,
                                std::int32_t top);

/// One trace holding both: rank r's predicted process (pid 2r, "rank r predicted") above its
/// measured one (pid 2r + 1, "rank r measured"), flows kept apart. Throws as read_trace_step.
std::string side_by_side_trace(std::string_view predicted_text, std::string_view measured_text);

}  // namespace metron::traces
