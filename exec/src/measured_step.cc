#include "metron/exec/measured_step.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "metron/base/error.h"

namespace metron::exec {
namespace {

// The latest task end of a rank's iteration, from `origin`.
std::int64_t rank_span(const RankIteration& it, std::int64_t origin) {
  std::int64_t end = 0;
  for (const LaunchTiming& t : it.record.launches) end = std::max(end, t.end_ns - origin);
  return end;
}

}  // namespace

MeasuredStep measured_step(const ir::Graph& graph,
                           const std::vector<std::vector<RankIteration>>& iterations,
                           bool shared_clock) {
  METRON_ASSERT(std::ssize(iterations) == graph.num_ranks() && !iterations.empty() &&
                    !iterations.front().empty(),
                "measured step: expected the iterations of every rank");
  const std::size_t count = iterations.front().size();
  // origins[i][r]: where rank r's times of iteration i count from (Note [measured step]).
  std::vector<std::vector<std::int64_t>> origins(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t earliest = INT64_MAX;
    for (const std::vector<RankIteration>& rank : iterations) {
      METRON_ASSERT(rank.size() == count, "measured step: ranks ran different iteration counts");
      earliest = std::min(earliest, rank[i].origin_ns);
    }
    for (const std::vector<RankIteration>& rank : iterations) {
      origins[i].push_back(shared_clock ? earliest : rank[i].origin_ns);
    }
  }
  MeasuredStep out;
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t span = 0;
    for (std::size_t r = 0; r < iterations.size(); ++r) {
      span = std::max(span, rank_span(iterations[r][i], origins[i][r]));
    }
    out.iteration_ns.push_back(span);
  }
  std::vector<std::int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return out.iteration_ns[static_cast<std::size_t>(a)] <
           out.iteration_ns[static_cast<std::size_t>(b)];
  });
  out.median_iteration = order[(count - 1) / 2];

  timelines::Timeline& timeline = out.timeline;
  const auto tasks = static_cast<std::size_t>(graph.num_tasks());
  timeline.tasks.assign(tasks, {});
  timeline.issue_ns.assign(tasks, -1);
  timeline.step_end_ns = out.iteration_ns[static_cast<std::size_t>(out.median_iteration)];
  timeline.memory.resize(iterations.size());
  const auto median = static_cast<std::size_t>(out.median_iteration);
  for (std::size_t r = 0; r < iterations.size(); ++r) {
    const RankIteration& it = iterations[r][median];
    const std::int64_t origin = origins[median][r];
    for (const LaunchTiming& t : it.record.launches) {
      METRON_ASSERT(t.id.valid() && t.id.index() < tasks, "measured step: a task out of range");
      timeline.tasks[t.id.index()] = {t.start_ns - origin, t.end_ns - origin};
    }
    for (const auto& [task, at] : it.issued) {
      METRON_ASSERT(task.valid() && task.index() < tasks, "measured step: a task out of range");
      timeline.issue_ns[task.index()] = at - origin;
    }
    for (const auto& [at, bytes] : it.record.memory) {
      timeline.memory[r].emplace_back(std::max<std::int64_t>(0, at - origin), bytes);
    }
    out.peak_memory_bytes.push_back(it.record.peak_memory_bytes);
    // A HostWait is not launched: it holds the host from its issue until the host goes on, which
    // is the next task's issue (or the end of the iteration).
    for (std::size_t k = 0; k < it.issued.size(); ++k) {
      const ir::TaskId id = it.issued[k].first;
      if (graph.task(id).kind() != ir::TaskKind::kHostWait) continue;
      const std::int64_t start = it.issued[k].second - origin;
      const std::int64_t end = k + 1 < it.issued.size() ? it.issued[k + 1].second - origin
                                                        : std::max(start, rank_span(it, origin));
      timeline.tasks[id.index()] = {start, end};
    }
  }
  return out;
}

std::string encode_iterations(const std::vector<RankIteration>& iterations) {
  std::ostringstream out;
  out << "metron-iterations 1 " << iterations.size() << '\n';
  for (const RankIteration& it : iterations) {
    out << it.origin_ns << ' ' << it.record.peak_memory_bytes << ' ' << it.issued.size() << ' '
        << it.record.launches.size() << ' ' << it.record.memory.size() << '\n';
    for (const auto& [task, at] : it.issued) out << task.value() << ' ' << at << '\n';
    for (const LaunchTiming& t : it.record.launches) {
      out << t.id.value() << ' ' << t.start_ns << ' ' << t.end_ns << '\n';
    }
    for (const auto& [at, bytes] : it.record.memory) out << at << ' ' << bytes << '\n';
  }
  return out.str();
}

std::vector<RankIteration> decode_iterations(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  int version = 0;
  std::size_t count = 0;
  const auto fail = [] {
    throw BackendError("executor: a rank's measurements arrived garbled at rank 0");
  };
  if (!(in >> magic >> version >> count) || magic != "metron-iterations" || version != 1) fail();
  std::vector<RankIteration> out(count);
  for (RankIteration& it : out) {
    std::size_t issued = 0;
    std::size_t launches = 0;
    std::size_t memory = 0;
    if (!(in >> it.origin_ns >> it.record.peak_memory_bytes >> issued >> launches >> memory)) {
      fail();
    }
    for (std::size_t i = 0; i < issued; ++i) {
      std::int32_t task = 0;
      std::int64_t at = 0;
      if (!(in >> task >> at)) fail();
      it.issued.emplace_back(ir::TaskId{task}, at);
    }
    for (std::size_t i = 0; i < launches; ++i) {
      LaunchTiming t;
      std::int32_t task = 0;
      if (!(in >> task >> t.start_ns >> t.end_ns)) fail();
      t.id = ir::TaskId{task};
      it.record.launches.push_back(t);
    }
    for (std::size_t i = 0; i < memory; ++i) {
      std::int64_t at = 0;
      std::int64_t bytes = 0;
      if (!(in >> at >> bytes)) fail();
      it.record.memory.emplace_back(at, bytes);
    }
  }
  return out;
}

}  // namespace metron::exec
