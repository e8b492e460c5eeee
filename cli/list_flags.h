#pragma once
// Comma-separated list flags ("--tp 4,8", "--sync all", "--layers-per-stage 6,7,7,4"): each item
// checked, and a bad or empty one reported as InvalidConfig naming the flag and the item.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metron/models/parallel_spec.h"
#include "metron/sync/sync_policy.h"

namespace metron::cli {

/// "4,8" → {4, 8}: integers ≥ 1, no duplicates.
std::vector<std::int64_t> parse_size_list(std::string_view flag, std::string_view text);

/// "7,8,8,7" → {7, 8, 8, 7}: integers ≥ 1 in the order given, repeats allowed.
std::vector<std::int64_t> parse_int64_list(std::string_view flag, std::string_view text);

/// As parse_size_list, for 32-bit values (group-size multiples).
std::vector<std::int32_t> parse_small_size_list(std::string_view flag, std::string_view text);

/// "6,7,7,4" → {6, 7, 7, 4}: integers ≥ 1 that fit 32 bits, in order, repeats kept.
std::vector<std::int32_t> parse_int32_list(std::string_view flag, std::string_view text);

/// "none,selective" → recompute modes.
std::vector<models::Recompute> parse_recompute_list(std::string_view flag, std::string_view text);

/// "unfused,fused" → attention kernels.
std::vector<models::AttentionKernel> parse_attention_list(std::string_view flag,
                                                          std::string_view text);

/// "off,delayed" → FP8 recipes.
std::vector<models::Fp8Recipe> parse_fp8_list(std::string_view flag, std::string_view text);

/// Registry names (checked against schedules/registry.h), or "all" (plan::kAllPlanSchedules).
std::vector<std::string> parse_schedule_list(std::string_view flag, std::string_view text);

/// Sync policy names, or "all" (every policy of sync::SyncPolicy).
std::vector<sync::SyncPolicy> parse_policy_list(std::string_view flag, std::string_view text);

/// "on" → {true}, "off" → {false}, "both" → {false, true}.
std::vector<bool> parse_on_off_both(std::string_view flag, std::string_view text);

}  // namespace metron::cli
