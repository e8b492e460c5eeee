// Names as Kineto, c10d and NCCL write them (docs/TRACES.md §2.6).

#include "metron/timelines/kineto_names.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <variant>

namespace metron::timelines {
namespace {

/// NCCL's own type names in its kernel names (src/device/generate.py).
std::string_view nccl_type(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFp32:
      return "f32";
    case ir::DType::kBf16:
      return "bf16";
    case ir::DType::kFp16:
      return "f16";
    case ir::DType::kFp8:
      return "f8e4m3";
    case ir::DType::kInt64:
      return "i64";
    case ir::DType::kInt32:
      return "i32";
    case ir::DType::kUint8:
      return "u8";
  }
  return "u8";
}

constexpr std::string_view kArgsSuffix = "(ncclDevKernelArgsStorage<4096ul>)";

/// "[0, 1, 2, 3]", as Kineto writes Process Group Ranks.
std::string rank_list(const std::vector<std::int64_t>& ranks) {
  std::string out = "[";
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (k > 0) out += ", ";
    out += std::to_string(ranks[k]);
  }
  return out + "]";
}

void add_group(std::vector<traces::Arg>& args, std::string_view name, std::string_view desc,
               const std::vector<std::int64_t>& ranks) {
  args.push_back({"Group size", static_cast<std::int64_t>(ranks.size())});
  args.push_back({"Process Group Name", std::string(name)});
  args.push_back({"Process Group Description", std::string(desc)});
  args.push_back({"Process Group Ranks", rank_list(ranks)});
}

}  // namespace

std::string_view kineto_dtype(ir::DType dtype) noexcept {
  switch (dtype) {
    case ir::DType::kFp32:
      return "Float";
    case ir::DType::kBf16:
      return "BFloat16";
    case ir::DType::kFp16:
      return "Half";
    case ir::DType::kFp8:
      return "Float8_e4m3fn";
    case ir::DType::kInt64:
      return "Long";
    case ir::DType::kInt32:
      return "Int";
    case ir::DType::kUint8:
      return "Byte";
  }
  return "Byte";
}

std::int64_t dtype_size(ir::DType dtype) noexcept {
  switch (dtype) {
    case ir::DType::kFp32:
    case ir::DType::kInt32:
      return 4;
    case ir::DType::kBf16:
    case ir::DType::kFp16:
      return 2;
    case ir::DType::kInt64:
      return 8;
    case ir::DType::kFp8:
    case ir::DType::kUint8:
      return 1;
  }
  return 1;
}

std::string c10d_collective_name(const ir::Task& task) {
  if (task.kind() == ir::TaskKind::kSend) return "send";
  if (task.kind() == ir::TaskKind::kRecv) return "recv";
  const auto* c = std::get_if<ir::Collective>(&task.op);
  if (c == nullptr) return {};
  switch (c->op) {
    case ir::CollectiveOp::kAllReduce:
      return "allreduce";
    case ir::CollectiveOp::kReduceScatter:
      return "_reduce_scatter_base";
    case ir::CollectiveOp::kAllGather:
      return "_allgather_base";
    case ir::CollectiveOp::kReduce:
      return "reduce";
    case ir::CollectiveOp::kBroadcast:
      return "broadcast";
    case ir::CollectiveOp::kAllToAll:
      return "all_to_allv";
  }
  return {};
}

std::string nccl_kernel_name(const ir::Task& task) {
  if (task.kind() == ir::TaskKind::kSend || task.kind() == ir::TaskKind::kRecv) {
    return "ncclDevKernel_SendRecv" + std::string(kArgsSuffix);
  }
  const auto* c = std::get_if<ir::Collective>(&task.op);
  if (c == nullptr) return {};
  const std::string type(nccl_type(c->dtype));
  std::string name;
  switch (c->op) {
    case ir::CollectiveOp::kAllReduce:
      name = "ncclDevKernel_AllReduce_Sum_" + type + "_RING_LL";
      break;
    case ir::CollectiveOp::kReduceScatter:
      name = "ncclDevKernel_ReduceScatter_Sum_" + type + "_RING_LL";
      break;
    case ir::CollectiveOp::kAllGather:
      name = "ncclDevKernel_AllGather_RING_LL";
      break;
    case ir::CollectiveOp::kReduce:
      name = "ncclDevKernel_Reduce_Sum_" + type + "_RING_LL";
      break;
    case ir::CollectiveOp::kBroadcast:
      name = "ncclDevKernel_Broadcast_RING_LL";
      break;
    case ir::CollectiveOp::kAllToAll:
      name = "ncclDevKernel_SendRecv";
      break;
  }
  return name + std::string(kArgsSuffix);
}

std::vector<traces::Arg> communication_args(const ir::Graph& graph, ir::TaskId id,
                                            const WorldLayout& layout) {
  const ir::Task& task = graph.task(id);
  std::vector<traces::Arg> args;
  const std::string name = c10d_collective_name(task);
  if (name.empty()) return args;
  const std::int64_t self = layout.world_rank[task.rank.index()];
  if (const auto* c = std::get_if<ir::Collective>(&task.op)) {
    const GroupNaming& group = layout.groups[c->group.index()];
    const std::int64_t size = std::max<std::int64_t>(1, std::ssize(group.world_ranks));
    const std::int64_t elements = c->bytes / dtype_size(c->dtype);
    // bytes is the full buffer (ir::Collective): all-gather's input and reduce-scatter's output
    // are one member's shard of it, as c10d's _allgather_base / _reduce_scatter_base see them.
    std::int64_t in = elements;
    std::int64_t out = elements;
    if (c->op == ir::CollectiveOp::kAllGather) in = elements / size;
    if (c->op == ir::CollectiveOp::kReduceScatter) out = elements / size;
    args.push_back({"Collective name", name});
    args.push_back({"In msg nelems", in});
    args.push_back({"Out msg nelems", out});
    args.push_back({"dtype", std::string(kineto_dtype(c->dtype))});
    add_group(args, group.pg_name, group.description, group.world_ranks);
    if (c->root.valid()) args.push_back({"Root Rank", layout.world_rank[c->root.index()]});
    args.push_back({"Seq", c->seq});
    return args;
  }
  // Point-to-point: PyTorch's send / recv as bytes of uint8, through the rank's pipeline group
  // when the layout names one, else the default (world) group.
  const bool send = task.kind() == ir::TaskKind::kSend;
  const ir::RankId peer =
      send ? std::get<ir::Send>(task.op).peer : std::get<ir::Recv>(task.op).peer;
  const std::int64_t bytes =
      send ? std::get<ir::Send>(task.op).bytes : std::get<ir::Recv>(task.op).bytes;
  const std::int64_t other = layout.world_rank[peer.index()];
  args.push_back({"Collective name", name});
  args.push_back({"In msg nelems", bytes});
  args.push_back({"Out msg nelems", bytes});
  args.push_back({"dtype", std::string(kineto_dtype(ir::DType::kUint8))});
  if (!layout.pipeline_groups.empty()) {
    const GroupNaming& group = layout.pipeline_groups[task.rank.index()];
    add_group(args, group.pg_name, group.description, group.world_ranks);
  } else {
    std::vector<std::int64_t> world(static_cast<std::size_t>(layout.world_size));
    for (std::size_t k = 0; k < world.size(); ++k) world[k] = static_cast<std::int64_t>(k);
    add_group(args, kDefaultPgName, kDefaultPgDescription, world);
  }
  args.push_back({"Src Rank", send ? self : other});
  args.push_back({"Dst Rank", send ? other : self});
  return args;
}

}  // namespace metron::timelines
