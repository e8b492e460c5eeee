// Graph::flat_index(): the packed per-task records the interpreters' inner loops read, checked
// field by field against a small graph worked out by hand.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"
#include "task_factory.h"

namespace metron::ir {
namespace {

using ::testing::ElementsAre;
using namespace metron::ir::testing;

TEST(FlatIndex, PacksSuccessorsConditionsDependentsBuffersAndInstancesOfEveryTask) {
  // Rank 0: f (compute, allocates act) then s (send 64 bytes, after f) on its own stream, then
  //         h (host wait on s).
  // Rank 1: r (recv) then g (compute after r, uses nothing) on one stream; a two-rank all-reduce
  //         of 32 bytes on each rank's "dp" stream.
  GraphBuilder b;
  const RankId r0 = b.add_rank();
  const RankId r1 = b.add_rank();
  const StreamId c0 = b.add_stream(r0, "compute");
  const StreamId p0 = b.add_stream(r0, "pp");
  const StreamId d0 = b.add_stream(r0, "dp");
  const StreamId c1 = b.add_stream(r1, "compute");
  const StreamId d1 = b.add_stream(r1, "dp");
  const GroupId dp = b.add_group("dp", {r0, r1});
  const BufferId act = b.add_buffer(r0, 100, "act");
  Task forward = compute(r0, c0, Phase::kForward, 0, 0);
  forward.allocates = {act};
  const TaskId f = b.add(forward);
  Task sending = after(send(r0, p0, 1, 64, 7), f);
  sending.uses = {act};
  const TaskId s = b.add(sending);
  const TaskId a0 = b.add(collective(r0, d0, dp, 32, 0));
  const TaskId h = b.add(host_wait(r0, s));
  const TaskId r = b.add(recv(r1, c1, 0, 64, 7));
  const TaskId g = b.add(after(compute(r1, c1, Phase::kForward, 1, 0), r));
  const TaskId a1 = b.add(collective(r1, d1, dp, 32, 0));
  const Graph graph = std::move(b).build();

  const FlatIndex flat = graph.flat_index();
  ASSERT_EQ(flat.tasks.size(), 7U);
  const TaskFacts& ff = flat.tasks[f.index()];
  const TaskFacts& fs = flat.tasks[s.index()];
  const TaskFacts& fh = flat.tasks[h.index()];
  const TaskFacts& fr = flat.tasks[r.index()];
  const TaskFacts& fg = flat.tasks[g.index()];
  const TaskFacts& fa0 = flat.tasks[a0.index()];

  EXPECT_EQ(ff.rank, r0);
  EXPECT_EQ(fg.rank, r1);
  EXPECT_EQ(ff.kind, TaskKind::kCompute);
  EXPECT_EQ(fs.kind, TaskKind::kSend);
  EXPECT_EQ(fh.kind, TaskKind::kHostWait);
  EXPECT_EQ(fa0.kind, TaskKind::kCollective);

  // Stream successors: r -> g on rank 1's compute stream; every other stream holds one task.
  EXPECT_EQ(fr.stream_successor, g);
  EXPECT_FALSE(ff.stream_successor.valid());
  EXPECT_FALSE(fs.stream_successor.valid());
  // Eight hardware queues and at most three streams per rank: no queue constraint anywhere.
  for (const TaskFacts& t : flat.tasks) EXPECT_FALSE(t.queue_successor.valid());

  // Conditions besides issue: s waits for f (1); g for its stream predecessor r and its
  // dependency r (2); h for its target (1); f, r and the all-reduce members for nothing.
  EXPECT_EQ(ff.conditions, 0);
  EXPECT_EQ(fs.conditions, 1);
  EXPECT_EQ(fg.conditions, 2);
  EXPECT_EQ(fh.conditions, 1);
  EXPECT_EQ(fr.conditions, 0);
  EXPECT_EQ(fa0.conditions, 0);

  // Dependents: f -> {s}, s -> {h} (the host wait), r -> {g}; the others none.
  const auto dependents = [&](const TaskFacts& t) {
    return std::vector<TaskId>(flat.dependents.begin() + t.dependents_begin,
                               flat.dependents.begin() + t.dependents_end);
  };
  EXPECT_THAT(dependents(ff), ElementsAre(s));
  EXPECT_THAT(dependents(fs), ElementsAre(h));
  EXPECT_THAT(dependents(fr), ElementsAre(g));
  EXPECT_THAT(dependents(fg), ElementsAre());

  // Buffers: f allocates act and uses nothing; s allocates nothing and uses act.
  EXPECT_EQ(ff.uses_begin - ff.allocates_begin, 1);
  EXPECT_EQ(flat.buffer_effects[static_cast<std::size_t>(ff.allocates_begin)], act);
  EXPECT_EQ(ff.uses_end, ff.uses_begin);
  EXPECT_EQ(fs.uses_begin, fs.allocates_begin);
  EXPECT_EQ(fs.uses_end - fs.uses_begin, 1);
  EXPECT_EQ(flat.buffer_effects[static_cast<std::size_t>(fs.uses_begin)], act);

  // Instances: the send-receive pair moves 64 bytes in no group, the all-reduce 32 in dp; each
  // lists its members as Graph::comm_members does.
  ASSERT_EQ(flat.instances.size(), 2U);
  EXPECT_EQ(fs.comm_instance, fr.comm_instance);
  EXPECT_EQ(fa0.comm_instance, flat.tasks[a1.index()].comm_instance);
  EXPECT_EQ(ff.comm_instance, -1);
  EXPECT_EQ(fh.comm_instance, -1);
  const CommFacts& p2p = flat.instances[static_cast<std::size_t>(fs.comm_instance)];
  const CommFacts& all_reduce = flat.instances[static_cast<std::size_t>(fa0.comm_instance)];
  EXPECT_EQ(p2p.bytes, 64);
  EXPECT_FALSE(p2p.group.valid());
  EXPECT_EQ(all_reduce.bytes, 32);
  EXPECT_EQ(all_reduce.group, dp);
  for (const TaskFacts* t : {&fs, &fa0}) {
    const CommFacts& c = flat.instances[static_cast<std::size_t>(t->comm_instance)];
    const std::vector<TaskId> members(flat.comm_members.begin() + c.members_begin,
                                      flat.comm_members.begin() + c.members_end);
    const auto expected = graph.comm_members(t->comm_instance);
    EXPECT_EQ(members, std::vector<TaskId>(expected.begin(), expected.end()));
  }
}

}  // namespace
}  // namespace metron::ir
