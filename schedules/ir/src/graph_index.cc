// Indexes of a validated graph: stream FIFOs, hardware-queue order, dependents. Computed once at
// build() so the simulator's and the executor's inner loops only read arrays.

#include <utility>

#include "graph_impl.h"

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
  rows.items.resize(static_cast<std::size_t>(rows.offsets[n]));
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
  return g;
}

}  // namespace metron::ir
