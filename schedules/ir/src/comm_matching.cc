// Matching of communication tasks across ranks: each send with exactly one receive (by sender,
// receiver and tag), and each collective (by group and sequence number) with one task on every
// member, all agreeing on op, bytes, dtype and root. Matched sets become the graph's
// communication instances, which the interpreters start together (rendezvous).

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "graph_impl.h"

namespace metron::ir {
namespace {

using P2PKey = std::tuple<std::int32_t, std::int32_t, std::int64_t>;  // sender, receiver, tag
using CollectiveKey = std::pair<std::int32_t, std::int64_t>;          // group, seq

struct P2PEnds {
  std::vector<TaskId> sends;
  std::vector<TaskId> recvs;
};

class Matcher {
 public:
  Matcher(const GraphData& data, const std::vector<char>& usable, Validation& v)
      : data_(data), usable_(usable), v_(v) {
    v_.comm_instance.assign(data.tasks.size(), -1);
  }

  void run() {
    collect();
    for (const auto& [key, ends] : p2p_) match_pair(key, ends);
    for (const auto& [key, tasks] : collectives_) match_collective(key, tasks);
    check_sequence_order();
  }

 private:
  std::string describe(TaskId t) const { return describe_task(data_, t); }
  std::string group_name(std::int32_t g) const {
    return data_.groups[static_cast<std::size_t>(g)].name;
  }
  void problem(std::string text) { v_.problems.push_back(std::move(text)); }

  void collect();
  void match_pair(const P2PKey& key, const P2PEnds& ends);
  void match_collective(const CollectiveKey& key, const std::vector<TaskId>& tasks);
  bool members_agree(const CollectiveKey& key, const std::vector<TaskId>& by_member);
  std::string elsewhere(RankId rank, const CollectiveKey& key) const;
  void check_sequence_order();
  void add_instance(const std::vector<TaskId>& members);

  const GraphData& data_;
  const std::vector<char>& usable_;
  Validation& v_;
  std::map<P2PKey, P2PEnds> p2p_;
  std::map<CollectiveKey, std::vector<TaskId>> collectives_;
};

void Matcher::collect() {
  for (std::size_t i = 0; i < data_.tasks.size(); ++i) {
    if (!usable_[i]) continue;
    const Task& t = data_.tasks[i];
    const TaskId id{static_cast<std::int32_t>(i)};
    if (const auto* s = std::get_if<Send>(&t.op)) {
      p2p_[{t.rank.value(), s->peer.value(), s->tag}].sends.push_back(id);
    } else if (const auto* r = std::get_if<Recv>(&t.op)) {
      p2p_[{r->peer.value(), t.rank.value(), r->tag}].recvs.push_back(id);
    } else if (const auto* c = std::get_if<Collective>(&t.op)) {
      collectives_[{c->group.value(), c->seq}].push_back(id);
    }
  }
}

void Matcher::match_pair(const P2PKey& key, const P2PEnds& ends) {
  const auto [from, to, tag] = key;
  if (ends.sends.size() == 1 && ends.recvs.size() == 1) {
    const auto& send = std::get<Send>(data_.tasks[ends.sends[0].index()].op);
    const auto& recv = std::get<Recv>(data_.tasks[ends.recvs[0].index()].op);
    if (send.bytes != recv.bytes || send.what != recv.what) {
      return problem(
          fmt::format("send and receive disagree: {} sends {} {} bytes but {} expects "
                      "{} {} bytes",
                      describe(ends.sends[0]), send.bytes, to_string(send.what),
                      describe(ends.recvs[0]), recv.bytes, to_string(recv.what)));
    }
    return add_instance({ends.sends[0], ends.recvs[0]});
  }
  if (ends.recvs.empty()) {
    for (TaskId s : ends.sends) {
      problem(
          fmt::format("unmatched send: {}; expected a receive on rank {} from rank {} with "
                      "tag {}",
                      describe(s), to, from, tag));
    }
  } else if (ends.sends.empty()) {
    for (TaskId r : ends.recvs) {
      problem(
          fmt::format("unmatched receive: {}; expected a send on rank {} to rank {} with tag {}",
                      describe(r), from, to, tag));
    }
  } else {
    std::string list;
    for (const auto* side : {&ends.sends, &ends.recvs}) {
      for (TaskId t : *side) list += "\n      " + describe(t);
    }
    problem(
        fmt::format("{} sends and {} receives share rank {} -> rank {} tag {}; expected "
                    "exactly one of each:{}",
                    ends.sends.size(), ends.recvs.size(), from, to, tag, list));
  }
}

void Matcher::match_collective(const CollectiveKey& key, const std::vector<TaskId>& tasks) {
  const auto& members = data_.groups[static_cast<std::size_t>(key.first)].ranks;
  std::vector<TaskId> by_member(members.size());
  bool complete = true;
  for (TaskId t : tasks) {
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
                    describe(tasks.front()), members[m].value(), key.second, group_name(key.first),
                    elsewhere(members[m], key)));
  }
  if (complete && members_agree(key, by_member)) add_instance(by_member);
}

// When a member lacks (group, seq) but issues that seq on another group, the likely mistake is
// that the members disagree on the group: say so.
std::string Matcher::elsewhere(RankId rank, const CollectiveKey& key) const {
  std::string out;
  for (const auto& [other, tasks] : collectives_) {
    if (other.second != key.second || other.first == key.first) continue;
    for (TaskId t : tasks) {
      if (data_.tasks[t.index()].rank != rank) continue;
      out += fmt::format(
          "; members disagree on the group: rank {} issues seq {} on group \"{}\" "
          "instead ({})",
          rank.value(), key.second, group_name(other.first), describe(t));
    }
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
