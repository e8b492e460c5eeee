// Group names: "<kind><index>". Parsing must not confuse kinds that are prefixes of one another
// ("dp" of "dp-intra3", "edp" of "edp-inter0"): a kind matches only when digits alone follow it.

#include "metron/lowering/comm_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "metron/base/error.h"

namespace metron::lowering {
namespace {

constexpr std::array kKinds = {
    GroupKind::kTensor,      GroupKind::kContext,     GroupKind::kExpert,
    GroupKind::kData,        GroupKind::kExpertData,  GroupKind::kDataIntra,
    GroupKind::kDataInter,   GroupKind::kExpertIntra, GroupKind::kExpertInter,
    GroupKind::kStageCopies, GroupKind::kEmbedding,
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string_view to_string(GroupKind kind) noexcept {
  switch (kind) {
    case GroupKind::kTensor:
      return "tp";
    case GroupKind::kContext:
      return "cp";
    case GroupKind::kExpert:
      return "ep";
    case GroupKind::kData:
      return "dp";
    case GroupKind::kExpertData:
      return "edp";
    case GroupKind::kDataIntra:
      return "dp-intra";
    case GroupKind::kDataInter:
      return "dp-inter";
    case GroupKind::kExpertIntra:
      return "edp-intra";
    case GroupKind::kExpertInter:
      return "edp-inter";
    case GroupKind::kStageCopies:
      return "pp-copies";
    case GroupKind::kEmbedding:
      return "embedding";
  }
  return "?";
}

std::string group_name(GroupKind kind, std::int32_t index) {
  if (index < 0) {
    throw InvalidConfig(fmt::format("group_name: index of a \"{}\" group is {}; expected >= 0",
                                    to_string(kind), index));
  }
  return fmt::format("{}{}", to_string(kind), index);
}

std::optional<GroupKind> group_kind(std::string_view name) noexcept {
  // The longest matching kind wins; with the digits-only rule at most one matches anyway.
  std::optional<GroupKind> best;
  std::size_t best_length = 0;
  for (GroupKind kind : kKinds) {
    const std::string_view prefix = to_string(kind);
    if (name.starts_with(prefix) && all_digits(name.substr(prefix.size())) &&
        prefix.size() > best_length) {
      best = kind;
      best_length = prefix.size();
    }
  }
  return best;
}

}  // namespace metron::lowering
