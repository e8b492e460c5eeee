#include "metron/ir/graph_builder.h"

#include <memory>
#include <utility>

#include "graph_impl.h"
#include "metron/base/error.h"

namespace metron::ir {

RankId GraphBuilder::add_rank(Rank rank) {
  data_.ranks.push_back(rank);
  data_.issue_order.emplace_back();
  return RankId{static_cast<std::int32_t>(data_.ranks.size() - 1)};
}

StreamId GraphBuilder::add_stream(RankId rank, std::string name) {
  data_.streams.push_back({rank, std::move(name)});
  return StreamId{static_cast<std::int32_t>(data_.streams.size() - 1)};
}

StreamId GraphBuilder::stream(RankId rank, const std::string& name) {
  // Index lazily, so streams from the constructor and from add_stream() are found alike; with
  // duplicate names (an invalid graph) the first stream wins, as the scan finds it first.
  for (; streams_indexed_ < data_.streams.size(); ++streams_indexed_) {
    const Stream& s = data_.streams[streams_indexed_];
    // Streams of a rank that is no index (invalid) are found by the scan below instead.
    if (s.rank.value() < 0) continue;
    if (streams_by_rank_.size() <= s.rank.index()) streams_by_rank_.resize(s.rank.index() + 1);
    streams_by_rank_[s.rank.index()].push_back(
        StreamId{static_cast<std::int32_t>(streams_indexed_)});
  }
  if (rank.value() < 0) {
    for (std::size_t i = 0; i < data_.streams.size(); ++i) {
      if (data_.streams[i].rank == rank && data_.streams[i].name == name) {
        return StreamId{static_cast<std::int32_t>(i)};
      }
    }
  } else if (rank.index() < streams_by_rank_.size()) {
    for (StreamId s : streams_by_rank_[rank.index()]) {
      if (data_.streams[s.index()].name == name) return s;
    }
  }
  return add_stream(rank, name);
}

GroupId GraphBuilder::add_group(std::string name, std::vector<RankId> ranks) {
  data_.groups.push_back({std::move(name), std::move(ranks)});
  return GroupId{static_cast<std::int32_t>(data_.groups.size() - 1)};
}

BufferId GraphBuilder::add_buffer(RankId rank, std::int64_t bytes, std::string name) {
  data_.buffers.push_back({rank, bytes, std::move(name)});
  return BufferId{static_cast<std::int32_t>(data_.buffers.size() - 1)};
}

TaskId GraphBuilder::add(Task&& task) {
  const TaskId id{static_cast<std::int32_t>(data_.tasks.size())};
  // A task of a rank that does not exist has no issue order to join; validation reports it.
  if (task.rank.valid() && task.rank.index() < data_.issue_order.size()) {
    data_.issue_order[task.rank.index()].push_back(id);
  }
  data_.tasks.push_back(std::move(task));
  return id;
}

void GraphBuilder::precede(TaskId before, TaskId after) { task(after).deps.push_back(before); }

void GraphBuilder::set_issue_order(RankId rank, std::vector<TaskId> order) {
  if (!rank.valid()) throw InvalidConfig("set_issue_order: rank id is none; expected a rank");
  if (rank.index() >= data_.issue_order.size()) data_.issue_order.resize(rank.index() + 1);
  data_.issue_order[rank.index()] = std::move(order);
}

Task& GraphBuilder::task(TaskId id) {
  if (!id.valid() || id.index() >= data_.tasks.size()) {
    throw InvalidConfig("graph builder: no task " + std::to_string(id.value()) + "; expected 0.." +
                        std::to_string(static_cast<long>(data_.tasks.size()) - 1));
  }
  return data_.tasks[id.index()];
}

Graph GraphBuilder::build() && {
  Validation validation = validate_graph(data_);
  if (!validation.problems.empty()) throw InvalidGraph(std::move(validation.problems));
  auto impl =
      std::make_shared<Graph::Impl>(build_graph_index(std::move(data_), std::move(validation)));
  data_ = {};
  streams_by_rank_.clear();
  streams_indexed_ = 0;
  return Graph(std::move(impl));
}

std::vector<std::string> find_problems(const GraphData& data) {
  return validate_graph(data).problems;
}

}  // namespace metron::ir
