#pragma once
// What `metron plan` prints and writes, as pure functions of a plan's request and result: the
// ranked table for people, CSV and JSON for scripts and notebooks, the drop explanation and the
// closing statistics line. Note [plan report fields]:
//
//   The CSV columns and the JSON fields of a ranked configuration are the same list, in the same
//   order: rank, tokens_per_s, iteration_time_ms, mfu, bubble_fraction, exposed_comm_fraction,
//   peak_memory_bytes, memory_capacity_bytes, gpus, tp, pp, dp, vp, first_stage_layers,
//   last_stage_layers, account_for_embedding_in_pipeline_split,
//   account_for_loss_in_pipeline_split, cp, ep, sequence_parallel, microbatch_size,
//   num_microbatches, recompute, attention, fp8, tp_comm_overlap, schedule, group_size, policy,
//   bucket_size, bound_ms. Numbers are written at full precision (shortest round-trip form), so the
//   table's rounded figures are the CSV's and JSON's rounded. first_stage_layers and
//   last_stage_layers (an uneven split, Note [uneven stages]), group_size and bucket_size are empty
//   (CSV) or null (JSON) when the even split or the schedule's or policy's default applies.
//   Fractions are 0..1; the table shows them as percentages. The table's memory is decimal GB (10^9
//   bytes), the unit GPU datasheets quote ("80 GB").

#include <string>

#include "metron/plan/plan_request.h"
#include "metron/plan/planner.h"

namespace metron::plan {

/// The ranking as an aligned table, best first, under a line naming the request: rank,
/// tokens/s, iteration time, MFU, bubble, exposed communication, peak memory per GPU against
/// its capacity ("61.2/80.0"), GPUs used and the configuration (describe()). Says so when
/// nothing fits.
/// @code
///   const PlanResult result = run_plan(request);
///   std::cout << ranked_table(request, result) << stats_line(result);
/// @endcode
std::string ranked_table(const PlanRequest& request, const PlanResult& result);

/// A header and one row per ranked configuration (Note [plan report fields]).
std::string plan_csv(const PlanResult& result);

/// {"request": {model, hardware, gpus, global_batch, seq_len, memory_headroom, top_k},
///  "ranked": [{the CSV's fields..., "configuration": describe(), "scenario": {the scenario
///              JSON, scenario.h}}],
///  "dropped": [{reason, family, detail, configurations}],
///  "stats": {enumerated, bounded, dropped_by_reason {reason: n}},
///  "run": {simulated, pruned, threads, seconds}}
/// Note [plan run statistics]: "stats" follows from the request; "run" describes this run and
/// varies between runs: with several threads, how many configurations are simulated before the
/// bound ends the search depends on which finish first (the ranking does not: Note [bound and
/// simulate]), and seconds is wall time. So do the drops found only by simulating ("memory" at
/// simulation, "simulation") in "dropped" and dropped_by_reason. Compare two plans by "ranked".
/// With `compared` (--compare-with), also "compared": {the CSV's fields, rank null when it has
/// no place (Note [compared configuration]), "configuration", "problem": why it cannot run or
/// "", "scenario" when it can}.
std::string plan_json(const PlanRequest& request, const PlanResult& result,
                      const ComparedConfig* compared = nullptr);

/// The --compare-with section: the configuration (describe()) and its predicted figures, where
/// it ranks (Note [compared configuration]) and each ranked configuration that beats it with
/// what it does differently (its fields that differ, bubble, exposed communication, memory), at
/// most 5; or why it cannot run.
std::string comparison_text(const PlanResult& result, const ComparedConfig& compared);

/// Why configurations are missing from the ranking (--explain): per drop reason, the
/// configurations dropped and each dropped family with its detail (at most 20 per reason, then
/// "... and N more"), and the configurations the bound pruned.
std::string explain_text(const PlanResult& result);

/// One line (with its newline): "enumerated 5,000 configurations, dropped 4,960 (layers 4,000,
/// memory 960), bounded 40, simulated 12, pruned 28, in 0.83 s on 2 threads".
std::string stats_line(const PlanResult& result);

/// One line (with its newline) on where the search's time went: "time: enumerating 0.01 s,
/// estimating 0.25 s, building steps 1.90 s and simulating 0.21 s (thread time)".
std::string phases_line(const PlanResult& result);

}  // namespace metron::plan
