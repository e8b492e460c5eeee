#pragma once
// The attribute names the simulators read and the one oneof case each must use (docs/TRACES.md
// §3.3): the legacy feeder reads a fixed case and sees 0 in any other. The checker's table; the
// writer's output is held to it by the tests (check_chakra_directory over every export).

#include <cstdint>
#include <string_view>

namespace metron::chakra::detail {

// Field numbers of AttributeProto's oneof cases (docs/TRACES.md §3.1).
inline constexpr std::int32_t kInt32Val = 7;
inline constexpr std::int32_t kInt64Val = 9;
inline constexpr std::int32_t kUint64Val = 13;
inline constexpr std::int32_t kBoolVal = 27;
inline constexpr std::int32_t kBoolList = 28;
inline constexpr std::int32_t kStringVal = 29;

struct AttributeCase {
  std::string_view name;
  std::int32_t field;
  std::string_view case_name;
};

inline constexpr AttributeCase kAttributeCases[] = {
    {"is_cpu_op", kBoolVal, "bool_val"},       {"num_ops", kInt64Val, "int64_val"},
    {"tensor_size", kUint64Val, "uint64_val"}, {"comm_type", kInt64Val, "int64_val"},
    {"comm_size", kInt64Val, "int64_val"},     {"comm_src", kInt32Val, "int32_val"},
    {"comm_dst", kInt32Val, "int32_val"},      {"comm_tag", kInt32Val, "int32_val"},
    {"comm_priority", kInt32Val, "int32_val"}, {"pg_name", kStringVal, "string_val"},
    {"involved_dim", kBoolList, "bool_list"},
};

/// The case `name` must use, or null for an attribute the simulators do not read.
inline const AttributeCase* find_attribute_case(std::string_view name) {
  for (const AttributeCase& c : kAttributeCases) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace metron::chakra::detail
