#include "metron/exec/cuda/cuda_rank.h"

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/cuda/cuda_backend.h"
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/exec/cuda/nccl_world.h"
#include "metron/exec/rank_executor.h"
#include "metron/exec/rank_program.h"
#include "metron/exec/rank_run.h"
#include "metron/exec/tcp_store.h"

namespace metron::exec::cuda {
namespace {

constexpr const char* kNcclIdKey = "metron/nccl-unique-id";  // + "/world", "/p2p/3/4"

// The store carries text: the unique id's bytes as hex.
std::string to_hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4U];
    out += kDigits[b & 15U];
  }
  return out;
}

std::string from_hex(const std::string& text) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw BackendError("cuda run: NCCL's unique id arrived garbled through the store");
  };
  if (text.size() % 2 != 0) digit('?');
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    out += static_cast<char>(digit(text[i]) * 16 + digit(text[i + 1]));
  }
  return out;
}

}  // namespace

std::optional<MeasuredStep> run_cuda_rank(const ir::Graph& graph, const Rendezvous& rendezvous,
                                          int device, const RunOptions& options,
                                          const StatusSink& status) {
  if (rendezvous.world_size != graph.num_ranks()) {
    throw InvalidConfig("executor: the graph has " + std::to_string(graph.num_ranks()) +
                        " ranks; expected the world size to match, got " +
                        std::to_string(rendezvous.world_size));
  }
  if (options.iterations < 1 || options.warmup < 0) {
    throw InvalidConfig("executor: expected at least 1 measured iteration and no negative warm-up");
  }
  RankExecutor executor(graph, rank_program(graph, ir::RankId{rendezvous.rank}));
  set_hardware_queues(executor.program().hardware_queues);
  const CudaInfo info = query_cuda();
  if (device < 0 || device >= info.device_count) {
    throw InvalidConfig("--backend cuda: rank " + std::to_string(rendezvous.rank) + " needs GPU " +
                        std::to_string(device) + " of this machine, which has " +
                        std::to_string(info.device_count) + " visible" +
                        (info.error.empty() ? "" : " (" + info.error + ")") +
                        "; expected one GPU per rank");
  }
  status("connecting to the store at " + rendezvous.host + ":" + std::to_string(rendezvous.port));
  // The store carries the barriers, the measurements and NCCL's unique ids. On a failure it and
  // the backend stay alive (run_rank_iterations says why).
  auto world_owner = std::make_unique<TcpStore>(rendezvous);
  TcpStore& store = *world_owner;
  // ncclCommInitRank blocks until every rank joins it: meet at the store first, so that a rank
  // that never started fails the run within the timeout, saying how many ranks arrived.
  status("waiting at the store for all " + std::to_string(rendezvous.world_size) + " ranks");
  store.barrier();
  status("creating the NCCL communicators on GPU " + std::to_string(device));
  auto nccl = std::make_unique<NcclWorld>(
      rendezvous.rank, rendezvous.world_size, NcclWorld::plan_of(graph, rendezvous.rank),
      [&store](const std::string& key, const std::string& id) {
        const std::string name = std::string(kNcclIdKey) + "/" + key;
        if (!id.empty()) {
          store.store_set(name, to_hex(id));
          return id;
        }
        return from_hex(store.store_get(name));
      },
      device);
  CudaCompute compute({.device = device});
  status("preparing the compute tasks' tensors and the communication buffers");
  prepare_rank(graph, executor.program(), compute, nccl.get());
  auto backend = std::make_unique<CudaBackend>(executor.program(), compute, nccl.get(),
                                               options.timeout, device);
  try {
    return run_rank_iterations(graph, rendezvous.rank, rendezvous.world_size, store, executor,
                               *backend, options, status);
  } catch (...) {
    static_cast<void>(backend.release());
    static_cast<void>(nccl.release());
    static_cast<void>(world_owner.release());
    throw;
  }
}

}  // namespace metron::exec::cuda
