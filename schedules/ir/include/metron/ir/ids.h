#pragma once
// The strong id types of the task-graph IR.

#include "metron/base/strong_id.h"

namespace metron::ir {

// Tags are empty structs: they exist only to make the id types distinct.
struct TaskTag {};
struct RankTag {};
struct StreamTag {};
struct GroupTag {};
struct BufferTag {};
struct StageTag {};
struct ChunkTag {};
struct MicrobatchTag {};
struct BucketTag {};

/// Index of a task in Graph::tasks().
using TaskId = StrongId<TaskTag>;
/// Global rank (one process, one device).
using RankId = StrongId<RankTag>;
/// Index of a stream in Graph::streams(); each stream belongs to one rank.
using StreamId = StrongId<StreamTag>;
/// Index of a communication group in Graph::groups().
using GroupId = StrongId<GroupTag>;
/// Index of a memory buffer in Graph::buffers().
using BufferId = StrongId<BufferTag>;
/// Global pipeline stage index (PyTorch's stage_index; with chunks, stage = chunk * pp + rank for
/// loop placement).
using StageId = StrongId<StageTag>;
/// Model chunk (virtual stage) on one rank.
using ChunkId = StrongId<ChunkTag>;
/// Microbatch index within one iteration.
using MicrobatchId = StrongId<MicrobatchTag>;
/// Gradient / parameter bucket of a data-parallel sync policy.
using BucketId = StrongId<BucketTag>;

}  // namespace metron::ir
