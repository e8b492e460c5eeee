#include "metron/exec/cuda/nccl_world.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <variant>

#include "cuda_check.h"
#include "metron/base/error.h"
#include "metron/exec/wire_layout.h"

namespace metron::exec::cuda {
namespace {

using detail::check;

ncclDataType_t nccl_type(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFp32:
      return ncclFloat32;
    case ir::DType::kBf16:
      return ncclBfloat16;
    case ir::DType::kFp16:
      return ncclFloat16;
    case ir::DType::kFp8:
      return ncclFloat8e4m3;
    case ir::DType::kInt64:
      return ncclInt64;
    case ir::DType::kInt32:
      return ncclInt32;
    case ir::DType::kUint8:
      return ncclUint8;
  }
  return ncclUint8;
}

/// A group's communicator and its members in NCCL's rank order (sorted world ranks: the split's
/// key is the world rank).
struct Group {
  ncclComm_t comm = nullptr;  ///< null where this rank is not a member
  std::vector<std::int32_t> members;
  std::int64_t next_ordinal = 0;
};

}  // namespace

struct NcclWorld::Impl {
  std::int32_t rank = 0;
  int device = 0;
  ncclComm_t world = nullptr;
  std::vector<Group> groups;
  std::map<std::int32_t, ncclComm_t> send_comms;     ///< by receiver: this rank is rank 0
  std::map<std::int32_t, ncclComm_t> receive_comms;  ///< by sender: this rank is rank 1
  void* buffer = nullptr;
  std::int64_t buffer_bytes = 0;

  ~Impl() {
    for (auto* comms : {&send_comms, &receive_comms}) {
      for (auto& [peer, comm] : *comms) static_cast<void>(ncclCommDestroy(comm));
    }
    for (Group& g : groups) {
      if (g.comm != nullptr) static_cast<void>(ncclCommDestroy(g.comm));
    }
    if (world != nullptr) static_cast<void>(ncclCommDestroy(world));
    if (buffer != nullptr) static_cast<void>(cudaFree(buffer));
  }

  void grow(std::int64_t bytes) {
    if (bytes <= buffer_bytes) return;
    if (buffer != nullptr) check(cudaFree(buffer), "cudaFree", "NCCL buffer");
    buffer = nullptr;
    buffer_bytes = 0;
    check(cudaMalloc(&buffer, static_cast<std::size_t>(bytes)), "cudaMalloc",
          "NCCL buffer of " + std::to_string(bytes) + " bytes");
    buffer_bytes = bytes;
  }

  Group& member_group(std::int32_t group) {
    if (group < 0 || static_cast<std::size_t>(group) >= groups.size() ||
        groups[static_cast<std::size_t>(group)].comm == nullptr) {
      throw InvalidConfig("nccl collective: rank " + std::to_string(rank) +
                          " is not a member of group " + std::to_string(group));
    }
    return groups[static_cast<std::size_t>(group)];
  }

  [[nodiscard]] std::int32_t comm_rank(const Group& g, std::int32_t world_rank) const {
    const auto at = std::find(g.members.begin(), g.members.end(), world_rank);
    if (at == g.members.end()) {
      throw InvalidConfig("nccl collective: root rank " + std::to_string(world_rank) +
                          " is not a member of its group");
    }
    return static_cast<std::int32_t>(at - g.members.begin());
  }
};

namespace {

std::string bytes_of(const ncclUniqueId& id) {
  return {reinterpret_cast<const char*>(&id), sizeof id};
}

// The id shared under `key`: made here when `make`, else received.
ncclUniqueId shared_id(const NcclWorld::IdExchange& exchange, const std::string& key, bool make,
                       std::int32_t rank) {
  ncclUniqueId id{};
  if (make) check(ncclGetUniqueId(&id), "ncclGetUniqueId", key);
  const std::string shared = exchange(key, make ? bytes_of(id) : std::string());
  if (shared.size() != sizeof id) {
    throw BackendError("nccl world: rank " + std::to_string(rank) + " received a unique id of " +
                       std::to_string(shared.size()) + " bytes for " + key + "; expected " +
                       std::to_string(sizeof id));
  }
  std::memcpy(&id, shared.data(), sizeof id);
  return id;
}

std::string pair_key(std::int32_t from, std::int32_t to) {
  return "p2p/" + std::to_string(from) + "/" + std::to_string(to);
}

}  // namespace

NcclWorld::Plan NcclWorld::plan_of(const ir::Graph& graph, std::int32_t rank) {
  Plan plan;
  for (const ir::Group& group : graph.data().groups) {
    std::vector<std::int32_t>& members = plan.groups.emplace_back();
    for (const ir::RankId r : group.ranks) members.push_back(r.value());
  }
  std::set<std::int32_t> to;
  std::set<std::int32_t> from;
  for (const ir::TaskId id : graph.issue_order(ir::RankId{rank})) {
    const ir::Task& task = graph.task(id);
    if (const auto* s = std::get_if<ir::Send>(&task.op)) to.insert(s->peer.value());
    if (const auto* r = std::get_if<ir::Recv>(&task.op)) from.insert(r->peer.value());
  }
  plan.sends_to.assign(to.begin(), to.end());
  plan.receives_from.assign(from.begin(), from.end());
  return plan;
}

NcclWorld::NcclWorld(std::int32_t rank, std::int32_t world_size, const Plan& plan,
                     const IdExchange& exchange, int device)
    : impl_(std::make_unique<Impl>()) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw InvalidConfig("nccl world: rank " + std::to_string(rank) + " is outside a world of " +
                        std::to_string(world_size));
  }
  impl_->rank = rank;
  impl_->device = device;
  check(cudaSetDevice(device), "cudaSetDevice", "device " + std::to_string(device));
  ncclUniqueId id{};
  if (world_size == 1) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId", "world");
  } else {
    id = shared_id(exchange, "world", rank == 0, rank);
  }
  check(ncclCommInitRank(&impl_->world, world_size, id, rank), "ncclCommInitRank",
        "world of " + std::to_string(world_size));
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    Group& group = impl_->groups.emplace_back();
    group.members = plan.groups[g];
    std::sort(group.members.begin(), group.members.end());
    const bool member =
        std::find(group.members.begin(), group.members.end(), rank) != group.members.end();
    check(ncclCommSplit(impl_->world, member ? static_cast<int>(g) : NCCL_SPLIT_NOCOLOR, rank,
                        &group.comm, nullptr),
          "ncclCommSplit", "group " + std::to_string(g));
  }
  connect_transfers(plan, exchange);
}

NcclWorld::~NcclWorld() = default;

void NcclWorld::connect_transfers(const Plan& plan, const IdExchange& exchange) {
  // Ids first, then the communicators: a rank publishes every id it makes before it waits for
  // any it receives, so no two ranks wait for each other's.
  std::vector<std::pair<std::int32_t, ncclUniqueId>> sends;
  for (const std::int32_t to : plan.sends_to) {
    sends.emplace_back(to, shared_id(exchange, pair_key(impl_->rank, to), true, impl_->rank));
  }
  std::vector<std::pair<std::int32_t, ncclUniqueId>> receives;
  for (const std::int32_t from : plan.receives_from) {
    receives.emplace_back(from,
                          shared_id(exchange, pair_key(from, impl_->rank), false, impl_->rank));
  }
  // One group call for all of them: each initialisation waits for the peer's, and the peers
  // reach theirs in their own order.
  check(ncclGroupStart(), "ncclGroupStart", "transfer communicators");
  for (auto& [to, pair_id] : sends) {
    check(ncclCommInitRank(&impl_->send_comms[to], 2, pair_id, 0), "ncclCommInitRank",
          pair_key(impl_->rank, to));
  }
  for (auto& [from, pair_id] : receives) {
    check(ncclCommInitRank(&impl_->receive_comms[from], 2, pair_id, 1), "ncclCommInitRank",
          pair_key(from, impl_->rank));
  }
  check(ncclGroupEnd(), "ncclGroupEnd", "transfer communicators");
}

void NcclWorld::prepare_collective(std::int32_t group, const ir::Collective& collective) {
  const Group& g = impl_->member_group(group);
  const exec::detail::WireLayout layout =
      exec::detail::wire_layout(collective, static_cast<std::int32_t>(g.members.size()));
  const std::int64_t element = exec::detail::element_bytes(layout.type);
  // Input and output side by side: out-of-place calls never overlap their buffers.
  impl_->grow((layout.input_elements() + layout.output_elements()) * element);
}

void NcclWorld::prepare_transfer(std::int64_t bytes) {
  impl_->grow(std::max<std::int64_t>(0, bytes));
}

void NcclWorld::collective(std::int32_t group, std::int64_t ordinal,
                           const ir::Collective& collective, CUstream_st* stream) {
  Group& g = impl_->member_group(group);
  const std::string what = std::string(ir::to_string(collective.op)) + " on group " +
                           std::to_string(group) + " (ordinal " + std::to_string(ordinal) + ", " +
                           std::to_string(collective.bytes) + " bytes)";
  if (ordinal != g.next_ordinal) {
    throw BackendError("nccl world: " + what + " is issued before the group's ordinal " +
                       std::to_string(g.next_ordinal) +
                       "; NCCL matches calls by issue order, so a group's collectives must be "
                       "issued in their seq order");
  }
  ++g.next_ordinal;
  const auto size = static_cast<std::int32_t>(g.members.size());
  const exec::detail::WireLayout layout = exec::detail::wire_layout(collective, size);
  const std::int64_t element = exec::detail::element_bytes(layout.type);
  METRON_ASSERT(
      (layout.input_elements() + layout.output_elements()) * element <= impl_->buffer_bytes,
      "nccl world: " + what + " was not prepared");
  char* base = static_cast<char*>(impl_->buffer);
  void* in = base;
  void* out = base + layout.input_elements() * element;
  const ncclDataType_t type = nccl_type(collective.dtype);
  const auto count = [](std::int64_t elements) { return static_cast<std::size_t>(elements); };
  for (std::int32_t call = 0; call < layout.calls; ++call) {
    switch (collective.op) {
      case ir::CollectiveOp::kAllReduce:
        check(ncclAllReduce(in, out, count(layout.call_elements), type, ncclSum, g.comm, stream),
              "ncclAllReduce", what);
        break;
      case ir::CollectiveOp::kReduceScatter:
        check(
            ncclReduceScatter(in, out, count(layout.chunk_elements), type, ncclSum, g.comm, stream),
            "ncclReduceScatter", what);
        break;
      case ir::CollectiveOp::kAllGather:
        check(ncclAllGather(in, out, count(layout.chunk_elements), type, g.comm, stream),
              "ncclAllGather", what);
        break;
      case ir::CollectiveOp::kReduce:
        check(ncclReduce(in, out, count(layout.call_elements), type, ncclSum,
                         impl_->comm_rank(g, collective.root.value()), g.comm, stream),
              "ncclReduce", what);
        break;
      case ir::CollectiveOp::kBroadcast:
        check(ncclBroadcast(in, out, count(layout.call_elements), type,
                            impl_->comm_rank(g, collective.root.value()), g.comm, stream),
              "ncclBroadcast", what);
        break;
      case ir::CollectiveOp::kAllToAll: {
        check(ncclGroupStart(), "ncclGroupStart", what);
        for (std::int32_t peer = 0; peer < size; ++peer) {
          const std::int64_t offset = peer * layout.chunk_elements * element;
          check(ncclSend(base + offset, count(layout.chunk_elements), type, peer, g.comm, stream),
                "ncclSend", what);
          check(ncclRecv(static_cast<char*>(out) + offset, count(layout.chunk_elements), type, peer,
                         g.comm, stream),
                "ncclRecv", what);
        }
        check(ncclGroupEnd(), "ncclGroupEnd", what);
        break;
      }
    }
  }
}

void NcclWorld::send(std::int32_t peer, std::int64_t bytes, CUstream_st* stream) {
  const std::string what =
      "send of " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer);
  METRON_ASSERT(bytes <= impl_->buffer_bytes, "nccl world: " + what + " was not prepared");
  check(ncclGroupStart(), "ncclGroupStart", what);
  const auto comm = impl_->send_comms.find(peer);
  if (comm == impl_->send_comms.end()) {
    throw InvalidConfig("nccl world: rank " + std::to_string(impl_->rank) +
                        " has no transfer planned to rank " + std::to_string(peer));
  }
  check(
      ncclSend(impl_->buffer, static_cast<std::size_t>(bytes), ncclUint8, 1, comm->second, stream),
      "ncclSend", what);
  check(ncclGroupEnd(), "ncclGroupEnd", what);
}

void NcclWorld::recv(std::int32_t peer, std::int64_t bytes, CUstream_st* stream) {
  const std::string what =
      "receive of " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer);
  METRON_ASSERT(bytes <= impl_->buffer_bytes, "nccl world: " + what + " was not prepared");
  check(ncclGroupStart(), "ncclGroupStart", what);
  const auto comm = impl_->receive_comms.find(peer);
  if (comm == impl_->receive_comms.end()) {
    throw InvalidConfig("nccl world: rank " + std::to_string(impl_->rank) +
                        " has no transfer planned from rank " + std::to_string(peer));
  }
  check(
      ncclRecv(impl_->buffer, static_cast<std::size_t>(bytes), ncclUint8, 0, comm->second, stream),
      "ncclRecv", what);
  check(ncclGroupEnd(), "ncclGroupEnd", what);
}

std::string NcclWorld::async_error() const {
  std::string out;
  const auto poll = [&out](ncclComm_t comm, const std::string& name) {
    if (comm == nullptr) return;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    if (status != ncclSuccess) state = status;
    if (state == ncclSuccess || state == ncclInProgress) return;
    if (!out.empty()) out += "; ";
    out += name + ": " + ncclGetErrorString(state);
  };
  poll(impl_->world, "world");
  for (const auto& [to, comm] : impl_->send_comms) poll(comm, pair_key(impl_->rank, to));
  for (const auto& [from, comm] : impl_->receive_comms) poll(comm, pair_key(from, impl_->rank));
  for (std::size_t g = 0; g < impl_->groups.size(); ++g) {
    poll(impl_->groups[g].comm, "group " + std::to_string(g));
  }
  return out;
}

void NcclWorld::abort() noexcept {
  for (auto* comms : {&impl_->send_comms, &impl_->receive_comms}) {
    for (auto& [peer, comm] : *comms) static_cast<void>(ncclCommAbort(comm));
    comms->clear();
  }
  for (Group& g : impl_->groups) {
    if (g.comm != nullptr) static_cast<void>(ncclCommAbort(g.comm));
    g.comm = nullptr;
  }
  if (impl_->world != nullptr) static_cast<void>(ncclCommAbort(impl_->world));
  impl_->world = nullptr;
}

}  // namespace metron::exec::cuda
