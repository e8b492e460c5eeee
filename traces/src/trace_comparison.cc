// Note [trace comparison] (trace_comparison.h).

#include "metron/traces/trace_comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "metron/base/error.h"
#include "metron/base/intervals.h"
#include "metron/base/json_parse.h"
#include "trace_values.h"

namespace metron::traces {
namespace {

using detail::Json;

Json parse(std::string_view text, const std::string& source) {
  const Json doc = parse_json_document<Json>(text, source);
  const Json* events = doc.is_object() ? detail::member(doc, "traceEvents") : nullptr;
  if (events == nullptr || !events->is_array()) {
    throw ParseError(source, 1, 1, "expected a Chrome trace (an object with traceEvents)");
  }
  return doc;
}

// What a step's slice may hold (Note [input limits] in models/limits.h, which this leaf module
// cannot include): a start within 2^60 ns (36 years) of the origin and a duration of 0 to a day,
// so that no end, sum or difference of them overflows int64.
constexpr std::int64_t kMaxStartNs = std::int64_t{1} << 60;
constexpr std::int64_t kMaxDurationNs = std::int64_t{86'400} * 1'000'000'000;

// Event `index`'s `key` (microseconds, as Chrome traces write them) in nanoseconds: 0 when
// absent, as Perfetto reads it; a value out of the range above is refused, naming the event.
std::int64_t slice_ns(const Json& event, const char* key, std::size_t index,
                      const std::string& source) {
  const Json* value = detail::member(event, key);
  if (value == nullptr || !value->is_number()) return 0;
  const std::int64_t ns = detail::nanoseconds(value).value_or(0);
  const bool is_duration = std::string_view(key) == "dur";
  const std::int64_t low = is_duration ? 0 : -kMaxStartNs;
  const std::int64_t high = is_duration ? kMaxDurationNs : kMaxStartNs;
  if (ns < low || ns > high) {
    throw InvalidConfig(fmt::format(
        "{}: traceEvents[{}] (\"{}\"): {} {} us is out of range; expected {} to {} us", source,
        index, detail::string_member(event, "name"), key, value->dump(), low / 1000, high / 1000));
  }
  return ns;
}

double error(double predicted, double measured) {
  return measured == 0 ? 0.0 : (predicted - measured) / measured;
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }

std::string percent(double e) { return fmt::format("{:+.1f}%", 100 * e); }

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
  return v[at];
}

}  // namespace

std::string task_kind(std::string_view name) {
  const std::string_view first = name.substr(0, name.find(' '));
  if (first.starts_with("SEND_")) return "send";
  if (first.starts_with("RECV_")) return "recv";
  if (first == "OPT") return "OPT";
  if (!first.empty() && std::string_view("FBIWR").find(first[0]) != std::string_view::npos &&
      first.size() > 1 && std::isdigit(static_cast<unsigned char>(first[1])) != 0) {
    return std::string(first.substr(0, 1));
  }
  for (const char* op :
       {"all-reduce", "reduce-scatter", "all-gather", "reduce", "broadcast", "all-to-all"}) {
    if (first == op) return op;
  }
  return "other";
}

TraceStep read_trace_step(std::string_view text, const std::string& source) {
  const Json doc = parse(text, source);
  TraceStep step;
  std::map<std::int64_t, std::vector<Interval>> compute;
  std::map<std::int64_t, std::vector<Interval>> comm;
  struct CommTask {
    std::int64_t pid = 0;
    std::int64_t instance = -1;  // args.comm_instance; -1 in a trace without it
    std::size_t task = 0;        // index into step.tasks
  };
  std::vector<CommTask> comm_tasks;
  std::map<std::int64_t, std::int64_t> rendezvous;  // by instance: the latest member start
  const Json& events = doc["traceEvents"];
  for (std::size_t index = 0; index < events.size(); ++index) {
    const Json& e = events[index];
    const std::string ph = detail::string_member(e, "ph");
    const std::optional<std::int64_t> pid = detail::integer(detail::member(e, "pid"));
    if (!pid) continue;
    const Json* args = detail::member(e, "args");
    if (ph == "C" && detail::string_member(e, "name") == "HBM" && args != nullptr) {
      const Json* bytes = detail::member(*args, "allocated_bytes");
      if (bytes != nullptr && bytes->is_number()) {
        double& peak = step.ranks[*pid].peak_memory_bytes;
        peak = std::max(peak, bytes->get<double>());
      }
      continue;
    }
    if (ph != "X") continue;
    const std::int64_t start = slice_ns(e, "ts", index, source);
    const std::int64_t end = start + slice_ns(e, "dur", index, source);
    const std::string cat = detail::string_member(e, "cat");
    const std::string name = detail::string_member(e, "name");
    if (cat == "bubble" && args != nullptr) {
      step.ranks[*pid].bubble_ns[detail::string_member(*args, "reason")] += end - start;
      continue;
    }
    const std::optional<std::int64_t> task =
        args != nullptr ? detail::integer(detail::member(*args, "task")) : std::nullopt;
    if (!task) continue;
    step.ranks[*pid];  // a rank with tasks has figures, if only zeros
    if (cat == "compute") compute[*pid].emplace_back(start, end);
    step.iteration_ns = std::max(step.iteration_ns, end);
    // A measured receive's nested "(data)" slice is part of its receive, not a task of its own.
    if (name.ends_with(" (data)")) continue;
    const std::optional<std::int64_t> instance =
        cat == "comm" ? detail::integer(detail::member(*args, "comm_instance")) : std::nullopt;
    if (cat == "comm") {
      comm_tasks.push_back({*pid, instance.value_or(-1), step.tasks.size()});
      if (instance) rendezvous[*instance] = std::max(rendezvous[*instance], start);
    }
    step.tasks.push_back({.task = *task,
                          .rank = *pid,
                          .name = name,
                          .kind = task_kind(name),
                          .start_ns = start,
                          .duration_ns = end - start});
  }
  // Communication counts from the rendezvous of its instance (Note [trace comparison]).
  for (const CommTask& c : comm_tasks) {
    TraceTask& t = step.tasks[c.task];
    const std::int64_t end = t.start_ns + t.duration_ns;
    if (c.instance >= 0) t.start_ns = std::max(t.start_ns, rendezvous[c.instance]);
    t.duration_ns = end - t.start_ns;
    comm[c.pid].emplace_back(t.start_ns, end);
  }
  if (step.tasks.empty()) {
    throw InvalidConfig(source +
                        ": no task slices (X events with args.task); expected a merged "
                        "trace of `metron simulate --trace` or `metron run --trace`");
  }
  for (auto& [pid, rank] : step.ranks) {
    const std::vector<Interval> busy = merged(compute[pid]);
    const std::vector<Interval> talking = merged(comm[pid]);
    rank.compute_ns = length(busy);
    rank.idle_ns = step.iteration_ns - rank.compute_ns;
    rank.comm_ns = length(talking);
    rank.comm_overlapped_ns = overlap(talking, busy);
    rank.comm_exposed_ns = rank.comm_ns - rank.comm_overlapped_ns;
  }
  return step;
}

std::string compare_trace_steps(const TraceStep& predicted, const TraceStep& measured,
                                std::int32_t top) {
  std::map<std::int64_t, const TraceTask*> by_id;
  for (const TraceTask& t : measured.tasks) by_id[t.task] = &t;
  struct Pair {
    const TraceTask* p;
    const TraceTask* m;
  };
  std::vector<Pair> pairs;
  for (const TraceTask& t : predicted.tasks) {
    const auto it = by_id.find(t.task);
    if (it != by_id.end()) pairs.push_back({&t, it->second});
  }
  if (pairs.empty()) {
    throw InvalidConfig(
        "the traces share no task id; expected two traces of one graph (the "
        "same scenario simulated and run)");
  }
  std::string out =
      fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "", "predicted", "measured", "error");
  const auto row = [&out](const std::string& what, double p, double m, const std::string& unit) {
    out += fmt::format("{:<28} {:>11.3f} {:>2} {:>11.3f} {:>2} {:>9}\n", what, p, unit, m, unit,
                       percent(error(p, m)));
  };
  row("iteration time", static_cast<double>(predicted.iteration_ns) / 1e6,
      static_cast<double>(measured.iteration_ns) / 1e6, "ms");
  for (const auto& [rank, p] : predicted.ranks) {
    const auto found = measured.ranks.find(rank);
    if (found == measured.ranks.end()) continue;
    const TraceRank& m = found->second;
    out += fmt::format("rank {}\n", rank);
    const auto ms_row = [&](const std::string& what, std::int64_t a, std::int64_t b) {
      row("  " + what, static_cast<double>(a) / 1e6, static_cast<double>(b) / 1e6, "ms");
    };
    ms_row("compute", p.compute_ns, m.compute_ns);
    ms_row("idle", p.idle_ns, m.idle_ns);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> bubbles;
    for (const auto& [reason, ns] : p.bubble_ns) bubbles[reason].first = ns;
    for (const auto& [reason, ns] : m.bubble_ns) bubbles[reason].second = ns;
    for (const auto& [reason, both] : bubbles) ms_row("bubble " + reason, both.first, both.second);
    ms_row("communication", p.comm_ns, m.comm_ns);
    ms_row("  exposed", p.comm_exposed_ns, m.comm_exposed_ns);
    ms_row("  overlapped", p.comm_overlapped_ns, m.comm_overlapped_ns);
    row("  peak memory", p.peak_memory_bytes / 1e6, m.peak_memory_bytes / 1e6, "MB");
  }
  std::map<std::string, std::vector<double>> by_kind;
  for (const Pair& pr : pairs) {
    by_kind[pr.p->kind].push_back(
        error(static_cast<double>(pr.p->duration_ns), static_cast<double>(pr.m->duration_ns)));
  }
  out += fmt::format("\nduration error by task kind   {:>6} {:>9} {:>9} {:>9}\n", "tasks", "p10",
                     "median", "p90");
  for (const auto& [kind, errors] : by_kind) {
    out += fmt::format("  {:<27} {:>6} {:>9} {:>9} {:>9}\n", kind, errors.size(),
                       percent(quantile(errors, 0.1)), percent(quantile(errors, 0.5)),
                       percent(quantile(errors, 0.9)));
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::llabs(a.p->duration_ns - a.m->duration_ns) >
           std::llabs(b.p->duration_ns - b.m->duration_ns);
  });
  out += fmt::format("\nthe {} tasks that differ most  {:>14} {:>14}\n",
                     std::min<std::size_t>(pairs.size(), static_cast<std::size_t>(top)),
                     "predicted ms", "measured ms");
  for (std::size_t i = 0; i < pairs.size() && std::cmp_less(i, top); ++i) {
    const Pair& pr = pairs[i];
    out += fmt::format("  rank {} task {:<6} {:<20} {:>11} {:>14}\n", pr.p->rank, pr.p->task,
                       pr.p->name.substr(0, 20), ms(pr.p->duration_ns), ms(pr.m->duration_ns));
  }
  return out;
}

std::string side_by_side_trace(std::string_view predicted_text, std::string_view measured_text) {
  const Json predicted = parse(predicted_text, "the predicted trace");
  const Json measured = parse(measured_text, "the measured trace");
  // Flow ids of the measured trace move past the predicted one's, so that no arrow joins them.
  std::int64_t flow_offset = 1;
  for (const Json& e : predicted["traceEvents"]) {
    if (const auto id = detail::integer(detail::member(e, "bind_id"))) {
      flow_offset = std::max(flow_offset, *id + 1);
    }
  }
  Json out = Json::object();
  out["displayTimeUnit"] = "ns";  // metadata before traceEvents (docs/TRACES.md §4.4)
  out["traceEvents"] = Json::array();
  const auto add = [&](const Json& doc, std::int64_t side, const char* label) {
    std::size_t next = 0;
    for (Json e : doc["traceEvents"]) {
      const std::size_t index = next++;
      const auto pid = detail::integer(detail::member(e, "pid"));
      if (pid) e["pid"] = 2 * *pid + side;
      if (side == 1) {
        if (const auto id = detail::integer(detail::member(e, "bind_id"))) {
          e["bind_id"] = *id + flow_offset;
        }
      }
      if (detail::string_member(e, "ph") == "M" && pid) {
        const std::string name = detail::string_member(e, "name");
        if (name == "process_name" || name == "process_sort_index") {
          Json& args = e["args"];  // absent: made here
          if (!args.is_null() && !args.is_object()) {
            throw InvalidConfig(fmt::format(
                "the {} trace: traceEvents[{}] (M \"{}\", pid {}): args is of type {}; expected "
                "an object",
                label, index, name, *pid, args.type_name()));
          }
          if (name == "process_name") args["name"] = fmt::format("rank {} {}", *pid, label);
          if (name == "process_sort_index") args["sort_index"] = 2 * *pid + side;
        }
      }
      // A global instant (the step's end) is kept once, from the prediction.
      if (side == 1 && detail::string_member(e, "ph") == "i" &&
          detail::string_member(e, "s") == "g") {
        continue;
      }
      out["traceEvents"].push_back(std::move(e));
    }
  };
  add(predicted, 0, "predicted");
  add(measured, 1, "measured");
  return out.dump() + "\n";
}

}  // namespace metron::traces
