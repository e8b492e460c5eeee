// The Checker's rules that relate events to each other: B/E matching, slice nesting per row, v2
// and v1 flows, and one value per process or thread metadata. They run after every event alone.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "event_checker.h"
#include "trace_values.h"

namespace metron::traces::detail {

/// E closes the innermost open B of its row; a different name or cat would leave the B open
/// in Perfetto ("Did not end", §1.6). The matched pair joins the row's slices.
void Checker::check_begin_end() {
  std::map<Row, std::vector<std::size_t>> open;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = info_[i];
    if ((e.ph != "B" && e.ph != "E") || !e.pid || !e.tid || !e.ts) continue;
    std::vector<std::size_t>& stack = open[{*e.pid, *e.tid}];
    if (e.ph == "B") {
      stack.push_back(i);
      continue;
    }
    if (stack.empty()) {
      add(i, "E without an open B on its row");
      continue;
    }
    const std::size_t b = stack.back();
    stack.pop_back();
    const Event& begin = info_[b];
    if ((e.has_name && begin.has_name && e.name != begin.name) ||
        (e.has_cat && begin.has_cat && e.cat != begin.cat)) {
      add(i, "E does not match the open " + short_name(b) +
                 " (name or cat differ); Perfetto leaves that B unterminated");
    } else if (*e.ts < *begin.ts) {
      add(i, "E at " + microseconds(*e.ts) + " µs ends before its " + short_name(b) +
                 " begins at " + microseconds(*begin.ts) + " µs");
    } else {
      rows_[{*begin.pid, *begin.tid}].push_back({*begin.ts, *e.ts, b, std::nullopt});
    }
  }
  for (const auto& [row, stack] : open) {
    for (std::size_t b : stack) add(b, "B is never ended by an E on its row");
  }
}

/// Proper nesting on each row: sorted by start, longest first (Perfetto's order for equal ts),
/// a slice must end within every slice still open at its start (§1.6, X events).
void Checker::check_nesting() {
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = info_[i];
    if (e.ph == "X" && e.pid && e.tid && e.ts && e.dur) {
      rows_[{*e.pid, *e.tid}].push_back({*e.ts, *e.ts + *e.dur, i, std::nullopt});
    }
  }
  for (auto& [row, slices] : rows_) {
    std::sort(slices.begin(), slices.end(), [](const Interval& a, const Interval& b) {
      if (a.start != b.start) return a.start < b.start;
      if (a.end != b.end) return a.end > b.end;
      return a.index < b.index;
    });
    std::vector<std::size_t> stack;
    for (std::size_t k = 0; k < slices.size(); ++k) {
      Interval& s = slices[k];
      while (!stack.empty() && slices[stack.back()].end <= s.start) stack.pop_back();
      if (!stack.empty() && slices[stack.back()].end < s.end) {
        const Interval& other = slices[stack.back()];
        add(s.index, "overlaps " + short_name(other.index) + " on the same row without nesting ([" +
                         microseconds(s.start) + ", " + microseconds(s.end) + "] µs against [" +
                         microseconds(other.start) + ", " + microseconds(other.end) + "] µs)");
        continue;  // Perfetto spills it to another track; the rest nest without it.
      }
      if (!stack.empty()) s.parent = stack.back();
      stack.push_back(k);
    }
  }
}

/// Each bind_id starts one arrow and ends it once (Perfetto rejects reuse as
/// flow_duplicate_id), an arrow does not point back in time, and its start comes first in the
/// file.
void Checker::check_flows_v2() {
  struct Ends {
    std::vector<std::size_t> out;
    std::vector<std::size_t> in;
  };
  std::map<std::int64_t, Ends> flows;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    if (info_[i].ph != "X" && info_[i].ph != "B") continue;
    const std::optional<std::int64_t> id = integer(member(events_[i], "bind_id"));
    if (!id) continue;
    if (is_true(member(events_[i], "flow_out"))) flows[*id].out.push_back(i);
    if (is_true(member(events_[i], "flow_in"))) flows[*id].in.push_back(i);
  }
  for (const auto& [id, ends] : flows) {
    const std::string flow = "flow bind_id " + std::to_string(id);
    if (ends.in.empty()) {
      for (std::size_t i : ends.out) add(i, flow + " has flow_out but no flow_in");
    }
    if (ends.out.empty()) {
      for (std::size_t i : ends.in) add(i, flow + " has flow_in but no flow_out");
    }
    for (std::size_t k = 1; k < ends.out.size(); ++k) {
      add(ends.out[k], flow + " already starts at " + short_name(ends.out[0]) +
                           "; Perfetto ignores a second start (flow_duplicate_id)");
    }
    for (std::size_t k = 1; k < ends.in.size(); ++k) {
      add(ends.in[k],
          flow + " already ends at " + short_name(ends.in[0]) + "; use one unique id per arrow");
    }
    if (ends.out.size() == 1 && ends.in.size() == 1) {
      const Event& source = info_[ends.out[0]];
      const Event& target = info_[ends.in[0]];
      if (source.ts && target.ts && *source.ts > *target.ts) {
        add(ends.out[0], flow + ": the source starts at " + microseconds(*source.ts) +
                             " µs, after its destination " + short_name(ends.in[0]) + " at " +
                             microseconds(*target.ts) + " µs");
      } else if (ends.in[0] < ends.out[0]) {
        // Perfetto's flow tracker sees events in timestamp order and, at equal timestamps, in
        // file order: an end before its start is dropped (stat flow_end_without_start).
        add(ends.in[0], flow + ": the destination comes before its source " +
                            short_name(ends.out[0]) +
                            " in the file; Perfetto drops an end it sees before the start "
                            "(flow_end_without_start)");
      }
    }
  }
}

/// The innermost slice on `row` that contains `ts`, or none.
std::optional<std::size_t> Checker::enclosing_slice(const Row& row, std::int64_t ts) const {
  const auto found = rows_.find(row);
  if (found == rows_.end()) return std::nullopt;
  const std::vector<Interval>& slices = found->second;
  auto after = std::upper_bound(slices.begin(), slices.end(), ts,
                                [](std::int64_t t, const Interval& s) { return t < s.start; });
  if (after == slices.begin()) return std::nullopt;
  // Walk up the nesting first (the usual case), then fall back to a scan for slices that
  // were spilled or closed exactly at ts.
  std::optional<std::size_t> k = static_cast<std::size_t>(after - slices.begin()) - 1;
  while (k && slices[*k].end < ts) k = slices[*k].parent;
  if (k) return slices[*k].index;
  for (auto it = after; it != slices.begin();) {
    --it;
    if (it->end >= ts) return it->index;
  }
  return std::nullopt;
}

/// v1 flows (s/t/f), keyed by id: one s and one f sharing cat and name, each inside a slice
/// of its row written before it (Perfetto's FlowTracker, §1.6).
void Checker::check_flows_v1() {
  std::map<std::string, std::vector<std::size_t>> flows;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const std::string& ph = info_[i].ph;
    if (ph != "s" && ph != "t" && ph != "f") continue;
    const Json* id = member(events_[i], "id");
    if (id == nullptr || !(id->is_number_integer() || id->is_string())) continue;
    flows[id->dump()].push_back(i);
    check_flow_binding(i);
  }
  for (const auto& [id, members] : flows) {
    const std::size_t first = members.front();
    std::vector<std::size_t> starts;
    std::vector<std::size_t> ends;
    for (std::size_t i : members) {
      if (info_[i].ph == "s") starts.push_back(i);
      if (info_[i].ph == "f") ends.push_back(i);
      if (i != first && (info_[i].cat != info_[first].cat || info_[i].name != info_[first].name)) {
        add(i, "flow id " + id + " has a different cat or name than " + short_name(first) +
                   "; Perfetto keys flows by (id, cat, name)");
      }
    }
    if (ends.empty()) {
      for (std::size_t i : starts) add(i, "flow id " + id + " starts but never ends (no f)");
    }
    if (starts.empty()) {
      for (std::size_t i : ends) add(i, "flow id " + id + " ends but never starts (no s)");
    }
    for (std::size_t k = 1; k < starts.size(); ++k) {
      add(starts[k], "flow id " + id + " already starts at " + short_name(starts[0]) +
                         "; flow ids must be unique in the file");
    }
    for (std::size_t k = 1; k < ends.size(); ++k) {
      add(ends[k], "flow id " + id + " already ends at " + short_name(ends[0]) +
                       "; flow ids must be unique in the file");
    }
  }
}

void Checker::check_flow_binding(std::size_t i) {
  const Event& e = info_[i];
  if (!e.pid || !e.tid || !e.ts) return;
  const std::optional<std::size_t> slice = enclosing_slice({*e.pid, *e.tid}, *e.ts);
  if (!slice) {
    add(i, "flow event at " + microseconds(*e.ts) + " µs is not inside a slice of its row");
  } else if (*slice > i) {
    add(i, "flow event comes before its slice " + short_name(*slice) +
               " in the file; Perfetto may lose it");
  }
}

/// A process or thread gets one name and one sort index.
void Checker::check_metadata_values() {
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::size_t> first;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = info_[i];
    if (e.ph != "M" || e.name == "process_labels" || !e.pid) continue;
    const bool thread = e.name.starts_with("thread_");
    if (thread && !e.tid) continue;
    const Json* args = member(events_[i], "args");
    if (args == nullptr) continue;
    const auto key = std::make_tuple(e.name, *e.pid, thread ? *e.tid : 0);
    const auto [it, inserted] = first.emplace(key, i);
    if (inserted) continue;
    const Json* before = member(events_[it->second], "args");
    if (*before != *args) {
      add(i, "sets " + e.name + " to " + args->dump() + ", already " + before->dump() + " at " +
                 short_name(it->second));
    }
  }
}

}  // namespace metron::traces::detail
