#pragma once
// A scenario: everything one simulated training step needs, as one JSON document (issue 5's
// contract with users and scripts). Note [scenario JSON]:
//
//   {"model": "gpt3-175b" or {model fields},
//    "hardware": "dgx-h100" or {hardware fields},
//    "gpus": 1024,
//    "parallel": {parallel fields (parallel_spec.h)},
//    "schedule": {"name": "interleaved-1f1b", "group_size": 16, "p2p": "batched",
//                 "memory_limit": null},
//    "sync": {"policy": "megatron-distopt", "overlap_grad_reduce": true, ...},
//    "costs": null or {"F": [...], "I": [...], "W": [...], "B": [...], "p2p": 0.6},
//    "profile": null or {a cost profile, cost_profile.h: "compute", "collectives", "p2p"}}
//
// Every key but "parallel" is optional: hardware defaults to dgx-h100, schedule to 1f1b, sync to
// ddp, gpus to tp·pp·dp·cp. "costs" (milliseconds per stage, stage_costs.h) replaces the model's
// times; "model" may then be left out, and "parallel" needs pp and num_microbatches. schedule.p2p
// is "batched" (Megatron's blocking exchanges; the default for 1f1b and the interleaved
// schedules) or "async" (isend/irecv posted ahead; the default for the others). "sync" holds the
// data-parallel policy (schedules/sync_policy.h: "policy" plus any SyncOptions knob under its own
// name, e.g. "bucket_size", "overlap_grad_reduce", "iteration": "warmup"). "profile" holds
// measured costs (`metron profile` writes them) that replace the cost models' times entry by
// entry. Unknown keys anywhere are errors that name them: a typo must not be silently ignored.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/lowering/lowering.h"
#include "metron/models/cost_profile.h"
#include "metron/models/hardware_spec.h"
#include "metron/models/memory_model.h"
#include "metron/models/model_spec.h"
#include "metron/models/parallel_spec.h"
#include "metron/models/stage_costs.h"
#include "metron/sync/sync_policy.h"

namespace metron::scenario {

/// The pipeline schedule and how its stages exchange tensors.
struct ScheduleChoice {
  std::string name = "1f1b";
  std::optional<std::int32_t> group_size;    ///< interleaved 1F1B's N
  std::optional<lowering::P2PMode> p2p;      ///< default: see Note [scenario JSON]
  std::optional<std::int32_t> memory_limit;  ///< zb-auto's limit
  friend bool operator==(const ScheduleChoice&, const ScheduleChoice&) = default;
};

struct Scenario {
  std::optional<models::ModelSpec> model;  ///< absent only with explicit costs
  models::HardwareSpec hardware;
  std::optional<std::int64_t> gpus;
  models::ParallelSpec parallel;
  ScheduleChoice schedule;
  sync::SyncOptions sync;
  std::optional<models::StageCosts> costs;     ///< seconds
  std::optional<models::CostProfile> profile;  ///< measured costs over the models' own
  friend bool operator==(const Scenario&, const Scenario&) = default;
};

/// The memory layout of the scenario's sync policy (the models' name for the same system).
models::StatePolicy state_policy(const Scenario& scenario);

/// The parallel configuration the model is cut by: the scenario's, with the schedule's chunk
/// count where the schedule fixes one and vp is left at 1 (zb-v, dualpipe-v: 2), except for
/// DualPipe, whose two chunks per rank are copies of pp model stages (vp 1; Note [stage copies]
/// in sync/stage_copies.h). Throws InvalidConfig for an unknown schedule.
models::ParallelSpec model_split(const Scenario& scenario);

/// The model stages pipeline rank `rank` of `pp` holds under `schedule`, each as the models price
/// a stage (models::state_memory and optimizer_step_cost take it as the pipeline rank of
/// model_split's spec): its own, and under DualPipe also stage pp-1-rank, which its second
/// direction runs a copy of (Note [stage copies] in sync/stage_copies.h). Throws InvalidConfig
/// for an unknown schedule.
std::vector<std::int64_t> held_model_stages(std::string_view schedule, std::int64_t pp,
                                            std::int64_t rank);

/// The p2p mode in effect: the choice, else batched for Megatron's schedules, async otherwise.
lowering::P2PMode p2p_mode(const ScheduleChoice& schedule);

/// GPT-3 175B on 1,024 H100 GPUs in DGX H100 nodes: tp 8, pp 16, dp 8, interleaved 1F1B with 2
/// chunks, microbatch 1, global batch 1,536, sequence 2,048, sequence parallelism, Megatron's
/// distributed optimizer with overlapped gradient reduce-scatter and parameter all-gather — the
/// configuration class of Narayanan et al. SC'21 on today's GPUs.
Scenario default_scenario();

/// Reads a scenario (Note [scenario JSON]). Malformed JSON throws ParseError at source:line:col;
/// wrong types, unknown names and unknown keys throw ParseError naming the JSON path
/// (`s.json: parallel.tpp: unknown key`); a model, hardware or costs object is read by its own
/// reader (same messages, prefixed with its key).
Scenario scenario_from_json(std::string_view text, const std::string& source = "<json>");

/// The canonical JSON (what --save-scenario writes): a model or hardware equal to the preset of
/// its name is written as the name, anything else in full. scenario_from_json(to_json(s)) == s.
std::string to_json(const Scenario& scenario);

/// Throws InvalidConfig listing what cannot be simulated: no model and no costs; the parallel
/// configuration against the model and gpus (models::validate); costs for the wrong number of
/// stages; a schedule the generator rejects is reported when the step is built.
void validate(const Scenario& scenario);

}  // namespace metron::scenario
