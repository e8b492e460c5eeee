#pragma once
// One scenario simulated: the step, the simulator's result, and the figures users compare
// configurations by. Note [step metrics]:
//
//   iteration time   the simulated makespan of the step
//   tokens/s         global batch (microbatches · microbatch size · dp) · sequence / iteration
//   model FLOPs      models::iteration_flops without recompute (PaLM's MFU convention)
//   MFU              model FLOPs / (iteration time · GPUs · the GPU's peak at the model's dtype)
//   bubble fraction  mean over simulated ranks of pipeline-bubble time (idle time not spent
//                    waiting on a collective) / iteration time — (p−1)/(m+p−1) for 1F1B with
//                    unit times
//   exposed comm     mean over ranks of communication time with no compute running / iteration
//   peak memory      per rank: its model state (memory model) + the simulated peak of its
//                    activation and stash buffers
// Without a model (explicit costs only) tokens/s, MFU and model state are not known: 0.

#include <optional>
#include <string>
#include <vector>

#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"
#include "metron/sim/simulator.h"

namespace metron::scenario {

struct Evaluation {
  Scenario scenario;
  Step step;
  sim::SimResult result;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0;  ///< per iteration, all GPUs
  double mfu = 0;
  double model_tflops_per_gpu = 0;
  double bubble_fraction = 0;
  double exposed_comm_fraction = 0;
  std::optional<double> stage_span_bubble_rate;  ///< with explicit costs
  std::vector<double> peak_memory_bytes;         ///< per simulated rank
};

/// Builds and simulates `scenario`. Throws InvalidConfig for what cannot be built and
/// sim::SimulationDeadlock (with the partial result) when the step cannot finish.
Evaluation evaluate(const Scenario& scenario, Replication replication = Replication::kSymmetric);

/// The figures of Note [step metrics] for a result obtained otherwise: measured by the executor
/// (sim::timeline_result) rather than simulated. evaluate() is build_step, simulate, this.
Evaluation evaluation_of(const Scenario& scenario, Step step, sim::SimResult result);

/// The result JSON (issue 5's contract; snake_case keys): iteration_time_ms, tokens_per_s, mfu,
/// model_tflops_per_gpu, bubble_fraction, exposed_comm_fraction, stage_span_bubble_rate (null
/// without explicit costs), peak_memory_bytes_max, hbm_capacity_bytes, and per_rank: rank, tp,
/// pp, dp, compute_ms, idle_ms, bubble_ms {cause: ms}, comm_ms, comm_exposed_ms,
/// comm_overlapped_ms, bytes_sent {group: bytes the rank put on the wire, nccl-tests' bus
/// factors; "p2p" for sends}, collective_bytes {group: the collectives' buffer sizes, the
/// figure bytes_sent was before issue 18; "p2p" for sends}, peak_memory_bytes,
/// activation_memory_timeline [[ms, bytes], ...]; and critical_path, the tasks that set the
/// iteration time, first to last ({task, what, start_ms, end_ms}).
std::string result_json(const Evaluation& evaluation);

/// A readable summary: the configuration, iteration time, tokens/s, MFU, bubble and exposed
/// communication, and peak memory per pipeline stage against the GPU's capacity (with a warning
/// for each stage that does not fit).
std::string summary_text(const Evaluation& evaluation);

}  // namespace metron::scenario
