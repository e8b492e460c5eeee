#pragma once
// From what every rank measured over several iterations to one step's Timeline, the input of the
// trace layouts and of the metrics that compare measurement with prediction. Note [measured
// step]:
//   - Each rank takes an origin when its host begins issuing, right after a barrier of all ranks
//     (issue 16, "Timing"). Ranks on one machine read one steady clock, so their times count
//     from the earliest origin of the iteration and stay comparable to the nanosecond: the
//     barrier alone is not enough, because a rank may leave it milliseconds late when the
//     machine has fewer cores than the ranks have threads (a receive would then seem to end
//     before its send began). Ranks on several machines have unrelated clocks: each counts from
//     its own origin, and the barrier is the one instant they share.
//   - An iteration's time is the latest task end over all ranks, from their origins.
//   - The step reported is the median iteration (the lower median for an even count), whole:
//     its spans, issue times and memory, so that every figure of the result comes from one
//     consistent run of the graph.

#include <cstdint>
#include <string>
#include <vector>

#include "metron/exec/rank_executor.h"
#include "metron/ir/graph.h"
#include "metron/timelines/timeline.h"

namespace metron::exec {

struct MeasuredStep {
  timelines::Timeline timeline;                 ///< the median iteration
  std::vector<std::int64_t> peak_memory_bytes;  ///< by rank, in the median iteration
  std::vector<std::int64_t> iteration_ns;       ///< every measured iteration, in run order
  std::int32_t median_iteration = 0;            ///< index into iteration_ns
};

/// Builds the measured step from `iterations[rank][i]`, every rank with the same number (>= 1)
/// of iterations of `graph`; `shared_clock` when every rank ran on one machine. Throws
/// InternalError when the shapes do not fit.
MeasuredStep measured_step(const ir::Graph& graph,
                           const std::vector<std::vector<RankIteration>>& iterations,
                           bool shared_clock);

/// A rank's iterations as text and back, for gathering them at rank 0 through the store.
std::string encode_iterations(const std::vector<RankIteration>& iterations);
/// Throws BackendError when `text` is not what encode_iterations writes.
std::vector<RankIteration> decode_iterations(const std::string& text);

}  // namespace metron::exec
