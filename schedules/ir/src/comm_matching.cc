// Matching of communication tasks across ranks: each send with exactly one receive (by sender,
// receiver and tag), and each collective (by group and sequence number) with one task on every
// member, all agreeing on op, bytes, dtype and root. Matched sets become the graph's
// communication instances, which the interpreters start together (rendezvous).

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "graph_impl.h"

namespace metron::ir {
namespace {

using P2PKey = std::tuple<std::int32_t, std::int32_t, std::int64_t>;  // sender, receiver, tag
using CollectiveKey = std::pair<std::int32_t, std::int64_t>;          // group, seq

// Ends are collected into flat vectors and sorted by key, so that matching a million transfers
// costs two sorts rather than a million small allocations; sorting by task id within a key keeps
// the reports in a deterministic order.
struct P2PEnd {
  P2PKey key;
  bool is_recv;
  TaskId task;
  // Written out field by field: std::tuple's synthesized <=> made this sort a quarter of
  // validation time.
  friend bool operator<(const P2PEnd& a, const P2PEnd& b) {
    const auto& [af, at, ag] = a.key;
    const auto& [bf, bt, bg] = b.key;
    if (af != bf) return af < bf;
    if (at != bt) return at < bt;
    if (ag != bg) return ag < bg;
    if (a.is_recv != b.is_recv) return b.is_recv;
    return a.task < b.task;
  }
};

struct CollectiveEnd {
  CollectiveKey key;
  TaskId task;
  friend bool operator<(const CollectiveEnd& a, const CollectiveEnd& b) {
    if (a.key.first != b.key.first) return a.key.first < b.key.first;
    if (a.key.second != b.key.second) return a.key.second < b.key.second;
    return a.task < b.task;
  }
};

/// Calls f(first, last) for each run of equal keys in a sorted vector.
template <class End, class F>
void for_each_run(const std::vector<End>& ends, F f) {
  for (std::size_t first = 0; first < ends.size();) {
    std::size_t last = first + 1;
    while (last < ends.size() && ends[last].key == ends[first].key) ++last;
    f(std::span<const End>(ends.data() + first, last - first));
    first = last;
  }
}

class Matcher {
 public:
  Matcher(const GraphData& data, const std::vector<char>& usable, Validation& v)
      : data_(data), usable_(usable), v_(v) {
    v_.comm_instance.assign(data.tasks.size(), -1);
  }

  void run() {
    collect();
    for_each_run(p2p_, [&](std::span<const P2PEnd> run) { match_pair(run); });
    for_each_run(collectives_, [&](std::span<const CollectiveEnd> run) { match_collective(run); });
    check_sequence_order();
  }

 private:
  std::string describe(TaskId t) const { return describe_task(data_, t); }
  std::string group_name(std::int32_t g) const {
    return data_.groups[static_cast<std::size_t>(g)].name;
  }
  void problem(std::string text) { v_.problems.push_back(std::move(text)); }

  void collect();
  void sort_collectives();
  void match_pair(std::span<const P2PEnd> run);
  void report_unmatched(std::span<const P2PEnd> run);
  void match_collective(std::span<const CollectiveEnd> run);
  bool members_agree(const CollectiveKey& key, const std::vector<TaskId>& by_member);
  std::string elsewhere(RankId rank, const CollectiveKey& key) const;
  void check_sequence_order();
  void add_instance(const std::vector<TaskId>& members);

  const GraphData& data_;
  const std::vector<char>& usable_;
  Validation& v_;
  std::vector<P2PEnd> p2p_;
  std::vector<CollectiveEnd> collectives_;
  std::vector<TaskId> by_member_;  // reused for every collective instance
};

void Matcher::collect() {
  for (std::size_t i = 0; i < data_.tasks.size(); ++i) {
    if (!usable_[i]) continue;
    const Task& t = data_.tasks[i];
    const TaskId id{static_cast<std::int32_t>(i)};
    if (const auto* s = std::get_if<Send>(&t.op)) {
      p2p_.push_back({{t.rank.value(), s->peer.value(), s->tag}, false, id});
    } else if (const auto* r = std::get_if<Recv>(&t.op)) {
      p2p_.push_back({{r->peer.value(), t.rank.value(), r->tag}, true, id});
    } else if (const auto* c = std::get_if<Collective>(&t.op)) {
      collectives_.push_back({{c->group.value(), c->seq}, id});
    }
  }
  std::sort(p2p_.begin(), p2p_.end());
  sort_collectives();
}

// The order std::sort by (group, seq, task) gives, cheaper: a counting sort by group keeps task
// order within each group, where passes mostly number seqs increasingly already, so most groups
// need no sort at all.
void Matcher::sort_collectives() {
  // Usable tasks have groups in range; checked anyway, as a bad id would overrun the buckets.
  const std::size_t groups = data_.groups.size();
  const bool in_range = std::all_of(collectives_.begin(), collectives_.end(), [&](const auto& e) {
    return e.key.first >= 0 && static_cast<std::size_t>(e.key.first) < groups;
  });
  if (!in_range) {
    std::sort(collectives_.begin(), collectives_.end());
    return;
  }
  std::vector<std::size_t> start(groups + 1, 0);
  for (const CollectiveEnd& e : collectives_) ++start[static_cast<std::size_t>(e.key.first) + 1];
  for (std::size_t g = 0; g < groups; ++g) start[g + 1] += start[g];
  std::vector<CollectiveEnd> sorted(collectives_.size());
  std::vector<std::size_t> fill(start.begin(), start.end() - 1);
  for (const CollectiveEnd& e : collectives_)
    sorted[fill[static_cast<std::size_t>(e.key.first)]++] = e;
  for (std::size_t g = 0; g < groups; ++g) {
    const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(start[g]);
    const auto last = sorted.begin() + static_cast<std::ptrdiff_t>(start[g + 1]);
    if (!std::is_sorted(first, last)) std::sort(first, last);
  }
  collectives_ = std::move(sorted);
}

void Matcher::match_pair(std::span<const P2PEnd> run) {
  // Sorted: sends (is_recv false) come before receives.
  if (run.size() != 2 || run[0].is_recv || !run[1].is_recv) return report_unmatched(run);
  const TaskId send_id = run[0].task;
  const TaskId recv_id = run[1].task;
  const auto& send = std::get<Send>(data_.tasks[send_id.index()].op);
  const auto& recv = std::get<Recv>(data_.tasks[recv_id.index()].op);
  if (send.bytes != recv.bytes || send.what != recv.what) {
    return problem(
        fmt::format("send and receive disagree: {} sends {} {} bytes but {} expects {} {} bytes",
                    describe(send_id), send.bytes, to_string(send.what), describe(recv_id),
                    recv.bytes, to_string(recv.what)));
  }
  add_instance({send_id, recv_id});
}

void Matcher::report_unmatched(std::span<const P2PEnd> run) {
  const auto [from, to, tag] = run.front().key;
  const auto recvs = static_cast<std::size_t>(
      std::count_if(run.begin(), run.end(), [](const P2PEnd& e) { return e.is_recv; }));
  const std::size_t sends = run.size() - recvs;
  if (recvs == 0 || sends == 0) {
    for (const P2PEnd& end : run) {
      problem(end.is_recv
                  ? fmt::format("unmatched receive: {}; expected a send on rank {} to rank {} "
                                "with tag {}",
                                describe(end.task), from, to, tag)
                  : fmt::format("unmatched send: {}; expected a receive on rank {} from rank {} "
                                "with tag {}",
                                describe(end.task), to, from, tag));
    }
    return;
  }
  std::string list;
  for (const P2PEnd& end : run) list += "\n      " + describe(end.task);
  problem(
      fmt::format("{} sends and {} receives share rank {} -> rank {} tag {}; expected "
                  "exactly one of each:{}",
                  sends, recvs, from, to, tag, list));
}

void Matcher::match_collective(std::span<const CollectiveEnd> run) {
  const CollectiveKey& key = run.front().key;
  const auto& members = data_.groups[static_cast<std::size_t>(key.first)].ranks;
  auto& by_member = by_member_;
  by_member.assign(members.size(), TaskId{});
  bool complete = true;
  for (const CollectiveEnd& end : run) {
    const TaskId t = end.task;
    const auto pos = static_cast<std::size_t>(
        std::find(members.begin(), members.end(), data_.tasks[t.index()].rank) - members.begin());
    if (by_member[pos].valid()) {
      complete = false;
      problem(fmt::format("rank {} issues seq {} on group \"{}\" twice: {} and {}; expected once",
                          members[pos].value(), key.second, group_name(key.first),
                          describe(by_member[pos]), describe(t)));
    } else {
      by_member[pos] = t;
    }
  }
  for (std::size_t m = 0; m < members.size(); ++m) {
    if (by_member[m].valid()) continue;
    complete = false;
    problem(
        fmt::format("unmatched collective: {}; rank {} never issues seq {} on group \"{}\"; "
                    "expected every member of the group to{}",
                    describe(run.front().task), members[m].value(), key.second,
                    group_name(key.first), elsewhere(members[m], key)));
  }
  if (complete && members_agree(key, by_member)) add_instance(by_member);
}

// When a member lacks (group, seq) but issues that seq on another group, the likely mistake is
// that the members disagree on the group: say so.
std::string Matcher::elsewhere(RankId rank, const CollectiveKey& key) const {
  std::string out;
  for (const CollectiveEnd& end : collectives_) {
    const auto& [group, seq] = end.key;
    const TaskId t = end.task;
    if (seq != key.second || group == key.first || data_.tasks[t.index()].rank != rank) continue;
    out += fmt::format(
        "; members disagree on the group: rank {} issues seq {} on group \"{}\" instead ({})",
        rank.value(), key.second, group_name(group), describe(t));
  }
  return out;
}

bool Matcher::members_agree(const CollectiveKey& key, const std::vector<TaskId>& by_member) {
  const auto& first = std::get<Collective>(data_.tasks[by_member[0].index()].op);
  bool agree = true;
  for (std::size_t m = 1; m < by_member.size(); ++m) {
    const auto& other = std::get<Collective>(data_.tasks[by_member[m].index()].op);
    const auto disagree = [&](const char* field, const std::string& a, const std::string& b) {
      agree = false;
      problem(
          fmt::format("collective seq {} on group \"{}\": members disagree on {}: {} has {}, "
                      "{} has {}",
                      key.second, group_name(key.first), field, describe(by_member[0]), a,
                      describe(by_member[m]), b));
    };
    if (first.op != other.op) {
      disagree("op", std::string(to_string(first.op)), std::string(to_string(other.op)));
    }
    if (first.bytes != other.bytes) {
      disagree("bytes", std::to_string(first.bytes), std::to_string(other.bytes));
    }
    if (first.count != other.count) {
      disagree("count", std::to_string(first.count), std::to_string(other.count));
    }
    if (first.dtype != other.dtype) {
      disagree("dtype", std::string(to_string(first.dtype)), std::string(to_string(other.dtype)));
    }
    if (first.root != other.root) {
      disagree("root", std::to_string(first.root.value()), std::to_string(other.root.value()));
    }
  }
  return agree;
}

// NCCL matches a communicator's collectives by issue order, so every member must issue a group's
// collectives in sequence order; otherwise the k-th call of one rank meets another's j-th.
void Matcher::check_sequence_order() {
  std::map<std::pair<std::size_t, std::int32_t>, TaskId> last;  // (rank, group) -> last issued
  for (std::size_t r = 0; r < data_.issue_order.size() && r < data_.ranks.size(); ++r) {
    for (TaskId t : data_.issue_order[r]) {
      if (!t.valid() || t.index() >= data_.tasks.size() || !usable_[t.index()]) continue;
      const auto* c = std::get_if<Collective>(&data_.tasks[t.index()].op);
      if (c == nullptr) continue;
      auto [it, fresh] = last.try_emplace({r, c->group.value()}, t);
      if (fresh) continue;
      const auto& before = std::get<Collective>(data_.tasks[it->second.index()].op);
      if (before.seq > c->seq) {  // equal seqs are reported as duplicates
        problem(
            fmt::format("rank {} issues seq {} after seq {} on group \"{}\" ({} after {}); "
                        "expected increasing sequence numbers in issue order",
                        r, c->seq, before.seq, group_name(c->group.value()), describe(t),
                        describe(it->second)));
      }
      it->second = t;
    }
  }
}

void Matcher::add_instance(const std::vector<TaskId>& members) {
  const auto instance = static_cast<std::int32_t>(v_.comm_members.num_rows());
  for (TaskId t : members) v_.comm_instance[t.index()] = instance;
  v_.comm_members.add_row(members);
}

}  // namespace

void match_communication(const GraphData& data, const std::vector<char>& usable,
                         Validation& validation) {
  Matcher(data, usable, validation).run();
}

}  // namespace metron::ir
