// Golden per-rank orders for Megatron's 1F1B, interleaved 1F1B and the pre-Nov-2024 interleaved
// schedule, derived by hand from docs/SCHEDULES.md §1.3–1.5 (the derivation sits next to each
// expectation); every error path; a cross-check against an independent re-implementation of
// PyTorch's ScheduleInterleaved1F1B (§2.4); and sweeps through validate_order and time_order.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "metron/base/error.h"
#include "metron/ir/action_rows.h"
#include "metron/pipeline/generators.h"
#include "metron/pipeline/order_checks.h"

namespace metron::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// One rank's row in the text form, without the "rank r:" prefix.
std::string row_text(const Order& order, std::size_t rank) {
  std::string out;
  for (const auto& action : order.rows.at(rank)) {
    out += (out.empty() ? "" : " ") + (action ? ir::to_string(*action) : "_");
  }
  return out;
}

TEST(OneFOneB, WarmupThenAlternateThenDrain) {
  // p=4, m=6; rank r holds stage r; warm-up w = min(p-r-1, m), steady m-w pairs F(w+i) B(i),
  // cool-down B(m-w..m-1).
  //   rank 0: w = 3 -> F0 F1 F2 | F3 B0 F4 B1 F5 B2 | B3 B4 B5
  //   rank 1: w = 2 -> F0 F1 | F2 B0 F3 B1 F4 B2 F5 B3 | B4 B5
  //   rank 2: w = 1 -> F0 | F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 | B5
  //   rank 3: w = 0 -> F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5
  EXPECT_EQ(ir::format_rows(one_f_one_b({.pp = 4, .microbatches = 6})),
            "rank 0: 0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5\n"
            "rank 1: 1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1B4 1B5\n"
            "rank 2: 2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2B5\n"
            "rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5\n");
}

TEST(OneFOneB, FewerMicrobatchesThanStagesCapsTheWarmup) {
  // p=4, m=2 (no m-vs-p constraint in Megatron):
  //   rank 0: w = min(3, 2) = 2 -> F0 F1 | no steady | B0 B1
  //   rank 1: w = min(2, 2) = 2 -> F0 F1 | B0 B1
  //   rank 2: w = 1 -> F0 | F1 B0 | B1
  //   rank 3: w = 0 -> F0 B0 F1 B1
  EXPECT_EQ(ir::format_rows(one_f_one_b({.pp = 4, .microbatches = 2})),
            "rank 0: 0F0 0F1 0B0 0B1\n"
            "rank 1: 1F0 1F1 1B0 1B1\n"
            "rank 2: 2F0 2F1 2B0 2B1\n"
            "rank 3: 3F0 3B0 3F1 3B1\n");
}

TEST(OneFOneB, ForwardOnlyRunsEveryForwardInOrder) {
  EXPECT_EQ(ir::format_rows(one_f_one_b({.pp = 2, .microbatches = 3, .forward_only = true})),
            "rank 0: 0F0 0F1 0F2\n"
            "rank 1: 1F0 1F1 1F2\n");
}

TEST(OneFOneB, RejectsSeveralChunksAndNonPositiveSizes) {
  EXPECT_THAT([] { (void)one_f_one_b({.pp = 4, .vp = 2, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"1f1b\" (pp=4, vp=2, microbatches=8): needs exactly 1 chunk per "
                  "rank; got vp=2; use interleaved-1f1b for several chunks"));
  EXPECT_THAT([] { (void)one_f_one_b({.pp = 4, .microbatches = 0}); },
              ThrowsMessage<InvalidConfig>("schedule \"1f1b\" (pp=4, vp=1, microbatches=0): pp, "
                                           "vp and microbatches must be at least 1"));
}

TEST(Interleaved1F1B, ScheduleTableWithAShortLastGroup) {
  // p=2, v=2, N=3, m=5. Schedule table (§1.4): mb 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1.
  // Stage of chunk c on rank r is 2c + r. Forward k: (mb_k, chunk_k); backward k: chunk
  // 1 - chunk_k, mb_k. Rank 0 (stages 0, 2):
  //   F_k: 0F0 0F1 0F2 2F0 2F1 2F2 0F3 0F4 2F3 2F4;  B_k: 2B0 2B1 2B2 0B0 0B1 0B2 2B3 2B4 0B3 0B4
  //   w = 2(2-0-1) + (2-1)·3 = 5 -> F_0..F_4 | F5 B0 F6 B1 F7 B2 F8 B3 F9 B4 | B5..B9
  // Rank 1 (stages 1, 3): w = 0 + 3 = 3 -> F_0..F_2 | F3 B0 ... F9 B6 | B7 B8 B9
  EXPECT_EQ(ir::format_rows(
                interleaved_one_f_one_b({.pp = 2, .vp = 2, .microbatches = 5, .group_size = 3})),
            "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2 2B0 0F3 2B1 0F4 2B2 2F3 0B0 2F4 0B1 0B2 2B3 2B4 0B3 "
            "0B4\n"
            "rank 1: 1F0 1F1 1F2 3F0 3B0 3F1 3B1 3F2 3B2 1F3 1B0 1F4 1B1 3F3 1B2 3F4 3B3 3B4 1B3 "
            "1B4\n");
}

TEST(Interleaved1F1B, FourRanksTwoChunksEightMicrobatches) {
  // p=4, v=2, m=8, N=4: table mb 0-3 0-3 4-7 4-7, chunk 0000 1111 0000 1111 (16 steps).
  // Rank 0 (stages 0, 4): w = 2·3 + 4 = 10 -> F_0..F_9 = 0F0-3 4F0-3 0F4 0F5;
  //   steady k=0..5: F_{10+k} B_k = 0F6 4B0 0F7 4B1 4F4 4B2 4F5 4B3 4F6 0B0 4F7 0B1;
  //   cool-down B_6..B_15 = 0B2 0B3 4B4-7 0B4-7.
  // Rank 3 (stages 3, 7): w = 0 + 4 = 4 -> 3F0-3; steady k=0..11: F_{4+k} B_k with
  //   F: 7F0-3 3F4-7 7F4-7 and B: 7B0-3 3B0-3 7B4-7; cool-down B_12..B_15 = 3B4-7.
  const Order order = interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 8});
  EXPECT_EQ(row_text(order, 0),
            "0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 0F4 0F5 0F6 4B0 0F7 4B1 4F4 4B2 4F5 4B3 4F6 0B0 4F7 "
            "0B1 0B2 0B3 4B4 4B5 4B6 4B7 0B4 0B5 0B6 0B7");
  EXPECT_EQ(row_text(order, 3),
            "3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 3F4 3B0 3F5 3B1 3F6 3B2 3F7 3B3 7F4 "
            "7B4 7F5 7B5 7F6 7B6 7F7 7B7 3B4 3B5 3B6 3B7");
}

TEST(Interleaved1F1B, OnlyRanksWithWarmupReachingMTimesVAreAllWarmup) {
  // p=4, v=2, m=4, N=4 (§1.5): m·v = 8; w = 2(3-r) + 4 = 10, 8, 6, 4. Ranks 0 and 1 run all
  // forwards then all backwards; rank 2: F_0..F_5 | F6 B0 F7 B1 | B2..B7; rank 3 likewise, w=4.
  EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 4})),
            "rank 0: 0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 4B0 4B1 4B2 4B3 0B0 0B1 0B2 0B3\n"
            "rank 1: 1F0 1F1 1F2 1F3 5F0 5F1 5F2 5F3 5B0 5B1 5B2 5B3 1B0 1B1 1B2 1B3\n"
            "rank 2: 2F0 2F1 2F2 2F3 6F0 6F1 6F2 6B0 6F3 6B1 6B2 6B3 2B0 2B1 2B2 2B3\n"
            "rank 3: 3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 3B0 3B1 3B2 3B3\n");
}

TEST(Interleaved1F1B, ForwardOnlyFollowsTheScheduleTable) {
  // Megatron forward-only: w = m·v, so the forwards run in schedule-table order.
  EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b(
                {.pp = 2, .vp = 2, .microbatches = 5, .group_size = 3, .forward_only = true})),
            "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2 0F3 0F4 2F3 2F4\n"
            "rank 1: 1F0 1F1 1F2 3F0 3F1 3F2 1F3 1F4 3F3 3F4\n");
}

TEST(Interleaved1F1B, ShortLastGroupNamesTheNearestValidCounts) {
  EXPECT_THAT([] { (void)interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 10}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"interleaved-1f1b\" (pp=4, vp=2, microbatches=10, group size 4): "
                  "microbatches mod group size is 2, which is neither 0 nor in [4, 4); valid "
                  "microbatch counts near 10: 8, 12"));
  // N=6: 9 mod 6 = 3 < 4; 8 and 7 leave 2 and 1, 6 leaves 0; 10 leaves 4, in [4, 6).
  EXPECT_THAT(
      [] { (void)interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 9, .group_size = 6}); },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("(pp=4, vp=2, microbatches=9, group size 6): microbatches mod group size is "
                    "3, which is neither 0 nor in [4, 6); valid microbatch counts near 9: 6, 10")));
}

TEST(Interleaved1F1B, GroupSizeOutsidePpToMicrobatchesIsRejected) {
  // Default N = p = 4 > m = 3: the smallest valid count is N itself.
  EXPECT_THAT([] { (void)interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 3}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"interleaved-1f1b\" (pp=4, vp=2, microbatches=3, group size 4): "
                  "group size 4 exceeds microbatches 3; expected pp <= group size <= "
                  "microbatches; valid microbatch counts near 3: 4"));
  EXPECT_THAT(
      [] { (void)interleaved_one_f_one_b({.pp = 4, .vp = 2, .microbatches = 8, .group_size = 2}); },
      ThrowsMessage<InvalidConfig>(
          "schedule \"interleaved-1f1b\" (pp=4, vp=2, microbatches=8, group size 2): group size "
          "2 is below pp 4; expected pp <= group size <= microbatches; use a group size of at "
          "least 4 (and at least that many microbatches)"));
}

TEST(Interleaved1F1B, OneChunkPerRankPointsTo1F1B) {
  EXPECT_THAT([] { (void)interleaved_one_f_one_b({.pp = 4, .vp = 1, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(
                  "schedule \"interleaved-1f1b\" (pp=4, vp=1, microbatches=8): needs at least 2 "
                  "chunks per rank; got vp=1; with one chunk per rank use 1f1b"));
  EXPECT_THAT([] { (void)interleaved_one_f_one_b_legacy({.pp = 4, .vp = 1, .microbatches = 8}); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "(pp=4, vp=1, microbatches=8): needs at least 2 chunks per rank; got vp=1; "
                  "with one chunk per rank use 1f1b")));
}

TEST(Interleaved1F1BLegacy, MicrobatchesEqualToPpMeansAllWarmupOnEveryRank) {
  // p=4, v=2, m=4: old table k -> chunk (k mod 8) div 4, mb (k div 8)·4 + k mod 4, i.e.
  // mb 0-3 0-3, chunk 0000 1111. m == p, so every rank runs all F then all B (ranks 2 and 3
  // differ from today's schedule, compare OnlyRanksWithWarmupReachingMTimesVAreAllWarmup).
  EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b_legacy({.pp = 4, .vp = 2, .microbatches = 4})),
            "rank 0: 0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 4B0 4B1 4B2 4B3 0B0 0B1 0B2 0B3\n"
            "rank 1: 1F0 1F1 1F2 1F3 5F0 5F1 5F2 5F3 5B0 5B1 5B2 5B3 1B0 1B1 1B2 1B3\n"
            "rank 2: 2F0 2F1 2F2 2F3 6F0 6F1 6F2 6F3 6B0 6B1 6B2 6B3 2B0 2B1 2B2 2B3\n"
            "rank 3: 3F0 3F1 3F2 3F3 7F0 7F1 7F2 7F3 7B0 7B1 7B2 7B3 3B0 3B1 3B2 3B3\n");
}

TEST(Interleaved1F1BLegacy, TwicePpMicrobatches) {
  // p=2, v=2, m=4: k=0..7 -> chunk (k mod 4) div 2 = 0 0 1 1 0 0 1 1, mb (k div 4)·2 + k mod 2
  // = 0 1 0 1 2 3 2 3. Rank 0 (stages 0, 2): w = 2·1 + 1·2 = 4:
  //   F_k: 0F0 0F1 2F0 2F1 0F2 0F3 2F2 2F3;  B_k: 2B0 2B1 0B0 0B1 2B2 2B3 0B2 0B3
  //   F_0..F_3 | F4 B0 F5 B1 F6 B2 F7 B3 | B4..B7
  // Rank 1 (stages 1, 3): w = 0 + 2 = 2 -> F_0 F_1 | F2 B0 ... F7 B5 | B6 B7
  EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b_legacy({.pp = 2, .vp = 2, .microbatches = 4})),
            "rank 0: 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3\n"
            "rank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3\n");
}

TEST(Interleaved1F1BLegacy, ForwardOnlyFollowsTheOldChunkOrder) {
  EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b_legacy(
                {.pp = 2, .vp = 2, .microbatches = 4, .forward_only = true})),
            "rank 0: 0F0 0F1 2F0 2F1 0F2 0F3 2F2 2F3\n"
            "rank 1: 1F0 1F1 3F0 3F1 1F2 1F3 3F2 3F3\n");
}

TEST(Interleaved1F1BLegacy, EqualsTodaysScheduleWhenPpDividesMicrobatches) {
  // §1.5 (Megatron's test_helpers.py asserts it): same order when N = p and p | m, m != p.
  for (std::int32_t p = 1; p <= 6; ++p) {
    for (std::int32_t v = 2; v <= 4; ++v) {
      for (std::int32_t m = 2 * p; m <= 4 * p; m += p) {
        const ScheduleSpec spec{.pp = p, .vp = v, .microbatches = m};
        EXPECT_EQ(interleaved_one_f_one_b_legacy(spec), interleaved_one_f_one_b(spec))
            << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

TEST(Interleaved1F1BLegacy, RejectsMicrobatchesNotDivisibleByPpAndOtherGroupSizes) {
  EXPECT_THAT(
      [] { (void)interleaved_one_f_one_b_legacy({.pp = 4, .vp = 2, .microbatches = 6}); },
      ThrowsMessage<InvalidConfig>(
          "schedule \"interleaved-1f1b-legacy\" (pp=4, vp=2, microbatches=6): microbatches mod "
          "pp is 2; expected 0 (releases before Nov 2024 need microbatches divisible by pp); "
          "valid microbatch counts near 6: 4, 8"));
  EXPECT_THAT(
      [] {
        (void)interleaved_one_f_one_b_legacy(
            {.pp = 4, .vp = 2, .microbatches = 8, .group_size = 5});
      },
      ThrowsMessage<InvalidConfig>(
          "schedule \"interleaved-1f1b-legacy\" (pp=4, vp=2, microbatches=8): group size is "
          "fixed to pp 4 in releases before Nov 2024; got group size 5; use interleaved-1f1b "
          "for other group sizes"));
}

// An independent re-implementation of PyTorch's ScheduleInterleaved1F1B compute order
// (_calculate_single_rank_operations feeding _get_1f1b_rank_ops, docs/SCHEDULES.md §2.4), without
// the None bubbles. nullopt when PyTorch rejects m (m % rounds != 0).
std::optional<Order> pytorch_interleaved_order(std::int32_t p, std::int32_t v, std::int32_t m) {
  const std::int32_t rounds = std::max(1, m / p);
  if (m % rounds != 0) return std::nullopt;
  const std::int32_t mpr = m / rounds;
  Order order;
  for (std::int32_t r = 0; r < p; ++r) {
    const std::int32_t warmup = std::min((v - 1) * mpr + 2 * (p - 1 - r), m * v);
    const std::int32_t fwd_bwd = m * v - warmup;
    auto fsi = [&](std::int32_t step) { return ((step / mpr) % v) * p + r; };
    auto bsi = [&](std::int32_t step) { return (v - 1 - ((step - warmup) / mpr) % v) * p + r; };
    std::map<std::int32_t, std::int32_t> next_f, next_b;  // per-stage microbatch counters
    auto& row = order.rows.emplace_back();
    auto add = [&](ir::ActionType type, std::int32_t stage,
                   std::map<std::int32_t, std::int32_t>& next) {
      row.emplace_back(ir::Action{.type = type, .stage = stage, .microbatch = next[stage]++});
    };
    for (std::int32_t op = 0; op < warmup + fwd_bwd + warmup; ++op) {
      if (op < warmup + fwd_bwd) add(ir::ActionType::kForward, fsi(op), next_f);
      if (op >= warmup) add(ir::ActionType::kBackward, bsi(op), next_b);
    }
  }
  return order;
}

TEST(Interleaved1F1B, EqualsPyTorchInterleavedWithGroupSizeMicrobatchesPerRound) {
  // docs/SCHEDULES.md §2.4: PyTorch's order equals Megatron's with N = mpr = m / max(1, m / p).
  int compared = 0;
  for (std::int32_t p = 2; p <= 6; ++p) {
    for (std::int32_t v = 2; v <= 4; ++v) {
      for (std::int32_t m = 1; m <= 4 * p + 3; ++m) {
        const std::optional<Order> expected = pytorch_interleaved_order(p, v, m);
        const std::int32_t mpr = m / std::max(1, m / p);
        if (!expected || mpr < p) continue;  // PyTorch rejects m, or Megatron rejects N < p
        EXPECT_EQ(ir::format_rows(interleaved_one_f_one_b(
                      {.pp = p, .vp = v, .microbatches = m, .group_size = mpr})),
                  ir::format_rows(*expected))
            << "p=" << p << " v=" << v << " m=" << m;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// Megatron's interleaved constraints (§1.4), written independently of the generator.
bool megatron_accepts(std::int32_t p, std::int32_t m, std::int32_t n) {
  return p <= n && n <= m && (m % n == 0 || m % n >= p);
}

TEST(MegatronSchedules, EveryAcceptedOrderValidatesAndOnlyInvalidSpecsAreRejected) {
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
      for (bool fwd : {false, true}) {
        const ScheduleSpec one{.pp = p, .microbatches = m, .forward_only = fwd};
        validate_order(one_f_one_b(one), one, Placement::kLoop);
        for (std::int32_t v = 2; v <= 4; ++v) {
          for (std::int32_t n = p; n <= p + 2; ++n) {
            const ScheduleSpec s{
                .pp = p, .vp = v, .microbatches = m, .group_size = n, .forward_only = fwd};
            SCOPED_TRACE(testing::Message() << "p=" << p << " v=" << v << " m=" << m << " N=" << n);
            if (megatron_accepts(p, m, n)) {
              validate_order(interleaved_one_f_one_b(s), s, Placement::kLoop);
            } else {
              EXPECT_THROW((void)interleaved_one_f_one_b(s), InvalidConfig);
            }
          }
          const ScheduleSpec legacy{.pp = p, .vp = v, .microbatches = m, .forward_only = fwd};
          if (m % p == 0) {
            validate_order(interleaved_one_f_one_b_legacy(legacy), legacy, Placement::kLoop);
          } else {
            EXPECT_THROW((void)interleaved_one_f_one_b_legacy(legacy), InvalidConfig);
          }
        }
      }
    }
  }
}

constexpr ActionTimes kUnitTimes{.forward = 1, .backward = 2, .p2p = 0};

TEST(OneFOneB, UnitTimeMakespanAndPeakActivationsMatchTheFormulas) {
  // docs/SCHEDULES.md §5: bubble (p-1)(F+B), so makespan (m+p-1)(F+B) = 3(m+p-1) with F=1, B=2
  // (checked by hand for p=2, m=2: r0 F0[0,1] F1[1,2]; r1 F0[1,2] B0[2,4]; r0 B0[4,6];
  // r1 F1[4,5] B1[5,7]; r0 B1[7,9] -> 9). Peak on rank r: min(p-r, m).
  for (std::int32_t p = 1; p <= 8; ++p) {
    for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
      const Timeline t = time_order(one_f_one_b({.pp = p, .microbatches = m}), kUnitTimes);
      EXPECT_DOUBLE_EQ(t.makespan, 3.0 * (m + p - 1)) << "p=" << p << " m=" << m;
      for (std::int32_t r = 0; r < p; ++r) {
        EXPECT_EQ(t.peak_activations[static_cast<std::size_t>(r)], std::min(p - r, m))
            << "p=" << p << " m=" << m << " r=" << r;
      }
    }
  }
}

TEST(Interleaved1F1B, UnitTimeMakespanAndPeakActivationsMatchTheFormulas) {
  // Per-chunk F=1, B=2: docs/SCHEDULES.md §5's bubble (p-1)(F+B)/v in full-stage units is (p-1)·3
  // here, so makespan (m·v + p - 1)·3 (by hand for p=2, v=2, m=2: r0 0F0[0,1] 0F1[1,2]
  // 2F0[2,3] 2F1[3,4]; r1 1F0[1,2] 1F1[2,3] 3F0[3,4] 3B0[4,6] 3F1[6,7] 3B1[7,9]; r0 2B0[6,8]
  // 2B1[9,11]; r1 1B0[9,11] 1B1[11,13]; r0 0B0[11,13] 0B1[13,15] -> 15). It holds for every
  // group size Megatron accepts. Peak on rank r: min(w_r + 1, m·v) with the uncapped warm-up
  // w_r = 2(p-r-1) + (v-1)·N.
  for (std::int32_t p = 1; p <= 6; ++p) {
    for (std::int32_t v = 2; v <= 4; ++v) {
      for (std::int32_t m = p; m <= 3 * p + 2; ++m) {
        for (std::int32_t n = p; n <= m; ++n) {
          if (!megatron_accepts(p, m, n)) continue;
          const Timeline t = time_order(
              interleaved_one_f_one_b({.pp = p, .vp = v, .microbatches = m, .group_size = n}),
              kUnitTimes);
          SCOPED_TRACE(testing::Message() << "p=" << p << " v=" << v << " m=" << m << " N=" << n);
          EXPECT_DOUBLE_EQ(t.makespan, 3.0 * (m * v + p - 1));
          for (std::int32_t r = 0; r < p; ++r) {
            const std::int32_t warmup = 2 * (p - r - 1) + (v - 1) * n;
            EXPECT_EQ(t.peak_activations[static_cast<std::size_t>(r)], std::min(warmup + 1, m * v));
          }
        }
      }
    }
  }
}

TEST(Interleaved1F1BLegacy, UnitTimePeakActivationsFollowTheOldWarmup) {
  // Old rule: w_r = 2(p-r-1) + (v-1)·p, except m == p, where every rank holds all m·v.
  for (std::int32_t p = 1; p <= 6; ++p) {
    for (std::int32_t v = 2; v <= 4; ++v) {
      for (std::int32_t m = p; m <= 3 * p; m += p) {
        const Timeline t = time_order(
            interleaved_one_f_one_b_legacy({.pp = p, .vp = v, .microbatches = m}), kUnitTimes);
        for (std::int32_t r = 0; r < p; ++r) {
          const std::int32_t warmup = m == p ? m * v : 2 * (p - r - 1) + (v - 1) * p;
          EXPECT_EQ(t.peak_activations[static_cast<std::size_t>(r)], std::min(warmup + 1, m * v))
              << "p=" << p << " v=" << v << " m=" << m << " r=" << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace metron::pipeline
