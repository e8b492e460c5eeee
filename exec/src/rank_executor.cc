#include "metron/exec/rank_executor.h"

#include <chrono>
#include <variant>

#include "metron/exec/steady_time.h"

namespace metron::exec {

using detail::now_ns;

RankExecutor::RankExecutor(const ir::Graph& graph, RankProgram program)
    : graph_(&graph), program_(std::move(program)) {
  launches_.reserve(program_.steps.size());
  for (const ProgramStep& step : program_.steps) {
    const ir::Task& task = graph.task(step.task);
    Launch launch;
    launch.id = step.task;
    launch.task = &task;
    launch.label = graph.describe(step.task);
    launch.ordinal = step.ordinal;
    launch.tag = step.tag;
    for (const ir::BufferId b : task.allocates) {
      launch.allocates.emplace_back(b, graph.buffer(b).bytes);
      launch.releases.push_back(b);
    }
    for (const ir::BufferId b : task.uses) launch.releases.push_back(b);
    launches_.push_back(std::move(launch));
  }
}

RankIteration RankExecutor::run(RankBackend& backend, std::int64_t iteration) {
  RankIteration out;
  out.issued.reserve(program_.steps.size());
  backend.begin_iteration(program_.buffer_users);
  // Events of this iteration by task id: -1 until recorded. Sized by the graph; cheap next to a
  // step's work, and each iteration needs fresh events (an event is recorded once).
  std::vector<RankBackend::Event> event_of(static_cast<std::size_t>(graph_->num_tasks()), -1);
  out.origin_ns = now_ns();
  origin_ns_ = out.origin_ns;
  for (std::size_t i = 0; i < program_.steps.size(); ++i) {
    const ProgramStep& step = program_.steps[i];
    out.issued.emplace_back(step.task, now_ns());
    const Launch& prototype = launches_[i];
    if (const auto* wait = std::get_if<ir::HostWait>(&prototype.task->op)) {
      backend.synchronize(event_of[wait->target.index()]);
      continue;
    }
    for (const ir::TaskId d : step.waits) backend.wait_event(step.stream, event_of[d.index()]);
    if (step.ordinal >= 0) {
      const auto* c = std::get_if<ir::Collective>(&prototype.task->op);
      Launch launch = prototype;
      launch.ordinal = step.ordinal + iteration * program_.group_collectives[c->group.index()];
      backend.launch(step.stream, launch);
    } else {
      backend.launch(step.stream, prototype);
    }
    if (step.records_event) {
      const RankBackend::Event event = backend.create_event();
      backend.record_event(step.stream, event);
      event_of[step.task.index()] = event;
    }
  }
  out.record = backend.end_iteration();
  return out;
}

}  // namespace metron::exec
