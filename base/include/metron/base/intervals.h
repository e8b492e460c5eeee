#pragma once
// Time intervals [start, end) in integer nanoseconds, and the three operations a step's figures
// are made of: a rank's busy time is the length of the union of its compute intervals, and its
// overlapped communication the overlap of two such unions (Note [timeline metrics],
// Note [trace comparison]). Header-only: both the simulator's metrics and the trace reader use it.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace metron {

using Interval = std::pair<std::int64_t, std::int64_t>;  ///< [first, second)

/// The union of `intervals` as sorted, disjoint intervals; empty ones dropped.
inline std::vector<Interval> merged(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.second <= i.first; });
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

/// Total length of sorted, disjoint intervals.
inline std::int64_t length(const std::vector<Interval>& disjoint) {
  std::int64_t sum = 0;
  for (const auto& [a, b] : disjoint) sum += b - a;
  return sum;
}

/// Length of the part of `a` that `b` also covers (both sorted and disjoint, as merged() gives).
inline std::int64_t overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t sum = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : a) {
    while (j < b.size() && b[j].second <= s) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < e; ++k) {
      sum += std::min(e, b[k].second) - std::max(s, b[k].first);
    }
  }
  return sum;
}

}  // namespace metron
