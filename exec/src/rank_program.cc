#include "metron/exec/rank_program.h"

#include <algorithm>
#include <utility>
#include <variant>

namespace metron::exec {

RankProgram rank_program(const ir::Graph& graph, ir::RankId rank) {
  RankProgram program;
  program.rank = rank;
  program.hardware_queues = graph.rank(rank).hardware_queues;
  const std::span<const ir::StreamId> streams = graph.streams_of(rank);
  std::vector<std::int32_t> local_stream(graph.data().streams.size(), -1);
  for (std::size_t s = 0; s < streams.size(); ++s) {
    local_stream[streams[s].index()] = static_cast<std::int32_t>(s);
    program.stream_names.push_back(graph.stream(streams[s]).name);
  }

  const std::span<const ir::TaskId> order = graph.issue_order(rank);
  std::vector<std::int32_t> step_of(static_cast<std::size_t>(graph.num_tasks()), -1);
  program.steps.reserve(order.size());
  program.group_collectives.assign(graph.data().groups.size(), 0);
  program.buffer_users.assign(graph.data().buffers.size(), 0);
  // A group's collectives on this rank, as (seq, step), to number them in seq order.
  std::vector<std::vector<std::pair<std::int64_t, std::int32_t>>> by_group(
      graph.data().groups.size());

  for (const ir::TaskId id : order) {
    const ir::Task& task = graph.task(id);
    ProgramStep step;
    step.task = id;
    if (task.stream.valid()) step.stream = local_stream[task.stream.index()];
    for (const ir::TaskId d : task.deps) {
      if (graph.task(d).stream == task.stream) continue;  // the stream's FIFO orders them
      if (std::find(step.waits.begin(), step.waits.end(), d) == step.waits.end()) {
        step.waits.push_back(d);
      }
      program.steps[static_cast<std::size_t>(step_of[d.index()])].records_event = true;
    }
    if (const auto* wait = std::get_if<ir::HostWait>(&task.op)) {
      program.steps[static_cast<std::size_t>(step_of[wait->target.index()])].records_event = true;
    }
    if (const auto* c = std::get_if<ir::Collective>(&task.op)) {
      by_group[c->group.index()].emplace_back(c->seq,
                                              static_cast<std::int32_t>(program.steps.size()));
    }
    if (task.kind() == ir::TaskKind::kSend || task.kind() == ir::TaskKind::kRecv) {
      step.tag = graph.comm_instance(id);
    }
    for (const auto* list : {&task.allocates, &task.uses}) {
      for (const ir::BufferId b : *list) ++program.buffer_users[b.index()];
    }
    step_of[id.index()] = static_cast<std::int32_t>(program.steps.size());
    program.steps.push_back(std::move(step));
  }
  for (std::size_t g = 0; g < by_group.size(); ++g) {
    std::vector<std::pair<std::int64_t, std::int32_t>>& list = by_group[g];
    std::sort(list.begin(), list.end());
    for (std::size_t i = 0; i < list.size(); ++i) {
      program.steps[static_cast<std::size_t>(list[i].second)].ordinal =
          static_cast<std::int64_t>(i);
    }
    program.group_collectives[g] = static_cast<std::int64_t>(list.size());
  }
  return program;
}

}  // namespace metron::exec
