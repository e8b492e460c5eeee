#pragma once
// The discrete-event simulator: interprets any validated ir::Graph under the ordering rules of
// docs/ARCHITECTURE.md (ir/ordering.h, Note [ordering rules]) with given task durations, and
// reports when every task ran and what each rank did. Note [simulation semantics]:
//
//   Time is integer nanoseconds. The ordering rules are ir::OrderingState's (ir/ordering.h,
//   Note [ordering rules]), the same state machine the static deadlock check drives with unit
//   costs: a launch unit (one task, or every member of a collective / send–recv instance) starts
//   at the moment the state machine makes it startable, and completes its duration later; the
//   members of an instance start together and run for the longest of their durations.
//
//   Compute slow-down: while at least one communication task of the same rank runs, a compute
//   task progresses at rate 1 / (1 + compute_slowdown_during_comm); its end moves accordingly.
//   Communication slow-down, the other half of sharing a device: while a compute task runs on
//   any rank of a communication instance, the instance progresses at rate
//   1 / (1 + comm_slowdown_during_compute), and all its members' ends move together. On GPUs
//   NCCL's kernels share SMs and HBM with the GEMMs they overlap; on the CPU backend the
//   collective's reductions and copies share the cores with the compute thread.
//
//   Ties: events at the same time are processed in (time, kind, rank, task id) order — task ends
//   before task starts, lower ranks first, lower ids first — so the result is a function of the
//   input alone (byte-identical outputs).

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/graph.h"

namespace metron::sim {

/// Integer nanoseconds.
using Time = std::int64_t;

/// Seconds (or milliseconds) to Time, rounded to the nearest nanosecond.
Time from_seconds(double seconds);
Time from_milliseconds(double milliseconds);

struct SimOptions {
  double compute_slowdown_during_comm = 0.0;  ///< HardwareSpec's; >= 0
  double comm_slowdown_during_compute = 0.0;  ///< HardwareSpec's; >= 0
  /// By GroupId: the ranks each group stands for, when the graph holds one replica for many
  /// (scenario's symmetric mode); what RankMetrics::bytes_sent counts a member's traffic with.
  /// Empty, or 0 for a group: its members in the graph.
  std::vector<std::int64_t> group_sizes;
};

/// Why a rank's compute stream sat idle (bubble slices in traces carry these names).
enum class BubbleCause {
  kWarmup,          ///< before the rank's first compute task
  kCooldown,        ///< after its last compute task
  kWaitRecv,        ///< the next compute task waited for a p2p receive
  kWaitCollective,  ///< ... for a collective
  kOther,           ///< ... for anything else (a dependency, the host)
};

/// "warmup", "cooldown", "wait_recv", "wait_collective", "other".
std::string_view to_string(BubbleCause cause) noexcept;

/// One idle stretch of a rank's compute streams.
struct Bubble {
  Time start = 0;
  Time end = 0;
  BubbleCause cause = BubbleCause::kOther;
  ir::TaskId waited_on;  ///< the task whose completion ended the bubble, when known
  friend bool operator==(const Bubble&, const Bubble&) = default;
};

/// What one rank did over the iteration.
struct RankMetrics {
  Time compute_busy = 0;               ///< union of its compute tasks' intervals
  Time idle = 0;                       ///< makespan − compute_busy
  std::map<BubbleCause, Time> bubble;  ///< idle time by cause (sums to idle)
  Time comm_total = 0;                 ///< union of its communication tasks' intervals
  Time comm_exposed = 0;               ///< communication time with no compute running on the rank
  Time comm_overlapped = 0;            ///< comm_total − comm_exposed
  /// Bytes the rank put on its links (sim::wire_bytes: nccl-tests' bus factors), by group;
  /// p2p under none.
  std::map<ir::GroupId, std::int64_t> bytes_sent;
  /// The collectives' buffer sizes as the graph states them (nccl-tests' S: an all-reduce's
  /// input, an all-gather's output), by group; p2p under none. Not traffic: an all-reduce and
  /// the reduce-scatter plus all-gather that replace it move the same bytes but sum 1 : 2 here.
  std::map<ir::GroupId, std::int64_t> collective_bytes;
  std::int64_t peak_memory_bytes = 0;
  std::vector<std::pair<Time, std::int64_t>> memory_timeline;  ///< (time, allocated bytes)
  std::vector<Bubble> bubbles;
  friend bool operator==(const RankMetrics&, const RankMetrics&) = default;
};

/// When each task ran.
struct TaskTiming {
  Time start = -1;  ///< -1: never started (deadlock)
  Time end = -1;
  friend bool operator==(const TaskTiming&, const TaskTiming&) = default;
};

struct SimResult {
  Time makespan = 0;
  std::vector<TaskTiming> tasks;   ///< by TaskId
  std::vector<RankMetrics> ranks;  ///< by RankId
  /// The chain of tasks that set the makespan, first to last: each one's start was set by the
  /// end of the one before it (stream predecessor, dependency, rendezvous partner or host).
  std::vector<ir::TaskId> critical_path;
  friend bool operator==(const SimResult&, const SimResult&) = default;
};

/// No progress with tasks left. Names every blocked task and what it waits for (as
/// ir::check_deadlock does) and carries what was simulated up to that point.
class SimulationDeadlock : public Deadlock {
 public:
  SimulationDeadlock(std::vector<std::string> blocked, SimResult partial);
  [[nodiscard]] const SimResult& partial() const noexcept { return partial_; }

 private:
  SimResult partial_;
};

/// Simulates `graph` with `durations[t]` for task t (HostWaits take 0 whatever is given; a
/// collective or send/recv pair runs for the longest duration among its members). Throws
/// InvalidConfig when durations has the wrong size or a negative entry, SimulationDeadlock when
/// it cannot finish.
/// @code
///   sim::SimResult r = sim::simulate(graph, durations, {.compute_slowdown_during_comm = 0.1});
/// @endcode
SimResult simulate(const ir::Graph& graph, std::span<const Time> durations,
                   const SimOptions& options = {});

/// The Zero Bubble paper's stage-span bubble rate: for the stage with the longest span (first
/// compute start to last compute end of that stage's tasks), (span − its compute time) / span.
/// A "stage" here is the paper's: one pipeline device, i.e. one rank with all its chunks (ZB-V's
/// two chunks per rank make one stage), and its compute time is RankMetrics::compute_busy.
double stage_span_bubble_rate(const ir::Graph& graph, const SimResult& result);

}  // namespace metron::sim
