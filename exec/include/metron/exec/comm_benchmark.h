#pragma once
// Communication timed for real on the CPU backend, one process per rank: the collectives and
// transfers that `metron profile` measures, and how much compute slows down while communication
// runs. Every rank runs the same benchmark (its part of it) over one GlooWorld.
//
// Note [communication benchmark]
//   - Every rank walks the same list in the same order, so that each group issues the same
//     calls on every member; a rank outside an entry's group or pair only passes its barriers.
//   - A collective entry: `warmup` untimed calls, then `repetitions` timed ones, each after a
//     world barrier() and timed on every member from leaving the barrier to the call's
//     completion. A repetition takes its slowest member's time; the entry's time is the median
//     over repetitions. One call, as given (ir::Collective::count is the caller's business:
//     profile asks for one call of bytes/count, what the cost model prices count times).
//   - A transfer entry: one sender, one receiver, the same barriers; timed at the receiver
//     (the transfer is complete when it has the data), the median over repetitions.
//   - The slow-downs, both ways, on every rank of the load at once, as a run overlaps them on
//     every member of a collective (a data-parallel backward computes and all-reduces on each
//     replica): (1) every load rank computes alone (median of `repetitions` after `warmup`, or
//     of more to fill SlowdownProbe::min_seconds); (2) the load alone, `repetitions` rounds after
//     `warmup`; (3) both at once: each load rank runs the load back to back on a second thread
//     while its first computes. The load's first rank (the group's first member, or the sender)
//     times the compute in (3) as in (1) and the load's rounds completed meanwhile; its numbers
//     are the result. compute slowdown = median compute (3) / (1) − 1, communication slowdown =
//     median round (3) / (2) − 1, each clamped at 0. The ranks learn when the load stops
//     through the store: before each round the first rank's load thread writes "go" or "stop"
//     under the round's key and the others read it, so every member stops after the same round;
//     the others compute until their load thread has read "stop".
//   - Compute, first: every rank times its own compute tasks' operations at the same time as
//     the others, as a run places them on a shared machine (ranks that share cores, caches and
//     memory slow each other down; measured alone, a rank's operations look ~10 % faster than
//     they run). In lockstep: per repetition (`warmup` untimed first), the j-th operation of
//     every rank's list starts after the j-th world barrier (a rank whose list is shorter only
//     passes the barriers), one run() of it with its count, timed and divided by its count;
//     each task's operations in order, so that each finds the caches as its task leaves them.
//     Without the barriers the ranks drift apart within a repetition, and an operation that a
//     run executes on every rank at once (a data-parallel step's optimizer, a tensor-parallel
//     layer) was timed beside whatever the others had reached: on the 2-core VM a GPT-3 125M
//     FSDP2 dp 2 shard's Adam (memory-bound, both ranks at once in the run) profiled 107 ms
//     and ran 202-251 ms; alone, one rank's Adam of the whole model profiles as it runs.
//   - Per-rank times reach rank 0 through the store; a final barrier keeps every rank until
//     rank 0 has read them (it hosts the store).

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "metron/exec/gloo_world.h"
#include "metron/exec/operation_profile.h"
#include "metron/ir/task.h"

namespace metron::exec {

/// One collective call on group `group` (an index into CommBenchmark::groups).
struct CollectiveProbe {
  std::int32_t group = 0;
  ir::Collective call;  ///< issued as given; count > 1 issues that many calls of bytes/count
};

/// One transfer of `bytes` from `sender` to `receiver` (world ranks).
struct TransferProbe {
  std::int32_t sender = 0;
  std::int32_t receiver = 1;
  std::int64_t bytes = 0;
};

/// Compute timed alone and while `load` runs back to back (Note [communication benchmark]).
struct SlowdownProbe {
  ir::Compute compute;
  std::variant<CollectiveProbe, TransferProbe> load;
  /// Each phase (alone, with the load) is timed for at least this long, in as many repetitions
  /// as that takes beyond CommBenchmark::repetitions: interference comes and goes with the
  /// load's phases, so the median needs many of its rounds.
  double min_seconds = 1.0;
};

/// What every rank of the world measures, in this order: compute, collectives, transfers,
/// slow-down.
struct CommBenchmark {
  /// By world rank: the compute tasks that rank times (each task's operations one by one); a
  /// rank beyond the list times none.
  std::vector<std::vector<ir::Compute>> compute;
  /// Member ranks of each group, as GlooWorld takes them.
  std::vector<std::vector<std::int32_t>> groups;
  std::vector<CollectiveProbe> collectives;
  std::vector<TransferProbe> transfers;
  std::optional<SlowdownProbe> slowdown;
  std::int32_t warmup = 1;            ///< untimed calls first, per entry
  std::int32_t repetitions = 5;       ///< timed calls per entry (the median is kept)
  std::int32_t intra_op_threads = 1;  ///< libtorch threads for the slow-down's compute
};

/// The slow-down's two medians and their ratio.
struct SlowdownMeasurement {
  double alone_seconds = 0;
  double with_comm_seconds = 0;
  double slowdown = 0;  ///< max(0, with / alone − 1)
  /// Rounds of the load completed while the compute was timed with it (at least 1 shows that the
  /// load ran throughout, unless one round outlasts every repetition).
  std::int64_t load_rounds = 0;
  double comm_alone_seconds = 0;         ///< median round of the load alone
  double comm_with_compute_seconds = 0;  ///< median round while every load rank computed
  double comm_slowdown = 0;              ///< max(0, with / alone − 1)
};

/// Rank 0's result: seconds per entry, in the benchmark's order.
struct CommMeasurement {
  /// By world rank, by task, by operation (CommBenchmark::compute's order): the seconds of one
  /// repetition of the operation (a run of `count` divided by count), one per repetition.
  std::vector<std::vector<std::vector<std::vector<double>>>> compute_seconds;
  std::vector<double> collective_seconds;  ///< median over repetitions of the slowest member
  std::vector<double> transfer_seconds;    ///< median over repetitions at the receiver
  std::optional<SlowdownMeasurement> slowdown;
};

/// Receives what the rank is doing (for the launcher's watchdog) as it changes; may be empty.
using BenchmarkStatus = std::function<void(std::string_view)>;

/// Runs rank `rendezvous.rank`'s part of `benchmark` (Note [communication benchmark]); rank 0
/// returns the measurement, the others nullopt. Throws InvalidConfig for a benchmark that names
/// a group or rank outside the world, a transfer to itself, repetitions < 1 or warmup < 0;
/// BackendError naming the entry when Gloo or libtorch fails.
/// @code
///   exec::CommBenchmark b{.groups = {{0, 1}},
///                         .collectives = {{.group = 0, .call = {.bytes = 1 << 20}}}};
///   std::optional<exec::CommMeasurement> m =
///       exec::measure_communication(b, {.port = port, .rank = r, .world_size = 2}, status);
///   if (m) use(m->collective_seconds[0]);
/// @endcode
std::optional<CommMeasurement> measure_communication(const CommBenchmark& benchmark,
                                                     const Rendezvous& rendezvous,
                                                     const BenchmarkStatus& status);

/// A collective entry's time from every member's repetitions (`per_member[m][r]`): the median
/// over repetitions r of the slowest member's time; 0 when there is none.
double median_of_slowest(const std::vector<std::vector<double>>& per_member);

}  // namespace metron::exec
