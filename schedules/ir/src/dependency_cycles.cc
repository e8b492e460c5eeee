// Cycle detection over same-rank dependencies. Kahn's algorithm peels off everything that can be
// ordered; Tarjan's algorithm then finds the strongly connected components among what is left,
// so each cycle is reported once with all its tasks, however many tasks hang below it.

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph_impl.h"

namespace metron::ir {
namespace {

using Adjacency = CompressedRows;

/// Marks the tasks Kahn's algorithm cannot order (members of cycles and what depends on them).
std::vector<char> unorderable(const Adjacency& edges) {
  const std::size_t n = edges.num_rows();
  std::vector<std::int32_t> indegree(n, 0);
  for (TaskId to : edges.items) ++indegree[to.index()];
  std::vector<std::int32_t> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push_back(static_cast<std::int32_t>(i));
  }
  std::vector<char> left(n, 1);
  while (!ready.empty()) {
    const auto node = static_cast<std::size_t>(ready.back());
    ready.pop_back();
    left[node] = 0;
    for (TaskId to : edges.row(node)) {
      if (--indegree[to.index()] == 0) ready.push_back(to.value());
    }
  }
  return left;
}

/// Iterative Tarjan restricted to `left`; returns components with more than one task.
std::vector<std::vector<std::int32_t>> cycles_among(const Adjacency& edges,
                                                    const std::vector<char>& left) {
  const std::size_t n = edges.num_rows();
  std::vector<std::int32_t> index(n, -1), low(n, 0);
  std::vector<char> on_stack(n, 0);
  std::vector<std::int32_t> stack;
  std::vector<std::vector<std::int32_t>> out;
  std::int32_t counter = 0;
  struct Frame {
    std::int32_t node;
    std::size_t next;
  };
  for (std::size_t root = 0; root < n; ++root) {
    if (!left[root] || index[root] >= 0) continue;
    std::vector<Frame> frames{{static_cast<std::int32_t>(root), 0}};
    index[root] = low[root] = counter++;
    stack.push_back(static_cast<std::int32_t>(root));
    on_stack[root] = 1;
    while (!frames.empty()) {
      Frame& f = frames.back();
      const auto v = static_cast<std::size_t>(f.node);
      if (const auto successors = edges.row(v); f.next < successors.size()) {
        const auto w = successors[f.next++].index();
        if (!left[w]) continue;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(static_cast<std::int32_t>(w));
          on_stack[w] = 1;
          frames.push_back({static_cast<std::int32_t>(w), 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        std::vector<std::int32_t> component;
        std::int32_t w = -1;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[static_cast<std::size_t>(w)] = 0;
          component.push_back(w);
        } while (w != f.node);
        if (component.size() > 1) out.push_back(std::move(component));
      }
      const auto finished = f.node;
      frames.pop_back();
      if (!frames.empty()) {
        auto& parent = low[static_cast<std::size_t>(frames.back().node)];
        parent = std::min(parent, low[static_cast<std::size_t>(finished)]);
      }
    }
  }
  return out;
}

}  // namespace

void check_dependency_cycles(const GraphData& data, const CompressedRows& edges,
                             std::vector<std::string>& problems) {
  for (auto& component : cycles_among(edges, unorderable(edges))) {
    std::sort(component.begin(), component.end());
    std::string list;
    for (auto t : component) {
      list += fmt::format("\n      {}", describe_task(data, TaskId{t}));
    }
    problems.push_back(fmt::format(
        "dependency cycle among {} tasks of rank {}; expected dependencies to form no cycle:{}",
        component.size(), data.tasks[static_cast<std::size_t>(component.front())].rank.value(),
        list));
  }
}

}  // namespace metron::ir
