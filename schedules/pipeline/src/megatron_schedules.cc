// Megatron-LM's pipelined schedules (docs/SCHEDULES.md §1.3–1.5), as per-rank compute orders.
//
// Note [megatron 1f1b shape]: every Megatron pipelined schedule runs a rank's virtual steps
// k = 0..total-1 as `F[0..w)`, then `F[w+k] B[k]` for the remaining steps, then the leftover
// `B`s, where w is the rank's warm-up. Only the table of (microbatch, chunk) per step and the
// warm-up differ; backward k runs chunk v-1-chunk(k) on the same microbatch (Megatron pops it
// from the chunk's FIFO, which yields exactly mb(k) because every group lists the same
// microbatches for every chunk).
//
// Megatron's argument check "with VPP, pp > 2 unless overlap_p2p_comm" (issue #750) is about
// telling two batched p2p messages to the same peer apart, not about the compute order, so it
// is not enforced here: the p2p lowering passes own that concern.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/base/error.h"
#include "metron/pipeline/generators.h"
#include "spec_checks.h"

namespace metron::pipeline {
namespace {

using Row = std::vector<std::optional<ir::Action>>;

// One virtual step of a rank: the microbatch and the local chunk its forward runs.
struct VirtualStep {
  std::int32_t microbatch = 0;
  std::int32_t chunk = 0;
};
using ScheduleTable = std::vector<VirtualStep>;

// Megatron only dispatches to the interleaved function when a virtual pipeline size is set.
void check_interleaved_vp(std::string_view name, const ScheduleSpec& spec) {
  if (spec.vp < 2) {
    throw InvalidConfig(fmt::format(
        "{}: needs at least 2 chunks per rank; got vp={}; with one chunk per rank use 1f1b",
        detail::describe_spec(name, spec), spec.vp));
  }
}

// "valid microbatch counts near m: a, b": the closest valid count below m (if any) and above.
std::string nearest_valid(std::int32_t m, std::int32_t search_span,
                          const std::function<bool(std::int32_t)>& is_valid) {
  std::vector<std::string> found;
  for (std::int32_t c = m - 1; c >= 1; --c) {
    if (is_valid(c)) {
      found.push_back(std::to_string(c));
      break;
    }
  }
  for (std::int32_t c = m + 1; c <= m + search_span; ++c) {
    if (is_valid(c)) {
      found.push_back(std::to_string(c));
      break;
    }
  }
  return fmt::format("valid microbatch counts near {}: {}", m, fmt::join(found, ", "));
}

ir::Action compute(ir::ActionType type, std::int32_t stage, std::int32_t microbatch) {
  return ir::Action{.type = type, .stage = stage, .microbatch = microbatch};
}

// Note [megatron 1f1b shape]. Stage of chunk c on rank r is c·p + r (loop placement).
Row one_f_one_b_row(const ScheduleTable& table, const ScheduleSpec& spec, std::int32_t rank,
                    std::int32_t warmup) {
  const auto total = static_cast<std::int32_t>(table.size());
  auto forward = [&](std::int32_t k) {
    const VirtualStep& step = table[static_cast<std::size_t>(k)];
    return compute(ir::ActionType::kForward, step.chunk * spec.pp + rank, step.microbatch);
  };
  auto backward = [&](std::int32_t k) {
    const VirtualStep& step = table[static_cast<std::size_t>(k)];
    const std::int32_t chunk = spec.vp - 1 - step.chunk;
    return compute(ir::ActionType::kBackward, chunk * spec.pp + rank, step.microbatch);
  };
  Row row;
  if (spec.forward_only) warmup = total;  // Megatron: forward-only is all warm-up
  for (std::int32_t k = 0; k < warmup; ++k) row.emplace_back(forward(k));
  for (std::int32_t k = 0; k < total - warmup; ++k) {
    row.emplace_back(forward(warmup + k));
    row.emplace_back(backward(k));
  }
  if (spec.forward_only) return row;
  for (std::int32_t k = total - warmup; k < total; ++k) row.emplace_back(backward(k));
  return row;
}

// Megatron's get_schedule_table: groups of N microbatches, each listed once per chunk; the
// last group (start + N >= m) takes the remaining microbatches.
ScheduleTable schedule_table(std::int32_t microbatches, std::int32_t chunks, std::int32_t group) {
  ScheduleTable table;
  for (std::int32_t first = 0; first < microbatches; first += group) {
    const std::int32_t end = first + group >= microbatches ? microbatches : first + group;
    for (std::int32_t chunk = 0; chunk < chunks; ++chunk) {
      for (std::int32_t mb = first; mb < end; ++mb) table.push_back({mb, chunk});
    }
  }
  return table;
}

// Pre-Nov-2024 get_model_chunk_id / get_microbatch_id_in_model_chunk: step k runs chunk
// (k mod p·v) div p and microbatch (k div p·v)·p + k mod p.
ScheduleTable legacy_schedule_table(std::int32_t pp, std::int32_t microbatches,
                                    std::int32_t chunks) {
  ScheduleTable table;
  for (std::int32_t k = 0; k < microbatches * chunks; ++k) {
    table.push_back({(k / (pp * chunks)) * pp + k % pp, (k % (pp * chunks)) / pp});
  }
  return table;
}

}  // namespace

std::int32_t detail::interleaved_group_size(const ScheduleSpec& spec) {
  constexpr std::string_view kName = "interleaved-1f1b";
  detail::require_positive(kName, spec);
  check_interleaved_vp(kName, spec);
  const std::int32_t p = spec.pp;
  const std::int32_t m = spec.microbatches;
  const std::int32_t n = spec.group_size.value_or(p);
  const std::string where = fmt::format(
      "schedule \"{}\" (pp={}, vp={}, microbatches={}, group size {})", kName, p, spec.vp, m, n);
  auto is_valid = [&](std::int32_t c) { return c >= n && (c % n == 0 || c % n >= p); };
  if (n < p) {
    throw InvalidConfig(fmt::format(
        "{}: group size {} is below pp {}; expected pp <= group size <= microbatches; use a "
        "group size of at least {} (and at least that many microbatches)",
        where, n, p, p));
  }
  if (n > m) {
    throw InvalidConfig(fmt::format(
        "{}: group size {} exceeds microbatches {}; expected pp <= group size <= microbatches; {}",
        where, n, m, nearest_valid(m, n, is_valid)));
  }
  // Megatron: a short last group (0 < m mod N < p) would leave dependency bubbles.
  if (const std::int32_t rest = m % n; rest != 0 && rest < p) {
    throw InvalidConfig(
        fmt::format("{}: microbatches mod group size is {}, which is neither 0 nor in [{}, {}); {}",
                    where, rest, p, n, nearest_valid(m, n, is_valid)));
  }
  return n;
}

namespace {

Order rows_of(const ScheduleSpec& spec, const std::function<Row(std::int32_t)>& row_of) {
  Order order;
  for (std::int32_t r = 0; r < spec.pp; ++r) order.rows.push_back(row_of(r));
  return order;
}

}  // namespace

Order one_f_one_b(const ScheduleSpec& spec) {
  constexpr std::string_view kName = "1f1b";
  detail::require_positive(kName, spec);
  if (spec.vp != 1) {
    throw InvalidConfig(fmt::format(
        "{}: needs exactly 1 chunk per rank; got vp={}; use interleaved-1f1b for several chunks",
        detail::describe_spec(kName, spec), spec.vp));
  }
  const ScheduleTable table = schedule_table(spec.microbatches, 1, spec.microbatches);
  return rows_of(spec, [&](std::int32_t r) {
    // No m-vs-p constraint: with m < p the warm-up is capped at m (all forwards, then all B).
    return one_f_one_b_row(table, spec, r, std::min(spec.pp - r - 1, spec.microbatches));
  });
}

Order interleaved_one_f_one_b(const ScheduleSpec& spec) {
  const std::int32_t n = detail::interleaved_group_size(spec);
  const ScheduleTable table = schedule_table(spec.microbatches, spec.vp, n);
  const auto total = static_cast<std::int32_t>(table.size());
  return rows_of(spec, [&](std::int32_t r) {
    // get_pp_rank_microbatches; "all warm-up" only for ranks whose warm-up reaches m·v.
    const std::int32_t warmup = 2 * (spec.pp - r - 1) + (spec.vp - 1) * n;
    return one_f_one_b_row(table, spec, r, std::min(warmup, total));
  });
}

Order interleaved_one_f_one_b_legacy(const ScheduleSpec& spec) {
  constexpr std::string_view kName = "interleaved-1f1b-legacy";
  detail::require_positive(kName, spec);
  check_interleaved_vp(kName, spec);
  const std::int32_t p = spec.pp;
  const std::int32_t m = spec.microbatches;
  if (spec.group_size && *spec.group_size != p) {
    throw InvalidConfig(fmt::format(
        "{}: group size is fixed to pp {} in releases before Nov 2024; got group size {}; use "
        "interleaved-1f1b for other group sizes",
        detail::describe_spec(kName, spec), p, *spec.group_size));
  }
  if (m % p != 0) {
    throw InvalidConfig(fmt::format(
        "{}: microbatches mod pp is {}; expected 0 (releases before Nov 2024 need microbatches "
        "divisible by pp); {}",
        detail::describe_spec(kName, spec), m % p,
        nearest_valid(m, p, [&](std::int32_t c) { return c % p == 0; })));
  }
  const ScheduleTable table = legacy_schedule_table(p, m, spec.vp);
  const auto total = static_cast<std::int32_t>(table.size());
  return rows_of(spec, [&](std::int32_t r) {
    // Old rule: when m == p every rank runs all forwards, then all backwards.
    const std::int32_t warmup = m == p ? total : 2 * (p - r - 1) + (spec.vp - 1) * p;
    return one_f_one_b_row(table, spec, r, std::min(warmup, total));
  });
}

}  // namespace metron::pipeline
