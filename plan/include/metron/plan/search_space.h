#pragma once
// The configurations of a plan request (Note [plan space], plan_request.h), enumerated in a
// fixed order, and the families of configurations that cannot be built at all, with the reason.
//
// Dimensions are chosen outermost first — tp, cp, pp, schedule, vp, dp, microbatch size,
// sequence parallelism, attention, fp8, tp_comm_overlap, recompute, ep, policy, bucket size,
// group size — and a rule that fails at one level drops the whole family below it at once:
// tp = 3 with 128 heads is one rejection ("tp=3"), not thousands. Only complete configurations
// count as enumerated.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metron/models/parallel_spec.h"
#include "metron/plan/plan_request.h"
#include "metron/scenario/scenario.h"
#include "metron/sync/sync_policy.h"

namespace metron::plan {

/// Why a configuration (or a family of them) is not in the ranking.
enum class DropReason : std::uint8_t {
  kTensorParallel,  ///< heads, kv heads or ffn not divisible by tp
  kLayers,          ///< layers that split over pp · chunks neither evenly nor unevenly
  kSequence,        ///< seq_len not divisible for sequence or context parallelism
  kExperts,         ///< ep does not divide the experts or dp·cp
  kGpus,            ///< tp·pp·dp·cp above the GPUs
  kBatch,           ///< global batch not divisible by dp · microbatch size
  kSchedule,        ///< the schedule rejects the sizes (too few microbatches, pp parity, ...)
  kPolicy,          ///< the sync policy cannot run this configuration
  kMemory,          ///< a rank's peak memory exceeds the usable capacity
  kSimulation,      ///< the step could not be simulated (deadlock)
};
inline constexpr std::size_t kDropReasons = 10;

/// "tensor-parallel", "layers", "sequence", "experts", "gpus", "batch", "schedule", "policy",
/// "memory", "simulation".
std::string_view to_string(DropReason reason) noexcept;

/// One parallel configuration: a scenario without the request's model and hardware.
struct Candidate {
  models::ParallelSpec parallel;  ///< complete: global_batch and seq_len set
  std::string_view schedule;      ///< a registry name (static storage)
  std::optional<std::int32_t> group_size;
  sync::SyncPolicy policy = sync::SyncPolicy::kMegatronDistopt;
  std::optional<std::int64_t> bucket_size;
  friend bool operator==(const Candidate&, const Candidate&) = default;
};

/// "tp8 pp16 dp8 vp2 mbs1 sp interleaved-1f1b megatron-distopt" — the fields a reader compares
/// configurations by; cp, ep, recompute, group size, bucket size, attention, fp8 and tp comm
/// overlap only when not the default ("recompute=full attention=fused fp8=delayed tpoverlap"),
/// the first and last pipeline ranks' layers of an uneven split ("first7 last7") and an
/// accounted split ("account=embedding+loss"). The text reads back with parse_configuration
/// (configuration_text.h).
std::string describe(const Candidate& candidate);

/// The family a complete configuration is counted under when a rule drops it:
/// "tp=8 pp=16 interleaved-1f1b vp=2" (cp when above 1).
std::string family_of(const Candidate& candidate);

/// Whether `schedule` runs any number of chunks per rank, 2 and up (the interleaved schedules
/// and looped BFS): the search tries 2 .. max_vp, a named configuration takes 2 by default.
/// The others run one chunk, or their fixed count.
bool takes_many_chunks(std::string_view schedule) noexcept;

/// The context-parallel sizes the search tries when none are listed (Note [plan space]): 1, and
/// 2, 4, 8, ... while each rank keeps at least kMinContextShard tokens of the sequence and
/// 2·cp divides it (Megatron's load-balanced split). The shard is the smallest a published run
/// used: Llama 3 405B at 131,072 tokens on cp 16 (Llama Team, "The Llama 3 Herd of Models",
/// 2024, §3.3.2). seq 8,192: {1}; 32,768: {1, 2, 4}; 131,072: {1, 2, 4, 8, 16}.
std::vector<std::int64_t> default_context_parallel_sizes(std::int64_t seq);
inline constexpr std::int64_t kMinContextShard = 8192;

/// Megatron's uneven split (Note [uneven stages]) for layers that do not divide over pp·vp:
/// {first, last}, the layers of the first and of the last pipeline rank, the others holding the
/// rest evenly. The edges hold no more than a middle rank (they also hold the embedding and the
/// loss), as many as that allows (the most even split); every rank's layers are whole chunks
/// (multiples of vp). With pp = 2 the two ranks split the layers as evenly as chunks allow.
/// nullopt when no such split exists. What the search (and --compare-with) use where the layers
/// do not divide: 126 layers on pp 16 give {7, 7}.
std::optional<std::pair<std::int64_t, std::int64_t>> uneven_stage_layers(std::int64_t layers,
                                                                         std::int64_t pp,
                                                                         std::int64_t vp);

/// Where the model's layers do not divide over pp·vp model stages of the looped placement, sets
/// the split the search uses on `spec` (pp and vp set) and returns true: Megatron's first/last
/// counts (uneven_stage_layers) where they exist, else Megatron's accounted split
/// (account_for_embedding/loss_in_pipeline_split, Note [uneven stages]) where (layers + 2)
/// divides over pp·vp with at least 2 per virtual stage — what balances interleaved stages that
/// whole-chunk edge counts cannot (Llama 3 405B on pp 16, vp 4). False, `spec` unchanged, when
/// neither exists.
bool split_unevenly(models::ParallelSpec& spec, std::int64_t layers);

/// The complete scenario of `candidate` under `request` (sync knobs from planner_sync_options).
scenario::Scenario to_scenario(const PlanRequest& request, const Candidate& candidate);

/// A family of configurations dropped, e.g. {kLayers, "pp=2", "layers (105) not divisible by
/// pp·vp = 2", 0}: a rule that fails at an outer level drops the family below it uncounted
/// (configurations = 0); complete configurations dropped by one rule are counted under the
/// family of their tp, cp, pp, schedule and vp, with the first one's detail.
struct DroppedFamily {
  DropReason reason = DropReason::kLayers;
  std::string family;  ///< the fixed dimensions, "tp=3" or "tp=8 pp=16 interleaved-1f1b vp=5"
  std::string detail;  ///< why, with the numbers
  std::int64_t configurations = 0;
};

struct SearchSpace {
  std::vector<Candidate> candidates;   ///< in enumeration order (the ranking's tie-break)
  std::vector<DroppedFamily> dropped;  ///< in enumeration order
};

/// Enumerates Note [plan space]. Complete configurations that break a rule only a complete one
/// can break (a schedule's microbatch rules, a policy's limits) are dropped here too. Throws
/// InvalidConfig via validate(request).
SearchSpace enumerate_space(const PlanRequest& request);

}  // namespace metron::plan
