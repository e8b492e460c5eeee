// Indexes of a validated graph: stream FIFOs, hardware-queue order, dependents, the flat arrays of
// FlatIndex. Computed once at build() so the simulator's and the executor's inner loops only read
// arrays.

#include <utility>
#include <variant>

#include "graph_impl.h"
#include "metron/base/huge_pages.h"

namespace metron::ir {
namespace {

void index_streams(Graph::Impl& g) {
  const auto& data = g.data;
  g.rank_streams.assign(data.ranks.size(), {});
  g.stream_queue.assign(data.streams.size(), 0);
  for (std::size_t s = 0; s < data.streams.size(); ++s) {
    auto& mine = g.rank_streams[data.streams[s].rank.index()];
    // Streams map to queues round-robin in creation order, as CUDA assigns connections.
    const auto queues = data.ranks[data.streams[s].rank.index()].hardware_queues;
    g.stream_queue[s] = static_cast<std::int32_t>(mine.size()) % queues;
    mine.push_back(StreamId{static_cast<std::int32_t>(s)});
  }
}

/// Stream FIFOs and hardware-queue predecessors, both following each rank's issue order.
void index_issue_order(Graph::Impl& g) {
  const auto& data = g.data;
  const std::size_t n = data.tasks.size();
  g.stream_pred.assign(n, TaskId{});
  g.stream_succ.assign(n, TaskId{});
  g.queue_pred.assign(n, TaskId{});
  g.queue_succ.assign(n, TaskId{});
  std::vector<std::vector<TaskId>> per_stream(data.streams.size());
  for (std::size_t r = 0; r < data.ranks.size(); ++r) {
    std::vector<TaskId> last_on_queue(static_cast<std::size_t>(data.ranks[r].hardware_queues));
    for (TaskId t : data.issue_order[r]) {
      const StreamId s = data.tasks[t.index()].stream;
      if (!s.valid()) continue;  // host waits run on no stream and no queue
      auto& fifo = per_stream[s.index()];
      if (!fifo.empty()) {
        g.stream_pred[t.index()] = fifo.back();
        g.stream_succ[fifo.back().index()] = t;
      }
      fifo.push_back(t);
      TaskId& last = last_on_queue[static_cast<std::size_t>(g.stream_queue[s.index()])];
      // Only a predecessor on another stream adds a constraint: the stream's own predecessor
      // must already have completed, hence started.
      if (last.valid() && data.tasks[last.index()].stream != s) {
        g.queue_pred[t.index()] = last;
        g.queue_succ[last.index()] = t;
      }
      last = t;
    }
  }
  for (const auto& fifo : per_stream) g.stream_tasks.add_row(fifo);
}

/// The arrays of FlatIndex, from the tasks and the indexes computed before.
void index_flat(Graph::Impl& g) {
  const auto& tasks = g.data.tasks;
  const auto offset = [](std::size_t n) { return static_cast<std::int32_t>(n); };
  g.task_facts.reserve(tasks.size());
  advise_huge_pages(g.task_facts.data(), tasks.size() * sizeof(TaskFacts));
  g.task_facts.resize(tasks.size());
  std::size_t num_effects = 0;
  for (const Task& task : tasks) num_effects += task.allocates.size() + task.uses.size();
  g.buffer_effects.reserve(num_effects);
  advise_huge_pages(g.buffer_effects.data(), num_effects * sizeof(BufferId));
  const std::size_t instances = g.comm_members.num_rows();
  g.comm_facts.reserve(instances);
  advise_huge_pages(g.comm_facts.data(), instances * sizeof(CommFacts));
  g.comm_facts.resize(instances);
  // The members move to huge pages too (validation built them): the simulator reads them for
  // every instance it starts.
  std::vector<TaskId> members;
  members.reserve(g.comm_members.items.size());
  advise_huge_pages(members.data(), g.comm_members.items.size() * sizeof(TaskId));
  members.assign(g.comm_members.items.begin(), g.comm_members.items.end());
  g.comm_members.items = std::move(members);
  for (std::size_t i = 0; i < g.comm_facts.size(); ++i) {
    g.comm_facts[i].members_begin = g.comm_members.offsets[i];
    g.comm_facts[i].members_end = g.comm_members.offsets[i + 1];
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& task = tasks[i];
    TaskFacts& f = g.task_facts[i];
    f.rank = task.rank;
    f.kind = task.kind();
    f.stream_successor = g.stream_succ[i];
    f.queue_successor = g.queue_succ[i];
    f.comm_instance = g.comm_instance[i];
    f.conditions = static_cast<std::int32_t>(task.deps.size());
    if (g.stream_pred[i].valid()) ++f.conditions;
    if (g.queue_pred[i].valid()) ++f.conditions;
    if (f.kind == TaskKind::kHostWait) ++f.conditions;
    f.dependents_begin = g.dependents.offsets[i];
    f.dependents_end = g.dependents.offsets[i + 1];
    f.allocates_begin = offset(g.buffer_effects.size());
    g.buffer_effects.insert(g.buffer_effects.end(), task.allocates.begin(), task.allocates.end());
    f.uses_begin = offset(g.buffer_effects.size());
    g.buffer_effects.insert(g.buffer_effects.end(), task.uses.begin(), task.uses.end());
    f.uses_end = offset(g.buffer_effects.size());
    if (f.comm_instance >= 0) {
      CommFacts& c = g.comm_facts[static_cast<std::size_t>(f.comm_instance)];
      if (const auto* s = std::get_if<Send>(&task.op)) {
        c.bytes = s->bytes;
      } else if (const auto* k = std::get_if<Collective>(&task.op)) {
        c.bytes = k->bytes;
        c.group = k->group;
      }
    }
  }
}

}  // namespace

// Counting sort into one array: a graph of a million tasks gets two allocations, not a million.
CompressedRows dependents_of(const GraphData& data, const std::vector<char>& usable) {
  const std::size_t n = data.tasks.size();
  const auto for_each_edge = [&](auto&& edge) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!usable[i]) continue;
      const TaskId self{static_cast<std::int32_t>(i)};
      for (TaskId d : data.tasks[i].deps) {
        if (usable[d.index()]) edge(d, self);
      }
      if (const auto* w = std::get_if<HostWait>(&data.tasks[i].op);
          w && usable[w->target.index()]) {
        edge(w->target, self);
      }
    }
  };
  CompressedRows rows;
  rows.offsets.assign(n + 1, 0);
  for_each_edge([&](TaskId from, TaskId) { ++rows.offsets[from.index() + 1]; });
  for (std::size_t i = 0; i < n; ++i) rows.offsets[i + 1] += rows.offsets[i];
  const auto num_edges = static_cast<std::size_t>(rows.offsets[n]);
  rows.items.reserve(num_edges);
  advise_huge_pages(rows.items.data(), num_edges * sizeof(TaskId));
  rows.items.resize(num_edges);
  std::vector<std::int32_t> fill(rows.offsets.begin(), rows.offsets.end() - 1);
  for_each_edge([&](TaskId from, TaskId to) {
    rows.items[static_cast<std::size_t>(fill[from.index()]++)] = to;
  });
  return rows;
}

Graph::Impl build_graph_index(GraphData data, Validation validation) {
  Graph::Impl g;
  g.data = std::move(data);
  g.issue_position = std::move(validation.issue_position);
  g.comm_instance = std::move(validation.comm_instance);
  g.comm_members = std::move(validation.comm_members);
  index_streams(g);
  index_issue_order(g);
  g.dependents = std::move(validation.dependents);
  index_flat(g);
  return g;
}

}  // namespace metron::ir
