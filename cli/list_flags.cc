#include "list_flags.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <type_traits>

#include "metron/base/error.h"
#include "metron/pipeline/registry.h"
#include "metron/plan/plan_request.h"

namespace metron::cli {
namespace {

[[noreturn]] void reject(std::string_view flag, std::string_view item, std::string_view expected) {
  throw InvalidConfig(std::string(flag) + ": expected " + std::string(expected) + ", got '" +
                      std::string(item) + "'");
}

/// The items of a comma-separated list; an empty list or item is an error.
std::vector<std::string_view> split(std::string_view flag, std::string_view text,
                                    std::string_view expected) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma - start);
    if (item.empty()) {
      throw InvalidConfig(std::string(flag) + ": expected " + std::string(expected) + ", got '" +
                          std::string(text) + "' with an empty element (number " +
                          std::to_string(items.size() + 1) + ")");
    }
    items.push_back(item);
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

/// Adds `value` unless it is already there: "--tp 4,4" means the same as "--tp 4".
template <class T>
void add_once(std::vector<T>& values, const T& value) {
  if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
}

/// The items as integers >= 1 of type Int (from_chars refuses what does not fit); `once` drops
/// repeated values.
template <class Int>
std::vector<Int> parse_positive(std::string_view flag, std::string_view text, bool once = true) {
  // from_chars refuses what does not fit Int, so an overflowing item gets the same message.
  constexpr std::string_view kExpected = "integers >= 1 separated by commas";
  std::vector<Int> values;
  for (const std::string_view item : split(flag, text, kExpected)) {
    Int value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || end != item.data() + item.size() || value < 1) {
      reject(flag, item, kExpected);
    }
    if (once) {
      add_once(values, value);
    } else {
      values.push_back(value);
    }
  }
  return values;
}

/// The items as the values `parse` names (nullopt: not a name), repeats dropped.
template <class Parse>
auto parse_names(std::string_view flag, std::string_view text, std::string_view expected,
                 Parse parse) {
  std::vector<typename std::invoke_result_t<Parse, std::string_view>::value_type> values;
  for (const std::string_view item : split(flag, text, expected)) {
    const auto value = parse(item);
    if (!value) reject(flag, item, expected);
    add_once(values, *value);
  }
  return values;
}

}  // namespace

std::vector<std::int64_t> parse_size_list(std::string_view flag, std::string_view text) {
  return parse_positive<std::int64_t>(flag, text);
}

std::vector<std::int32_t> parse_small_size_list(std::string_view flag, std::string_view text) {
  return parse_positive<std::int32_t>(flag, text);
}

std::vector<std::int64_t> parse_int64_list(std::string_view flag, std::string_view text) {
  return parse_positive<std::int64_t>(flag, text, false);
}

std::vector<std::int32_t> parse_int32_list(std::string_view flag, std::string_view text) {
  return parse_positive<std::int32_t>(flag, text, false);
}

std::vector<models::Recompute> parse_recompute_list(std::string_view flag, std::string_view text) {
  return parse_names(flag, text, "none, selective or full, separated by commas",
                     models::parse_recompute);
}

std::vector<models::AttentionKernel> parse_attention_list(std::string_view flag,
                                                          std::string_view text) {
  return parse_names(flag, text, "unfused or fused, separated by commas",
                     models::parse_attention_kernel);
}

std::vector<models::Fp8Recipe> parse_fp8_list(std::string_view flag, std::string_view text) {
  return parse_names(flag, text, "off, delayed or current, separated by commas",
                     models::parse_fp8_recipe);
}

std::vector<std::string> parse_schedule_list(std::string_view flag, std::string_view text) {
  constexpr std::string_view kExpected = "schedule names separated by commas, or all";
  if (text == "all") text = plan::kAllPlanSchedules;
  std::vector<std::string> values;
  for (const std::string_view item : split(flag, text, kExpected)) {
    try {
      pipeline::find_schedule(item);
    } catch (const InvalidConfig& e) {
      throw InvalidConfig(std::string(flag) + ": " + e.what());
    }
    add_once(values, std::string(item));
  }
  return values;
}

std::vector<sync::SyncPolicy> parse_policy_list(std::string_view flag, std::string_view text) {
  const std::string expected =
      std::string(sync::sync_policy_names()) + " separated by commas, or all";
  // "all" is every name sync_policy_names() lists (separated by '|' there).
  std::string list(text == "all" ? sync::sync_policy_names() : text);
  if (text == "all") std::replace(list.begin(), list.end(), '|', ',');
  std::vector<sync::SyncPolicy> values;
  for (const std::string_view item : split(flag, list, expected)) {
    const std::optional<sync::SyncPolicy> value = sync::parse_sync_policy(item);
    if (!value) reject(flag, item, expected);
    add_once(values, *value);
  }
  return values;
}

std::vector<bool> parse_on_off_both(std::string_view flag, std::string_view text) {
  if (text == "on") return {true};
  if (text == "off") return {false};
  if (text == "both") return {false, true};
  reject(flag, text, "on, off or both");
}

}  // namespace metron::cli
