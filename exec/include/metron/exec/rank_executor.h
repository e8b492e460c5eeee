#pragma once
// The executor's core for one rank: the host thread that walks the rank's program (Note [rank
// program]) over a backend, one iteration at a time. It knows graphs and the backend interface,
// nothing of threads, tensors or communicators, so the CPU and CUDA backends share it.

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "metron/exec/rank_backend.h"
#include "metron/exec/rank_program.h"
#include "metron/ir/graph.h"

namespace metron::exec {

/// One iteration of one rank as the host and the device saw it.
struct RankIteration {
  std::int64_t origin_ns = 0;  ///< steady clock when the host began issuing
  /// When the host issued each task (steady clock), in issue order; HostWaits included.
  std::vector<std::pair<ir::TaskId, std::int64_t>> issued;
  IterationRecord record;
};

/// Runs a rank's program, iteration after iteration, on a backend.
/// @code
///   exec::RankExecutor executor(graph, exec::rank_program(graph, rank));
///   for (int i = 0; i < 3; ++i) iterations.push_back(executor.run(backend, i));
/// @endcode
class RankExecutor {
 public:
  RankExecutor(const ir::Graph& graph, RankProgram program);

  [[nodiscard]] const RankProgram& program() const noexcept { return program_; }
  /// The origin of the iteration run() is in, or was last in (-1 before the first); safe from
  /// any thread.
  [[nodiscard]] std::int64_t origin_ns() const noexcept { return origin_ns_.load(); }

  /// Issues every task of the program once (iteration `iteration`, 0-based, numbers the
  /// collectives' ordinals), waits for the device to finish, and returns what was measured.
  /// Throws what the backend throws (BackendError naming the task).
  RankIteration run(RankBackend& backend, std::int64_t iteration);

 private:
  const ir::Graph* graph_;
  RankProgram program_;
  std::vector<Launch> launches_;  ///< by program step; HostWaits have none used
  std::atomic<std::int64_t> origin_ns_{-1};
};

}  // namespace metron::exec
