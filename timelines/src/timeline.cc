#include "metron/timelines/timeline.h"

#include <algorithm>
#include <string>
#include <variant>

#include "layout_common.h"
#include "metron/base/error.h"

namespace metron::timelines {
namespace {

void check_size(std::vector<std::string>& problems, const char* what, std::size_t size,
                std::size_t expected, bool may_be_empty) {
  if (size == expected || (may_be_empty && size == 0)) return;
  problems.push_back(std::string(what) + " has " + std::to_string(size) + " entries, expected " +
                     std::to_string(expected) + (may_be_empty ? " (or none)" : ""));
}

}  // namespace

WorldLayout graph_world_layout(const ir::Graph& graph) {
  WorldLayout layout;
  layout.world_size = graph.num_ranks();
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    layout.world_rank.push_back(r);
    layout.local_device.push_back(r % kDevicesPerNode);
  }
  const std::vector<ir::Group>& groups = graph.data().groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    GroupNaming naming{.pg_name = std::to_string(g + 1), .description = groups[g].name};
    for (ir::RankId m : groups[g].ranks) naming.world_ranks.push_back(m.value());
    layout.groups.push_back(std::move(naming));
  }
  // pg_name "0" is the default (world) group's, as PyTorch numbers process groups.
  return layout;
}

void check_inputs(const ir::Graph& graph, const Timeline& timeline, const WorldLayout& layout) {
  std::vector<std::string> problems;
  const auto ranks = static_cast<std::size_t>(graph.num_ranks());
  const auto tasks = static_cast<std::size_t>(graph.num_tasks());
  check_size(problems, "timeline.tasks", timeline.tasks.size(), tasks, false);
  check_size(problems, "timeline.issue_ns", timeline.issue_ns.size(), tasks, true);
  check_size(problems, "timeline.memory", timeline.memory.size(), ranks, true);
  check_size(problems, "timeline.static_memory_bytes", timeline.static_memory_bytes.size(), ranks,
             true);
  check_size(problems, "timeline.bubbles", timeline.bubbles.size(), ranks, true);
  check_size(problems, "layout.world_rank", layout.world_rank.size(), ranks, false);
  check_size(problems, "layout.local_device", layout.local_device.size(), ranks, false);
  check_size(problems, "layout.groups", layout.groups.size(), graph.data().groups.size(), false);
  check_size(problems, "layout.pipeline_groups", layout.pipeline_groups.size(), ranks, true);
  const auto in_world = [&](std::int64_t r) { return r >= 0 && r < layout.world_size; };
  for (std::size_t r = 0; r < layout.world_rank.size(); ++r) {
    if (!in_world(layout.world_rank[r])) {
      problems.push_back("layout.world_rank[" + std::to_string(r) +
                         "] = " + std::to_string(layout.world_rank[r]) +
                         " is outside [0, world_size " + std::to_string(layout.world_size) + ")");
    }
  }
  for (std::size_t r = 0; r < layout.local_device.size(); ++r) {
    if (layout.local_device[r] < 0) {
      problems.push_back("layout.local_device[" + std::to_string(r) + "] is negative");
    }
  }
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    for (std::int64_t m : layout.groups[g].world_ranks) {
      if (!in_world(m)) {
        problems.push_back("layout.groups[" + std::to_string(g) + "] names world rank " +
                           std::to_string(m) + ", outside [0, world_size)");
      }
    }
  }
  if (problems.empty()) return;
  std::string message = "trace layout inputs do not fit the graph:";
  for (const std::string& p : problems) message += "\n  " + p;
  throw InvalidConfig(message);
}

std::vector<std::int64_t> issue_times(const ir::Graph& graph, const Timeline& timeline) {
  if (!timeline.issue_ns.empty()) return timeline.issue_ns;
  std::vector<std::int64_t> issue(static_cast<std::size_t>(graph.num_tasks()), -1);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    std::int64_t now = 0;
    for (ir::TaskId id : graph.issue_order(ir::RankId{r})) {
      issue[id.index()] = now;
      if (now < 0 || graph.task(id).kind() != ir::TaskKind::kHostWait) continue;
      // The host stays blocked here until the wait ends; one that never ended blocks for good.
      const TaskSpan& wait = timeline.tasks[id.index()];
      now = wait.end_ns < 0 ? -1 : std::max(now, wait.end_ns);
    }
  }
  return issue;
}

}  // namespace metron::timelines
