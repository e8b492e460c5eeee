// The public entry points of the simulator: input checks, the run, and the derived figures.

#include "metron/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine.h"
#include "metron/models/limits.h"

namespace metron::sim {
namespace {

/// At most this many bad durations are named one by one; a whole wrong table would otherwise
/// print a line per task.
constexpr std::size_t kMaxNamedProblems = 10;

/// Note [input limits]: a makespan is at most the sum of every duration, each stretched by at
/// most 1 + the larger slow-down; refusing sums above the limit keeps every time the
/// engine computes inside int64 nanoseconds.
void check_total(std::span<const Time> durations, double slowdown) {
  const double limit = static_cast<double>(models::kMaxStepNanoseconds) / (1 + slowdown);
  double total = 0;
  for (const Time d : durations) total += static_cast<double>(d);
  if (total > limit) {
    throw InvalidConfig(fmt::format(
        "durations: their sum is {:.3g} ns; expected at most {:.3g} ns (2^60 ns divided by 1 + "
        "the larger slow-down during overlap, {}), the limit that keeps a step's times in int64 "
        "nanoseconds",
        total, limit, slowdown));
  }
}

void check_inputs(const ir::Graph& graph, std::span<const Time> durations,
                  const SimOptions& options) {
  if (durations.size() != static_cast<std::size_t>(graph.num_tasks())) {
    throw InvalidConfig(
        fmt::format("durations: {} entries for a graph of {} tasks; expected one "
                    "per task",
                    durations.size(), graph.num_tasks()));
  }
  for (const auto& [name, s] :
       {std::pair{"compute_slowdown_during_comm", options.compute_slowdown_during_comm},
        std::pair{"comm_slowdown_during_compute", options.comm_slowdown_during_compute}}) {
    if (!std::isfinite(s) || s < 0) {
      throw InvalidConfig(fmt::format("{}: {}; expected a finite number >= 0", name, s));
    }
  }
  std::vector<std::string> problems;
  std::size_t negative = 0;
  for (std::size_t i = 0; i < durations.size(); ++i) {
    if (durations[i] >= 0) continue;
    if (++negative <= kMaxNamedProblems) {
      problems.push_back(fmt::format("{}: duration {} ns; expected >= 0",
                                     graph.describe(ir::TaskId{static_cast<std::int32_t>(i)}),
                                     durations[i]));
    }
  }
  if (negative == 0) {
    check_total(durations, std::max(options.compute_slowdown_during_comm,
                                    options.comm_slowdown_during_compute));
    return;
  }
  if (negative > kMaxNamedProblems) {
    problems.push_back(fmt::format("... and {} more", negative - kMaxNamedProblems));
  }
  throw InvalidConfig(format_problem_list(
      fmt::format("durations: {} negative {}", negative, negative == 1 ? "entry" : "entries"),
      problems));
}

}  // namespace

Time from_seconds(double seconds) { return std::llround(seconds * 1e9); }
Time from_milliseconds(double milliseconds) { return std::llround(milliseconds * 1e6); }

std::string_view to_string(BubbleCause cause) noexcept {
  switch (cause) {
    case BubbleCause::kWarmup:
      return "warmup";
    case BubbleCause::kCooldown:
      return "cooldown";
    case BubbleCause::kWaitRecv:
      return "wait_recv";
    case BubbleCause::kWaitCollective:
      return "wait_collective";
    case BubbleCause::kOther:
      return "other";
  }
  return "other";
}

SimulationDeadlock::SimulationDeadlock(std::vector<std::string> blocked, SimResult partial)
    : Deadlock(std::move(blocked)), partial_(std::move(partial)) {}

SimResult simulate(const ir::Graph& graph, std::span<const Time> durations,
                   const SimOptions& options) {
  check_inputs(graph, durations, options);
  detail::Engine engine(graph, durations, options);
  if (!engine.run()) {
    std::vector<std::string> blocked = engine.describe_blocked();
    throw SimulationDeadlock(std::move(blocked), engine.take_result());
  }
  return engine.take_result();
}

double stage_span_bubble_rate(const ir::Graph& graph, const SimResult& result) {
  // Per rank: first compute start and last compute end; its compute time is compute_busy.
  const auto ranks = static_cast<std::size_t>(graph.num_ranks());
  std::vector<Time> first(ranks, -1);
  std::vector<Time> last(ranks, -1);
  const auto tasks = graph.tasks();
  for (std::size_t i = 0; i < tasks.size() && i < result.tasks.size(); ++i) {
    const TaskTiming& t = result.tasks[i];
    if (tasks[i].kind() != ir::TaskKind::kCompute || t.start < 0) continue;
    const std::size_t r = tasks[i].rank.index();
    first[r] = first[r] < 0 ? t.start : std::min(first[r], t.start);
    last[r] = std::max(last[r], t.end);
  }
  Time longest = 0;
  std::size_t which = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (first[r] >= 0 && last[r] - first[r] > longest) {
      longest = last[r] - first[r];
      which = r;
    }
  }
  if (longest == 0 || which >= result.ranks.size()) return 0.0;
  const Time busy = result.ranks[which].compute_busy;
  return static_cast<double>(longest - busy) / static_cast<double>(longest);
}

}  // namespace metron::sim
