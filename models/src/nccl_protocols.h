#pragma once
// Private: NCCL's own cost model of its ring and tree collectives across nodes, by protocol
// (Note [nccl protocols] in metron/models/comm_cost.h), for CommModel.

#include <cstdint>
#include <string_view>

#include "metron/models/cost_kinds.h"

namespace metron::models::detail {

/// A collective over several nodes as NCCL's tuner sees it.
struct NcclGroup {
  std::int64_t ranks_per_node = 1;  ///< r
  std::int64_t nodes = 2;           ///< N > 1
  double rate = 0;                  ///< B: bytes/s of the ring's slowest link, Simple protocol
  bool amd_host = false;            ///< the nodes' CPUs are AMD's (else Intel's)
};

/// A ring of `op` through n = r·N ranks on N nodes, counted as NCCL's tuner counts it: its steps
/// (nsteps), those across nodes (nInterSteps), and the multiple of S / B each rank moves.
struct RingSteps {
  double steps = 0;
  double inter_steps = 0;
  double byte_share = 0;
};
RingSteps ring_steps(CommOp op, std::int64_t ranks_per_node, std::int64_t nodes);

/// Seconds of the fastest protocol (LL, LL128, Simple) for a ring of `op` on `group`.
double nccl_ring_time(CommOp op, double bytes, const NcclGroup& group);
/// Seconds of the fastest protocol for NCCL's tree all-reduce on `group`.
double nccl_tree_all_reduce_time(double bytes, const NcclGroup& group);

}  // namespace metron::models::detail
