// Accessors of the immutable Graph. Ids handed in by callers are checked: an id from another graph
// is a programming error, reported as InternalError rather than undefined behaviour.

#include "metron/ir/graph.h"

#include <string>

#include "graph_impl.h"
#include "metron/base/error.h"

namespace metron::ir {
namespace {

template <class Id>
std::size_t checked(Id id, std::size_t size, const char* what) {
  METRON_ASSERT(id.valid() && id.index() < size,
                std::string(what) + " id " + std::to_string(id.value()) + " out of range");
  return id.index();
}

}  // namespace

const GraphData& Graph::data() const noexcept { return impl_->data; }
std::int32_t Graph::num_ranks() const noexcept {
  return static_cast<std::int32_t>(impl_->data.ranks.size());
}
std::int32_t Graph::num_tasks() const noexcept {
  return static_cast<std::int32_t>(impl_->data.tasks.size());
}
const Rank& Graph::rank(RankId id) const {
  return impl_->data.ranks[checked(id, impl_->data.ranks.size(), "rank")];
}
const Stream& Graph::stream(StreamId id) const {
  return impl_->data.streams[checked(id, impl_->data.streams.size(), "stream")];
}
const Group& Graph::group(GroupId id) const {
  return impl_->data.groups[checked(id, impl_->data.groups.size(), "group")];
}
const Buffer& Graph::buffer(BufferId id) const {
  return impl_->data.buffers[checked(id, impl_->data.buffers.size(), "buffer")];
}
const Task& Graph::task(TaskId id) const {
  return impl_->data.tasks[checked(id, impl_->data.tasks.size(), "task")];
}
std::span<const Task> Graph::tasks() const noexcept { return impl_->data.tasks; }
std::span<const TaskId> Graph::issue_order(RankId rank) const {
  return impl_->data.issue_order[checked(rank, impl_->data.ranks.size(), "rank")];
}
std::span<const StreamId> Graph::streams_of(RankId rank) const {
  return impl_->rank_streams[checked(rank, impl_->data.ranks.size(), "rank")];
}

std::optional<StreamId> Graph::find_stream(RankId rank, std::string_view name) const {
  for (StreamId s : streams_of(rank)) {
    if (impl_->data.streams[s.index()].name == name) return s;
  }
  return std::nullopt;
}

std::optional<GroupId> Graph::find_group(std::string_view name) const {
  for (std::size_t i = 0; i < impl_->data.groups.size(); ++i) {
    if (impl_->data.groups[i].name == name) return GroupId{static_cast<std::int32_t>(i)};
  }
  return std::nullopt;
}

std::int32_t Graph::issue_position(TaskId id) const {
  return impl_->issue_position[checked(id, impl_->data.tasks.size(), "task")];
}
std::span<const TaskId> Graph::stream_tasks(StreamId id) const {
  return impl_->stream_tasks.row(checked(id, impl_->data.streams.size(), "stream"));
}
TaskId Graph::stream_predecessor(TaskId id) const {
  return impl_->stream_pred[checked(id, impl_->data.tasks.size(), "task")];
}
TaskId Graph::stream_successor(TaskId id) const {
  return impl_->stream_succ[checked(id, impl_->data.tasks.size(), "task")];
}
TaskId Graph::queue_predecessor(TaskId id) const {
  return impl_->queue_pred[checked(id, impl_->data.tasks.size(), "task")];
}
TaskId Graph::queue_successor(TaskId id) const {
  return impl_->queue_succ[checked(id, impl_->data.tasks.size(), "task")];
}
std::span<const TaskId> Graph::dependents(TaskId id) const {
  return impl_->dependents.row(checked(id, impl_->data.tasks.size(), "task"));
}
std::int32_t Graph::queue_of(StreamId id) const {
  return impl_->stream_queue[checked(id, impl_->data.streams.size(), "stream")];
}
std::int32_t Graph::num_comm_instances() const noexcept {
  return static_cast<std::int32_t>(impl_->comm_members.num_rows());
}
std::int32_t Graph::comm_instance(TaskId id) const {
  return impl_->comm_instance[checked(id, impl_->data.tasks.size(), "task")];
}
std::span<const TaskId> Graph::comm_members(std::int32_t instance) const {
  METRON_ASSERT(instance >= 0 && instance < num_comm_instances(),
                "communication instance " + std::to_string(instance) + " out of range");
  return impl_->comm_members.row(static_cast<std::size_t>(instance));
}

FlatIndex Graph::flat_index() const noexcept {
  return {.tasks = impl_->task_facts,
          .dependents = impl_->dependents.items,
          .buffer_effects = impl_->buffer_effects,
          .instances = impl_->comm_facts,
          .comm_members = impl_->comm_members.items};
}

}  // namespace metron::ir
