// Structural validation of a graph: references, streams, groups, issue order, dependencies,
// cycles and buffers. Every problem is collected (docs/STYLE.md, Errors §4); a task whose
// references are broken is marked unusable so that later checks skip it instead of indexing out of
// range.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "graph_impl.h"

namespace metron::ir {
namespace {

template <class Id>
bool in_range(Id id, std::size_t size) {
  return id.valid() && id.index() < size;
}

class Checker {
 public:
  explicit Checker(const GraphData& data) : data_(data) {}

  Validation run() {
    check_ranks_streams_groups_buffers();
    usable_.assign(data_.tasks.size(), 1);
    ranks_.reserve(data_.tasks.size());
    for (const Task& t : data_.tasks) ranks_.push_back(t.rank);
    for (std::size_t i = 0; i < data_.tasks.size(); ++i) check_task_references(task_id(i));
    check_issue_order();
    check_dependency_order();
    check_cycles();
    check_buffer_allocation();
    match_communication(data_, usable_, v_);
    return std::move(v_);
  }

 private:
  static TaskId task_id(std::size_t i) { return TaskId{static_cast<std::int32_t>(i)}; }
  std::string describe(TaskId t) const { return describe_task(data_, t); }
  void problem(std::string text) { v_.problems.push_back(std::move(text)); }
  void bad_task(TaskId t, const std::string& what) {
    usable_[t.index()] = 0;
    problem(fmt::format("{}: {}", describe(t), what));
  }

  void check_ranks_streams_groups_buffers();
  void check_task_references(TaskId t);
  void check_kind_references(TaskId t, const Task& task);
  void check_issue_order();
  void check_dependency_order();
  void check_cycles();
  void check_buffer_allocation();

  const GraphData& data_;
  Validation v_;
  std::vector<char> usable_;
  /// Every task's rank, packed: the checks look up the ranks of dependencies and awaited tasks
  /// all over the task array, and a Task is ~250 bytes (a cache miss per lookup).
  std::vector<RankId> ranks_;
};

void Checker::check_ranks_streams_groups_buffers() {
  const std::size_t num_ranks = data_.ranks.size();
  for (std::size_t r = 0; r < num_ranks; ++r) {
    if (data_.ranks[r].hardware_queues < 1) {
      problem(fmt::format("rank {}: hardware_queues is {}; expected at least 1", r,
                          data_.ranks[r].hardware_queues));
    }
  }
  std::set<std::pair<std::int32_t, std::string>> stream_names;
  for (std::size_t s = 0; s < data_.streams.size(); ++s) {
    const Stream& st = data_.streams[s];
    if (!in_range(st.rank, num_ranks)) {
      problem(fmt::format("stream {} \"{}\": rank {} does not exist; expected 0..{}", s, st.name,
                          st.rank.value(), static_cast<long>(num_ranks) - 1));
    } else if (!stream_names.insert({st.rank.value(), st.name}).second) {
      problem(fmt::format("stream {}: rank {} already has a stream named \"{}\"", s,
                          st.rank.value(), st.name));
    }
    if (st.name.empty()) problem(fmt::format("stream {}: empty name; expected a name", s));
  }
  std::set<std::string> group_names;
  for (std::size_t g = 0; g < data_.groups.size(); ++g) {
    const Group& grp = data_.groups[g];
    if (grp.name.empty()) problem(fmt::format("group {}: empty name; expected a name", g));
    if (!group_names.insert(grp.name).second) {
      problem(fmt::format("group {}: another group is already named \"{}\"", g, grp.name));
    }
    if (grp.ranks.empty())
      problem(fmt::format("group \"{}\": no ranks; expected at least one", grp.name));
    std::set<RankId> seen;
    for (RankId r : grp.ranks) {
      if (!in_range(r, num_ranks)) {
        problem(fmt::format("group \"{}\": rank {} does not exist; expected 0..{}", grp.name,
                            r.value(), static_cast<long>(num_ranks) - 1));
      } else if (!seen.insert(r).second) {
        problem(fmt::format("group \"{}\": rank {} is listed twice", grp.name, r.value()));
      }
    }
  }
  for (std::size_t b = 0; b < data_.buffers.size(); ++b) {
    const Buffer& buf = data_.buffers[b];
    if (!in_range(buf.rank, num_ranks)) {
      problem(
          fmt::format("buffer {} \"{}\": rank {} does not exist", b, buf.name, buf.rank.value()));
    }
    if (buf.bytes < 0) {
      problem(fmt::format("buffer {} \"{}\": {} bytes; expected >= 0", b, buf.name, buf.bytes));
    }
  }
}

void Checker::check_task_references(TaskId t) {
  const Task& task = data_.tasks[t.index()];
  if (!in_range(task.rank, data_.ranks.size())) {
    return bad_task(t, fmt::format("rank {} does not exist; expected 0..{}", task.rank.value(),
                                   static_cast<long>(data_.ranks.size()) - 1));
  }
  if (task.kind() == TaskKind::kHostWait) {
    if (task.stream.valid()) bad_task(t, "a host wait runs on the host; expected no stream");
  } else if (!in_range(task.stream, data_.streams.size())) {
    bad_task(t, fmt::format("stream {} does not exist; expected one of rank {}'s streams",
                            task.stream.value(), task.rank.value()));
  } else if (data_.streams[task.stream.index()].rank != task.rank) {
    bad_task(t, fmt::format("is on stream \"{}\" of rank {}; expected a stream of rank {}",
                            data_.streams[task.stream.index()].name,
                            data_.streams[task.stream.index()].rank.value(), task.rank.value()));
  }
  for (TaskId d : task.deps) {
    if (!in_range(d, data_.tasks.size())) {
      bad_task(t, fmt::format("depends on task {}, which does not exist", d.value()));
    } else if (d == t) {
      bad_task(t, "depends on itself");
    } else if (ranks_[d.index()] != task.rank) {
      bad_task(t, fmt::format("depends on {}; dependencies cross ranks only through "
                              "communication tasks",
                              describe(d)));
    }
  }
  for (const auto* list : {&task.allocates, &task.uses}) {
    for (BufferId b : *list) {
      if (!in_range(b, data_.buffers.size())) {
        bad_task(t, fmt::format("uses buffer {}, which does not exist", b.value()));
      } else if (data_.buffers[b.index()].rank != task.rank) {
        bad_task(t,
                 fmt::format("uses buffer {} \"{}\" of rank {}; expected a buffer of its own rank",
                             b.value(), data_.buffers[b.index()].name,
                             data_.buffers[b.index()].rank.value()));
      }
    }
  }
  check_kind_references(t, task);
  // Tags are "none" (-1) or an index; anything else cannot be printed or stored faithfully.
  const std::pair<const char*, std::int32_t> tags[] = {{"stage", task.stage.value()},
                                                       {"chunk", task.chunk.value()},
                                                       {"microbatch", task.microbatch.value()},
                                                       {"bucket", task.bucket.value()}};
  for (const auto& [name, value] : tags) {
    if (value < -1) bad_task(t, fmt::format("{} {}; expected an index >= 0 or none", name, value));
  }
}

void Checker::check_kind_references(TaskId t, const Task& task) {
  const std::size_t num_ranks = data_.ranks.size();
  if (const auto* c = std::get_if<Collective>(&task.op)) {
    if (!in_range(c->group, data_.groups.size())) {
      return bad_task(t, fmt::format("group {} does not exist", c->group.value()));
    }
    const auto& members = data_.groups[c->group.index()].ranks;
    const auto is_member = [&](RankId r) {
      return std::find(members.begin(), members.end(), r) != members.end();
    };
    if (!is_member(task.rank)) {
      bad_task(t, fmt::format("rank {} is not a member of group \"{}\"", task.rank.value(),
                              data_.groups[c->group.index()].name));
    }
    const bool rooted = c->op == CollectiveOp::kReduce || c->op == CollectiveOp::kBroadcast;
    if (rooted && !is_member(c->root)) {
      bad_task(t, fmt::format("{} needs a root among the group's ranks; got rank {}",
                              to_string(c->op), c->root.value()));
    }
    if (c->bytes < 0) bad_task(t, fmt::format("{} bytes; expected >= 0", c->bytes));
    if (c->count < 1) bad_task(t, fmt::format("count {}; expected >= 1", c->count));
  } else if (const auto* s = std::get_if<Send>(&task.op)) {
    if (!in_range(s->peer, num_ranks))
      bad_task(t, "the peer rank does not exist");
    else if (s->peer == task.rank)
      bad_task(t, "sends to its own rank; expected another rank");
    if (s->bytes < 0) bad_task(t, fmt::format("{} bytes; expected >= 0", s->bytes));
  } else if (const auto* r = std::get_if<Recv>(&task.op)) {
    if (!in_range(r->peer, num_ranks))
      bad_task(t, "the peer rank does not exist");
    else if (r->peer == task.rank)
      bad_task(t, "receives from its own rank; expected another rank");
    if (r->bytes < 0) bad_task(t, fmt::format("{} bytes; expected >= 0", r->bytes));
  } else if (const auto* w = std::get_if<HostWait>(&task.op)) {
    if (!in_range(w->target, data_.tasks.size()))
      bad_task(t, "the awaited task does not exist");
    else if (w->target == t)
      bad_task(t, "waits for itself");
    else if (ranks_[w->target.index()] != task.rank) {
      bad_task(t, fmt::format("waits for {}; a host waits only for its own rank's tasks",
                              describe(w->target)));
    }
  } else if (const auto* c2 = std::get_if<Compute>(&task.op)) {
    // `!(x >= 0)` also catches NaN; infinity is no amount of work either.
    const auto finite_amount = [](double x) { return x >= 0 && std::isfinite(x); };
    if (!finite_amount(c2->flops) || !finite_amount(c2->bytes_moved)) {
      bad_task(t, fmt::format("work of {} flops and {} bytes; expected finite amounts >= 0",
                              c2->flops, c2->bytes_moved));
    }
    for (std::size_t i = 0; i < c2->operations.size(); ++i) {
      const Operation& o = c2->operations[i];
      if (o.m < 0 || o.n < 0 || o.k < 0 || o.bytes < 0 || o.batch < 1 || o.count < 1) {
        bad_task(t, fmt::format("operation {} (\"{}\"): m {}, n {}, k {}, batch {}, bytes {}, "
                                "count {}; expected sizes >= 0, batch and count >= 1",
                                i, o.name, o.m, o.n, o.k, o.batch, o.bytes, o.count));
      }
    }
  }
}

void Checker::check_issue_order() {
  v_.issue_position.assign(data_.tasks.size(), -1);
  if (data_.issue_order.size() != data_.ranks.size()) {
    problem(fmt::format("issue order lists {} ranks; expected one list per rank ({})",
                        data_.issue_order.size(), data_.ranks.size()));
  }
  const std::size_t lists = std::min(data_.issue_order.size(), data_.ranks.size());
  for (std::size_t r = 0; r < lists; ++r) {
    const auto& order = data_.issue_order[r];
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      const TaskId t = order[pos];
      if (!in_range(t, data_.tasks.size())) {
        problem(fmt::format("issue order of rank {}: task {} does not exist", r, t.value()));
      } else if (ranks_[t.index()].value() != static_cast<std::int32_t>(r)) {
        problem(fmt::format("issue order of rank {}: lists {}, which belongs to another rank", r,
                            describe(t)));
      } else if (v_.issue_position[t.index()] >= 0) {
        problem(fmt::format("issue order of rank {}: lists {} twice", r, describe(t)));
      } else {
        v_.issue_position[t.index()] = static_cast<std::int32_t>(pos);
      }
    }
  }
  for (std::size_t i = 0; i < data_.tasks.size(); ++i) {
    if (v_.issue_position[i] < 0 && in_range(ranks_[i], lists)) {
      usable_[i] = 0;
      problem(fmt::format("{}: missing from the issue order of rank {}", describe(task_id(i)),
                          data_.tasks[i].rank.value()));
    } else if (v_.issue_position[i] < 0) {
      usable_[i] = 0;
    }
  }
}

// A stream can wait only for an event that was recorded before the wait is issued, and a host
// that waits for a task it has not issued yet never issues it: both point backwards in issue order.
void Checker::check_dependency_order() {
  for (std::size_t i = 0; i < data_.tasks.size(); ++i) {
    if (!usable_[i]) continue;
    const Task& task = data_.tasks[i];
    const auto later = [&](TaskId d) {
      return usable_[d.index()] && v_.issue_position[d.index()] > v_.issue_position[i];
    };
    for (TaskId d : task.deps) {
      if (later(d)) {
        problem(
            fmt::format("{}: depends on {}, which rank {} issues after it; a dependency must "
                        "be issued first",
                        describe(task_id(i)), describe(d), task.rank.value()));
      }
    }
    if (const auto* w = std::get_if<HostWait>(&task.op); w != nullptr && later(w->target)) {
      problem(
          fmt::format("{}: waits for {}, which is issued after the wait; the host would never "
                      "issue it",
                      describe(task_id(i)), describe(w->target)));
    }
  }
}

void Checker::check_buffer_allocation() {
  std::vector<std::vector<TaskId>> allocators(data_.buffers.size());
  for (std::size_t i = 0; i < data_.tasks.size(); ++i) {
    for (BufferId b : data_.tasks[i].allocates) {
      if (in_range(b, data_.buffers.size())) allocators[b.index()].push_back(task_id(i));
    }
  }
  for (std::size_t b = 0; b < allocators.size(); ++b) {
    const auto& who = allocators[b];
    if (who.size() == 1) continue;
    std::string list;
    for (TaskId t : who) list += (list.empty() ? "" : "; ") + describe(t);
    problem(
        who.empty()
            ? fmt::format("buffer {} \"{}\" of rank {} is never allocated; expected exactly one "
                          "task that allocates it",
                          b, data_.buffers[b].name, data_.buffers[b].rank.value())
            : fmt::format("buffer {} \"{}\" is allocated {} times; expected once: {}", b,
                          data_.buffers[b].name, who.size(), list));
  }
}

void Checker::check_cycles() {
  v_.dependents = dependents_of(data_, usable_);
  check_dependency_cycles(data_, v_.dependents, v_.problems);
}

}  // namespace

Validation validate_graph(const GraphData& data) { return Checker(data).run(); }

}  // namespace metron::ir
