// Names of the IR's enums. One table per enum serves to_string, parsing and "expected" lists, so
// the three can never disagree.

#include <array>
#include <string>
#include <utility>

#include "metron/ir/task.h"

namespace metron::ir {
namespace {

template <class Enum, std::size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<TaskKind, 5> kTaskKindNames{{
    {TaskKind::kCompute, "compute"},
    {TaskKind::kCollective, "collective"},
    {TaskKind::kSend, "send"},
    {TaskKind::kRecv, "recv"},
    {TaskKind::kHostWait, "host-wait"},
}};

constexpr NameTable<Phase, 7> kPhaseNames{{
    {Phase::kForward, "forward"},
    {Phase::kBackwardInput, "backward-input"},
    {Phase::kBackwardWeight, "backward-weight"},
    {Phase::kBackward, "backward"},
    {Phase::kRecompute, "recompute"},
    {Phase::kOptimizer, "optimizer"},
    {Phase::kOther, "other"},
}};

constexpr NameTable<CollectiveOp, 6> kCollectiveOpNames{{
    {CollectiveOp::kAllReduce, "all-reduce"},
    {CollectiveOp::kReduceScatter, "reduce-scatter"},
    {CollectiveOp::kAllGather, "all-gather"},
    {CollectiveOp::kReduce, "reduce"},
    {CollectiveOp::kBroadcast, "broadcast"},
    {CollectiveOp::kAllToAll, "all-to-all"},
}};

constexpr NameTable<P2PKind, 3> kP2PKindNames{{
    {P2PKind::kActivation, "activation"},
    {P2PKind::kGradient, "gradient"},
    {P2PKind::kOther, "other"},
}};

constexpr NameTable<DType, 7> kDTypeNames{{
    {DType::kFp32, "fp32"},
    {DType::kBf16, "bf16"},
    {DType::kFp16, "fp16"},
    {DType::kFp8, "fp8"},
    {DType::kInt64, "int64"},
    {DType::kInt32, "int32"},
    {DType::kUint8, "uint8"},
}};

constexpr NameTable<OperationKind, 3> kOperationKindNames{{
    {OperationKind::kGemm, "gemm"},
    {OperationKind::kBatchedGemm, "batched-gemm"},
    {OperationKind::kElementwise, "elementwise"},
}};

template <class Enum, std::size_t N>
std::string_view name_in(const NameTable<Enum, N>& table, Enum value) noexcept {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
std::optional<Enum> value_in(const NameTable<Enum, N>& table, std::string_view name) noexcept {
  for (const auto& [v, n] : table) {
    if (n == name) return v;
  }
  return std::nullopt;
}

template <class Enum, std::size_t N>
std::string joined(const NameTable<Enum, N>& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += '|';
    out += entry.second;
  }
  return out;
}

}  // namespace

std::string_view to_string(TaskKind kind) noexcept { return name_in(kTaskKindNames, kind); }
std::string_view to_string(Phase phase) noexcept { return name_in(kPhaseNames, phase); }
std::string_view to_string(CollectiveOp op) noexcept { return name_in(kCollectiveOpNames, op); }
std::string_view to_string(P2PKind kind) noexcept { return name_in(kP2PKindNames, kind); }
std::string_view to_string(DType dtype) noexcept { return name_in(kDTypeNames, dtype); }
std::string_view to_string(OperationKind kind) noexcept {
  return name_in(kOperationKindNames, kind);
}

std::optional<TaskKind> parse_task_kind(std::string_view name) noexcept {
  return value_in(kTaskKindNames, name);
}
std::optional<Phase> parse_phase(std::string_view name) noexcept {
  return value_in(kPhaseNames, name);
}
std::optional<CollectiveOp> parse_collective_op(std::string_view name) noexcept {
  return value_in(kCollectiveOpNames, name);
}
std::optional<P2PKind> parse_p2p_kind(std::string_view name) noexcept {
  return value_in(kP2PKindNames, name);
}
std::optional<DType> parse_dtype(std::string_view name) noexcept {
  return value_in(kDTypeNames, name);
}
std::optional<OperationKind> parse_operation_kind(std::string_view name) noexcept {
  return value_in(kOperationKindNames, name);
}

template <>
std::string enum_names<TaskKind>() {
  return joined(kTaskKindNames);
}
template <>
std::string enum_names<Phase>() {
  return joined(kPhaseNames);
}
template <>
std::string enum_names<CollectiveOp>() {
  return joined(kCollectiveOpNames);
}
template <>
std::string enum_names<P2PKind>() {
  return joined(kP2PKindNames);
}
template <>
std::string enum_names<DType>() {
  return joined(kDTypeNames);
}
template <>
std::string enum_names<OperationKind>() {
  return joined(kOperationKindNames);
}

}  // namespace metron::ir
