#pragma once
// A task of the task graph: what one rank issues on one stream. Tasks carry work (flops, bytes,
// shapes, tags), never durations: durations come from cost models, and the executor runs the
// very same tasks for real (docs/ARCHITECTURE.md, "The task-graph contract").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "metron/ir/ids.h"

namespace metron::ir {

/// The five kinds of task; equal to the index of the alternative held in Task::op.
enum class TaskKind : std::uint8_t { kCompute, kCollective, kSend, kRecv, kHostWait };

/// What a compute task computes.
enum class Phase : std::uint8_t {
  kForward,         ///< F
  kBackwardInput,   ///< I: input gradient only (weight gradient deferred)
  kBackwardWeight,  ///< W: the deferred weight gradient
  kBackward,        ///< B: full backward (I + W)
  kRecompute,       ///< activation recomputation before a backward
  kOptimizer,       ///< the optimizer step
  kOther,
};

/// Collective operations, as NCCL and Gloo provide them.
enum class CollectiveOp : std::uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kReduce,
  kBroadcast,
  kAllToAll,
};

/// What a point-to-point transfer carries: activations flow forward, gradients backward.
enum class P2PKind : std::uint8_t { kActivation, kGradient, kOther };

/// Element type of the data a task moves.
enum class DType : std::uint8_t { kFp32, kBf16, kFp16, kFp8, kInt64, kInt32, kUint8 };

/// Half-open range of transformer layers [first, last); empty when first == last.
struct LayerRange {
  std::int32_t first = 0;
  std::int32_t last = 0;
  [[nodiscard]] bool empty() const noexcept { return first >= last; }
  friend bool operator==(const LayerRange&, const LayerRange&) = default;
};

/// The backward half of a DualPipe OVERLAP_F_B unit: run as one unit with the forward that the
/// owning task's own tags describe.
struct OverlapPart {
  Phase phase = Phase::kBackward;
  StageId stage;
  ChunkId chunk;
  MicrobatchId microbatch;
  LayerRange layers;
  friend bool operator==(const OverlapPart&, const OverlapPart&) = default;
};

/// How an operation computes: the cost model's op kinds (models::OpKind), which decide how it is
/// priced and what an executor runs for it.
enum class OperationKind : std::uint8_t {
  kGemm,         ///< C[m,n] = A[m,k] · B[k,n]
  kBatchedGemm,  ///< `batch` independent GEMMs of m×n×k (attention's QKᵀ and ·V)
  kElementwise,  ///< memory-bound over m elements: norms, softmax, dropout, activations, adds
};

/// One operation of a compute task, as the cost model prices it: an executor runs the same
/// operation on real tensors, so each measured task corresponds to a priced one (issue 16,
/// "Payload"). A task over several layers lists each layer's operations once, with `count` the
/// number of layers.
struct Operation {
  std::string name;  ///< what it is: "qkv", "attention-scores", "softmax", "mlp-down", ...
  OperationKind kind = OperationKind::kElementwise;
  std::int64_t m = 0;          ///< GEMM rows; element-wise: elements
  std::int64_t n = 0;          ///< GEMM columns; element-wise: 0
  std::int64_t k = 0;          ///< GEMM inner size; element-wise: 0
  std::int64_t batch = 1;      ///< batched GEMM count; otherwise 1
  std::int64_t bytes = 0;      ///< HBM bytes read and written by one repetition
  std::int32_t count = 1;      ///< repetitions, one per layer (>= 1)
  DType dtype = DType::kBf16;  ///< the precision it computes in
  friend bool operator==(const Operation&, const Operation&) = default;
};

/// Work on the device's math units.
struct Compute {
  Phase phase = Phase::kOther;
  double flops = 0;                               ///< floating-point operations
  double bytes_moved = 0;                         ///< memory traffic, for roofline cost models
  std::vector<std::vector<std::int64_t>> shapes;  ///< tensor shapes the executor allocates
  std::string cost_key;  ///< names an entry of a measured cost profile instead of flops/bytes
  std::vector<Operation> operations;      ///< what it computes, in order; empty when unknown
  std::optional<OverlapPart> overlapped;  ///< set for OVERLAP_F_B units only
  friend bool operator==(const Compute&, const Compute&) = default;
};

/// One member's part of a collective. Members of one instance share group and seq and must agree
/// on op, bytes, dtype and root.
struct Collective {
  CollectiveOp op = CollectiveOp::kAllReduce;
  GroupId group;
  std::int64_t bytes =
      0;  ///< per-rank buffer size (input of all-reduce, output of all-gather, ...)
  DType dtype = DType::kFp32;
  RankId root;           ///< reduce and broadcast only
  std::int64_t seq = 0;  ///< per-group sequence number, the same on every member
  /// How many back-to-back collectives of bytes/count each this task stands for (>= 1): a
  /// layer-aggregated tensor-parallel task is "12 all-reduces"; a cost model charges count
  /// latencies, an executor issues count calls. bytes is the total.
  std::int32_t count = 1;
  friend bool operator==(const Collective&, const Collective&) = default;
};

/// Sends `bytes` to `peer`; matched by (sender, receiver, tag) with exactly one Recv.
struct Send {
  RankId peer;
  std::int64_t bytes = 0;
  std::int64_t tag = 0;
  P2PKind what = P2PKind::kActivation;
  friend bool operator==(const Send&, const Send&) = default;
};

/// Receives `bytes` from `peer`; matched by (sender, receiver, tag) with exactly one Send.
struct Recv {
  RankId peer;
  std::int64_t bytes = 0;
  std::int64_t tag = 0;
  P2PKind what = P2PKind::kActivation;
  friend bool operator==(const Recv&, const Recv&) = default;
};

/// The issuing host blocks until `target` (a task of the same rank) completes. It runs on no
/// stream.
struct HostWait {
  TaskId target;
  friend bool operator==(const HostWait&, const HostWait&) = default;
};

using TaskOp = std::variant<Compute, Collective, Send, Recv, HostWait>;

/// One task. Tags (stage, chunk, microbatch, bucket, layers) are optional: "none" ids when unset.
/// @code
///   Task f{.rank = RankId{0}, .stream = compute0, .stage = StageId{0},
///          .microbatch = MicrobatchId{3}, .op = Compute{.phase = Phase::kForward, .flops = 1e12}};
/// @endcode
struct Task {
  RankId rank;
  StreamId stream;  ///< none for HostWait
  StageId stage;
  ChunkId chunk;
  MicrobatchId microbatch;
  BucketId bucket;
  LayerRange layers;
  std::string label;                ///< free text shown in traces; never interpreted
  std::vector<TaskId> deps;         ///< same-rank tasks that must complete first (event waits)
  std::vector<BufferId> allocates;  ///< buffers allocated when this task starts
  std::vector<BufferId> uses;       ///< buffers read or written; freed after their last user
  TaskOp op;

  [[nodiscard]] TaskKind kind() const noexcept { return static_cast<TaskKind>(op.index()); }
  [[nodiscard]] bool is_communication() const noexcept {
    return kind() == TaskKind::kCollective || kind() == TaskKind::kSend ||
           kind() == TaskKind::kRecv;
  }
  friend bool operator==(const Task&, const Task&) = default;
};

// Every enum has to_string (lowercase, hyphenated, as in JSON) and a parser returning nullopt
// for unknown names.
std::string_view to_string(TaskKind kind) noexcept;
std::string_view to_string(Phase phase) noexcept;
std::string_view to_string(CollectiveOp op) noexcept;
std::string_view to_string(P2PKind kind) noexcept;
std::string_view to_string(DType dtype) noexcept;
std::string_view to_string(OperationKind kind) noexcept;
std::optional<TaskKind> parse_task_kind(std::string_view name) noexcept;
std::optional<Phase> parse_phase(std::string_view name) noexcept;
std::optional<CollectiveOp> parse_collective_op(std::string_view name) noexcept;
std::optional<P2PKind> parse_p2p_kind(std::string_view name) noexcept;
std::optional<DType> parse_dtype(std::string_view name) noexcept;
std::optional<OperationKind> parse_operation_kind(std::string_view name) noexcept;

/// All names an enum accepts, joined by '|', for "expected ..." messages.
template <class Enum>
std::string enum_names();

}  // namespace metron::ir
