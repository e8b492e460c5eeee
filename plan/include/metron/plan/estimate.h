#pragma once
// What the planner knows about a configuration before building its step: peak memory per rank
// and a lower bound on the iteration time. Note [configuration estimate]:
//
//   Memory per pipeline rank = model state (models::state_memory under the policy) + the most
//   activation bytes the schedule's memory effects hold at once (schedules' Note [pipeline
//   memory effects]: F stashes one microbatch's activations of its chunk plus, when the output
//   goes to another rank, the output until it is sent; I turns the stash into the weight-
//   gradient stash, W or B frees). 1F1B and interleaved 1F1B use their closed forms
//   (min(p − r, m) and min(2(p − r − 1) + (v − 1)·N + 1, m·v) stashes in flight on rank r); the
//   other schedules walk their generated order, holding an asynchronously sent output through
//   the rank's next compute. These are the numbers the step's buffers carry, so the estimate is
//   the simulated peak for batched p2p, within one output for async p2p, and short of it by the
//   sync policy's own buffers (ZeRO's IPG buckets, gathered ZeRO-3 / FSDP parameters).
//
//   The bound: every compute task of a rank runs on its compute stream, one at a time, and the
//   blocking intra-layer collectives (TP, SP, EP) sit between a task and the next one on the
//   stream, so with F_s, X_s (B, or I where the schedule splits the backward) and W_s each stage's
//   times including those collectives, c_s the microbatches through stage s, opt_r rank r's
//   optimizer step, s_r the lowest stage on rank r and p2p one transfer:
//
//     head_r = Σ_{s < s_r} F_s + s_r·p2p       (microbatch 0 must reach the rank)
//     tail_r = Σ_{s < s_r} X_s + s_r·p2p + opt_0 (the last backward must leave it, then rank 0
//                                                steps)
//     T ≥ head_r + Σ_{s on r} c_s(F_s + X_s) + max(Σ_{s on r} c_s W_s + opt_r, tail_r)
//
//   since every F and X of rank r precede its last X. For 1F1B with equal stages this is
//   (m + p − 1)(F + B) + opt; for interleaved 1F1B (m + (p − 1)/v)(F + B) + opt. DualPipe's two
//   directions take head = tail = 0. Megatron's batched exchanges block the host until the send
//   of a compute's output completes before the next compute: one p2p per such compute but the
//   rank's last — in 1F1B every sending compute, in interleaved 1F1B the warm-up forwards and
//   the backwards (a steady forward's output goes out only after the next backward).
//   Everything else the step adds — data-parallel sync but the note below, hardware queues,
//   slow-down — can only delay, so the bound holds; it is lowered by 1e-4 relative to cover the
//   step's per-task rounding to nanoseconds. The planner's tests check bound ≤ simulated time on
//   every configuration of a space with every schedule family.
//
// Note [whole-buffer sync in the bound]: 1F1B with batched p2p under Megatron's distributed
//   optimizer (the planner's knobs: overlap_param_gather, one instance, steady iteration, no
//   FP8) over a dense model. Pipeline ranks r ≥ 1 keep one bucket per buffer (Note [megatron
//   sync]), so r's parameters are one all-gather AG_r, dispatched at its first forward's
//   pre-hook, which the host reaches only once the blocking receive before it has returned, and
//   waited for by that forward; its gradients are one reduce-scatter RS_r after the cooldown,
//   which the step waits for. So F_s of a stage s ≥ 1 in head_r counts AG_s + F_s, rank r ≥ 1
//   adds AG_r before its own computes and RS_r before opt_r. Each is charged over the "dp"
//   group at the unpadded buffer size, times 0.999 (padding only adds bytes; the share covers a
//   bandwidth curve's rounding). Rank 0 (bucketed, its chain overlapping its forward, its hooks
//   its backward) is left as it was. On Turing-NLG 530B × 5,128 A100s a 1F1B configuration's
//   bound rose from 20.2 s to 25.2 s against a simulated 26.1 s, which prunes every 1F1B
//   configuration of that search before simulation.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "metron/models/comm_cost.h"
#include "metron/models/compute_cost.h"
#include "metron/pipeline/schedule_spec.h"
#include "metron/plan/plan_request.h"
#include "metron/plan/search_space.h"

namespace metron::plan {

struct Estimate {
  std::vector<double> memory_bytes;  ///< per pipeline rank
  double peak_memory_bytes = 0;      ///< the highest rank
  std::int32_t peak_rank = 0;
  double bound_s = 0;  ///< Note [configuration estimate]
};

/// Estimates configurations of one request. Thread-safe: the costs that many configurations
/// share (stage times, generated orders) are computed once and kept.
class Estimator {
 public:
  explicit Estimator(const PlanRequest& request);
  ~Estimator();
  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;

  /// Throws InvalidConfig when the models reject the configuration.
  [[nodiscard]] Estimate estimate(const Candidate& candidate) const;

 private:
  struct StageProfile;
  struct RankState;
  std::shared_ptr<const StageProfile> profile(const Candidate& candidate) const;
  std::shared_ptr<const RankState> rank_state(const Candidate& candidate) const;

  const PlanRequest& request_;
  models::ComputeModel compute_;
  models::CommModel comm_;
  mutable std::mutex mutex_;
  // Keys: the sizes a profile (compute only: dp, which places the collectives' groups, does not
  // change it) or a rank state depends on, first and last stage layers included (0 when even),
  // the kernel options (attention, fp8, tp comm overlap; fp8 alone changes the model state, with
  // its weight casts), and an accounted split (accounted_split).
  mutable std::map<
      std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, std::int64_t, int, std::int64_t,
                 std::int64_t, bool, std::int64_t, std::int64_t, int, int, int, bool, int>,
      std::shared_ptr<const StageProfile>>
      profiles_;
  /// By (tp, pp, vp, dp, cp, ep, policy, first, last, fp8, accounted split, stage copies).
  mutable std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                              std::int64_t, int, std::int64_t, std::int64_t, int, int, bool>,
                   std::shared_ptr<const RankState>>
      rank_states_;
  /// Orders of the schedules without a closed-form stash peak, by (schedule, pp, vp, m, N).
  mutable std::map<std::tuple<std::string, std::int32_t, std::int32_t, std::int32_t, std::int32_t>,
                   std::shared_ptr<const pipeline::Order>>
      orders_;
  std::shared_ptr<const pipeline::Order> order(const pipeline::ScheduleSpec& spec) const;
};

}  // namespace metron::plan
