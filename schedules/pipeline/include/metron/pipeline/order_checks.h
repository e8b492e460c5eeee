#pragma once
// What every order must satisfy, and its timing with given per-action times: the schedule-level
// checks behind the property sweeps and the `grid` view. Independent of the task graph: an order
// is checked before any communication is inserted.

#include <cstdint>
#include <vector>

#include "metron/pipeline/registry.h"
#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline {

/// Which microbatches stage `s` runs: all m, except DualPipe, where the first p stage ids carry
/// microbatches [0, m/2) and the other p carry [m/2, m).
struct StageMicrobatches {
  std::int32_t first = 0;
  std::int32_t count = 0;
};
StageMicrobatches stage_microbatches(Placement placement, std::int32_t pp, std::int32_t stage,
                                     std::int32_t microbatches);

/// Checks an order as PyTorch's _validate_schedule does, and more: each stage lives on one rank;
/// each (stage, microbatch) it runs has exactly one F and either one B or one I and one W (none
/// of them when forward-only); on its rank F precedes I or B, and I precedes W; and the order
/// cannot deadlock when run (every action's input is eventually produced). Throws InvalidConfig
/// that draws the rows and marks the failing action (`<-- here`).
void validate_order(const Order& order, const ScheduleSpec& spec, Placement placement);

/// Durations for a timing run, in any unit (PyTorch's visualiser uses F=I=W=1, B=2).
struct ActionTimes {
  double forward = 1;
  double backward_input = 1;
  double backward_weight = 1;
  double backward = 2;
  /// An OVERLAP_F_B unit; negative means forward + backward (no overlap gain).
  double overlap = -1;
  double p2p = 0;  ///< added when an action's input comes from another rank
};

/// When each action of an order runs: each rank executes its row in order, one action at a
/// time, each as soon as its rank is free and its input exists (F(s) needs F(s−1); I/B(s) needs
/// I/B(s+1), or its own F on the last stage; W needs its I), plus `p2p` across ranks.
struct Timeline {
  /// start[r][k], end[r][k]: the k-th action of rank r (idle slots skipped).
  std::vector<std::vector<double>> start;
  std::vector<std::vector<double>> end;
  double makespan = 0;
  /// Per rank: the most microbatch-chunk activations alive at once (F done, I or B not yet).
  std::vector<std::int32_t> peak_activations;
  /// Per rank: first start to last end, the Zero Bubble paper's per-stage span.
  std::vector<double> span;
  /// Per rank: busy time (sum of its actions' durations).
  std::vector<double> busy;
};

/// Times an order (which must pass validate_order). Throws InvalidConfig if it cannot complete.
Timeline time_order(const Order& order, const ActionTimes& times);

}  // namespace metron::pipeline
