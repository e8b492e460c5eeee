#pragma once
// Every pipeline schedule generator. Each takes a ScheduleSpec and returns the per-rank compute
// Order; an impossible spec throws InvalidConfig saying which constraint failed and what would
// be valid (e.g. the nearest valid microbatch counts). Definitions: docs/SCHEDULES.md; where it and
// upstream differ, upstream wins.

#include "metron/pipeline/schedule_spec.h"

namespace metron::pipeline {

// --- Megatron-LM and classic fill-drain (megatron_schedules.cc, classic_schedules.cc) --------
/// No pipelining: gradient accumulation over m microbatches on one rank (pp must be 1).
Order no_pipelining(const ScheduleSpec& spec);
/// GPipe: all forwards, then all backwards (PyTorch ScheduleGPipe order).
Order gpipe(const ScheduleSpec& spec);
/// Megatron non-interleaved 1F1B (PipeDream-Flush): warm-up min(p−r−1, m), no m-vs-p constraint.
Order one_f_one_b(const ScheduleSpec& spec);
/// Megatron interleaved 1F1B with microbatch group size N (default p): p ≤ N ≤ m and
/// m mod N ∈ {0} ∪ [p, N); warm-up 2(p−r−1) + (v−1)·N.
Order interleaved_one_f_one_b(const ScheduleSpec& spec);
/// Older Megatron releases: m % p == 0, warm-up 2(p−r−1) + (v−1)·p, all warm-up when m == p.
Order interleaved_one_f_one_b_legacy(const ScheduleSpec& spec);
/// Looped BFS (Lamy-Poirier): each local stage runs all microbatches before the next.
Order looped_bfs(const ScheduleSpec& spec);

// --- Zero Bubble (zero_bubble_schedules.cc, zb_auto.cc) -----------------------------------
/// ZB-H1: 1F1B with B split into I and W, the first W delayed by the rank's warm-up.
Order zb_h1(const ScheduleSpec& spec);
/// ZB-H2: more warm-up forwards, tail W reordered (parallelogram).
Order zb_h2(const ScheduleSpec& spec);
/// ZB-V: two chunks per rank in V placement (PyTorch ScheduleZBVZeroBubble order).
Order zb_v(const ScheduleSpec& spec);
/// The Zero Bubble automatic scheduler's heuristic under memory limit K (spec.memory_limit,
/// default p) from spec.times (unit times when empty).
Order zb_auto(const ScheduleSpec& spec);

// --- DeepSeek (dualpipe_schedules.cc) -----------------------------------------------------
/// DualPipe: two directions over p ranks (p even, m even, m ≥ 2p), overlapped F&B pairs.
Order dualpipe(const ScheduleSpec& spec);
/// DualPipeV: DualPipe cut in half, 2 chunks per rank in V placement (m ≥ 2p).
Order dualpipe_v(const ScheduleSpec& spec);

}  // namespace metron::pipeline
