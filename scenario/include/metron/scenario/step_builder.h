#pragma once
// From a scenario to what the simulator runs: the lowered task graph of one training step and the
// duration of every task. Note [building a step]:
//
//   1. The schedule generator gives the per-rank compute order for pp ranks and the schedule's
//      stages (pp·vp for loop and V placement; DualPipe's 2·pp are two copies of pp stages).
//   2. lower() adds p2p (batched or async), the optimizer step and memory effects (activation
//      bytes per stage from the memory model, boundary tensors from the model's shape); every
//      rank gets the hardware's queue count (1 = CUDA_DEVICE_MAX_CONNECTIONS=1).
//      With a model, every stage's compute tasks carry their layer range (model layers / model
//      stages each).
//   3. With a model: the intra-layer collectives (schedules/intra_layer.h, sizes from
//      models::layer_comm) and, under the pipeline scatter/gather, a tensor-parallel all-gather
//      after each receive (Note [pipeline scatter/gather] there); data parallelism
//      (schedules/data_parallel.h): kFull lays dp replicas side by side; kSymmetric keeps one,
//      since replicas are identical, and charges each collective for the whole group anyway, so a
//      10,000-GPU step costs no more than its pipeline; then, when dp·cp > 1, the scenario's sync
//      policy (schedules/sync_policy.h) over each chunk's tensors (models::parameter_tensors);
//      for DualPipe, the gradient sum over its stage copies (sync/stage_copies.h); for tied
//      embeddings on two pipeline ranks, their gradient sum (sync/embedding_grads.h).
//      kFull finally gives every rank its tensor-parallel peers (lowering/tensor_parallel.h);
//      context- and expert-parallel peers stay out of the graph in both modes.
//   4. Durations (integer ns): compute tasks take their stage's F / I / W / B from the scenario's
//      explicit costs or models::model_stage_costs (DualPipe's overlapped F&B units take F + B),
//      a piece of a split task its share of the stage's layers; the optimizer step
//      models::optimizer_step_cost (one chunk's step its share of the rank's layers); sends and
//      receives the stage costs' p2p; a collective `count` times the communication model's time
//      for bytes/count over the real placement of its group's kind (comm_groups.h,
//      group_placement.h); host waits 0.
//   5. The slow-downs during overlap the simulator applies (compute during communication and
//      communication during compute): the profile's measured ones when the scenario's profile
//      gives them (cost_profile.h), else the hardware's.

#include <cstdint>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"
#include "metron/models/cost_kinds.h"
#include "metron/models/group_placement.h"
#include "metron/models/stage_costs.h"
#include "metron/scenario/scenario.h"
#include "metron/sim/comm_bytes.h"
#include "metron/sim/simulator.h"
#include "metron/sync/sync_policy.h"

namespace metron::scenario {

enum class Replication {
  kSymmetric,  ///< one data-parallel replica, collectives charged for the whole group
  kFull,       ///< every data-parallel replica and tensor-parallel peer in the graph
};

/// Whether compute tasks list what they compute (ir::Compute::operations, Note [task operations]
/// in scenario/src/task_operations.h): an executor and a written graph need them; the simulator
/// and the planner, which only need durations, leave them out (they cost the planner a third of
/// its time).
enum class Payload {
  kNone,
  kOperations,
};

/// A step ready to simulate.
struct Step {
  ir::Graph graph = ir::GraphBuilder().build();
  std::vector<sim::Time> durations;  ///< by TaskId
  models::StageCosts costs;          ///< seconds, per model stage
  std::int32_t pipeline_ranks = 1;
  std::int32_t replicas = 1;  ///< data-parallel replicas in the graph
  /// Weights + gradients + optimizer state per pipeline rank (bytes; 0 without a model).
  std::vector<double> state_bytes;
  /// By GroupId: the placement each group's collectives are charged for (step 4), the one the
  /// communication model and a profile's entries are looked up with.
  std::vector<models::GroupPlacement> group_placements;
  /// Whether sends and receives are charged as transfers inside one node (models::
  /// ParallelGroups::pp_neighbours_share_node), as a profile's p2p entries are looked up.
  bool p2p_same_node = false;
  /// What the sync-policy pass was given (its chunks' parameter tensors, by pipeline rank), and
  /// DualPipe's stage-copy sum (sync/stage_copies.h) and the tied embeddings' gradient sum
  /// (sync/embedding_grads.h). Empty params when the step has none of them.
  sync::SyncInput sync_input;
  /// What the pass returned: by pipeline rank, the buckets its collectives carry, by their
  /// tags (sync::SyncPlan); empty without sync.
  sync::SyncPlan sync_plan;
  /// What sim::SimOptions::compute_slowdown_during_comm takes for this step (step 5).
  double compute_slowdown_during_comm = 0;
  /// What sim::SimOptions::comm_slowdown_during_compute takes for this step (step 5).
  double comm_slowdown_during_compute = 0;

  /// The simulator's options for this step: the slow-downs, and each group's size as charged
  /// (group_placements), so that a symmetric graph's bytes_sent counts the whole group's ring.
  [[nodiscard]] sim::SimOptions sim_options() const {
    sim::SimOptions options{.compute_slowdown_during_comm = compute_slowdown_during_comm,
                            .comm_slowdown_during_compute = comm_slowdown_during_compute};
    for (const models::GroupPlacement& g : group_placements) options.group_sizes.push_back(g.ranks);
    return options;
  }
};

/// The communication model's op for a graph's collective (step 4 prices it, a profile keys it).
using sim::comm_op;

/// Builds the step of Note [building a step]. Throws InvalidConfig for a scenario that cannot be
/// built (see validate(Scenario)) or a schedule that rejects the sizes.
Step build_step(const Scenario& scenario, Replication replication = Replication::kSymmetric,
                Payload payload = Payload::kNone);

}  // namespace metron::scenario
