#pragma once
// Terse constructors for IR tasks in tests. Each sets exactly the fields named by its parameters.

#include <cstdint>

#include "metron/ir/graph_builder.h"

namespace metron::ir::testing {

inline Task compute(RankId rank, StreamId stream, Phase phase, std::int32_t stage = -1,
                    std::int32_t microbatch = -1) {
  return {.rank = rank,
          .stream = stream,
          .stage = StageId{stage},
          .microbatch = MicrobatchId{microbatch},
          .op = Compute{.phase = phase}};
}

inline Task send(RankId rank, StreamId stream, std::int32_t peer, std::int64_t bytes,
                 std::int64_t tag, P2PKind what = P2PKind::kActivation) {
  return {.rank = rank,
          .stream = stream,
          .op = Send{.peer = RankId{peer}, .bytes = bytes, .tag = tag, .what = what}};
}

inline Task recv(RankId rank, StreamId stream, std::int32_t peer, std::int64_t bytes,
                 std::int64_t tag, P2PKind what = P2PKind::kActivation) {
  return {.rank = rank,
          .stream = stream,
          .op = Recv{.peer = RankId{peer}, .bytes = bytes, .tag = tag, .what = what}};
}

inline Task collective(RankId rank, StreamId stream, GroupId group, std::int64_t bytes,
                       std::int64_t seq, CollectiveOp op = CollectiveOp::kAllReduce) {
  return {.rank = rank,
          .stream = stream,
          .op = Collective{.op = op, .group = group, .bytes = bytes, .seq = seq}};
}

inline Task host_wait(RankId rank, TaskId target) {
  return {.rank = rank, .op = HostWait{.target = target}};
}

/// A task with one dependency added.
inline Task after(Task task, TaskId dependency) {
  task.deps.push_back(dependency);
  return task;
}

}  // namespace metron::ir::testing
