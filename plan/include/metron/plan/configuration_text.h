#pragma once
// A configuration named in words, as describe() prints it and as people write them
// ("tp8 pp16 dp128 ..."): what `metron plan --compare-with` reads. Note [configuration text]:
//
//   Tokens, separated by spaces, in any order: tpN, ppN, dpN, cpN, epN, vpN, mbsN, firstN, lastN
//   (an "=" before N is allowed: tp=8), sp or nosp, recompute=none|selective|full, N=K (the
//   interleaved group size), bucket=B, attention=unfused|fused, fp8=off|delayed|current,
//   tpoverlap or notpoverlap, account=embedding|loss|embedding+loss (Megatron's accounted
//   split, Note [uneven stages]), a schedule name and a sync policy name. What is not named takes
//   the planner's choice for it: tp, pp, cp, ep 1; dp what the request's GPUs leave
//   (gpus / (tp·pp·cp)); vp the schedule's (1, a V schedule's 2, 2 for the schedules that take
//   many, takes_many_chunks); mbs 1; sequence parallelism where tp > 1 and tp·cp divides the
//   sequence; recompute none; attention, fp8 and tp comm overlap the request's first listed
//   value (the overlap only where sequence parallelism is on), else unfused, off, off; schedule
//   1f1b (interleaved-1f1b when vp > 1 is named); megatron-distopt; and where the layers do not
//   divide over pp·vp, the search's uneven split (split_unevenly). The global batch and
//   sequence are the request's. describe() writes this form (nosp too, at tp > 1), and
//   describe(request, c) what reads back as c under that request.

#include <string_view>

#include "metron/plan/plan_request.h"
#include "metron/plan/search_space.h"

namespace metron::plan {

/// The configuration `text` names under `request` (Note [configuration text]). Throws
/// InvalidConfig naming the token that is not a field, a value out of range, or what
/// models::validate finds wrong with the whole (layers that do not split, heads that tp does
/// not divide, a batch that dp·mbs does not divide, ...).
/// @code
///   const Candidate c = parse_configuration(request, "tp8 pp16 dp128 1f1b");
///   // c.parallel.first_stage_layers == 7 for Llama 3 405B's 126 layers
/// @endcode
Candidate parse_configuration(const PlanRequest& request, std::string_view text);

/// describe(c), plus the kernel options that text would take otherwise under `request` (the
/// request's first listed value, where c has the scenario's default that describe() leaves out),
/// so that parse_configuration(request, describe(request, c)) == c: the words the plan's table
/// and JSON print, which --compare-with reads back.
std::string describe(const PlanRequest& request, const Candidate& c);

}  // namespace metron::plan
