#include "metron/exec/gloo_world.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "gloo_group.h"
#include "gloo_world_test_access.h"
#include "metron/base/error.h"

namespace metron::exec {

using detail::error_text;

struct GlooWorld::Impl {
  Rendezvous rendezvous;
  // Declared in the order they are needed, so that they are destroyed users first, store last.
  c10::intrusive_ptr<c10d::Store> store;       // the TCPStore (rank 0 hosts it)
  c10::intrusive_ptr<c10d::Store> user_store;  // "user/": store_set/store_get
  std::shared_ptr<gloo::transport::Device> device;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> world;
  std::vector<std::unique_ptr<detail::GlooGroup>> groups;  // null where this rank is no member

  std::mutex p2p_mutex;
  std::map<std::int64_t, std::vector<at::Tensor>> p2p_pool;  // free send/recv buffers by size

  [[nodiscard]] std::string where() const {
    return "gloo rendezvous at " + rendezvous.host + ":" + std::to_string(rendezvous.port) +
           " (rank " + std::to_string(rendezvous.rank) + " of " +
           std::to_string(rendezvous.world_size) + ")";
  }

  detail::GlooGroup& group(std::int32_t index) {
    if (index < 0 || static_cast<std::size_t>(index) >= groups.size()) {
      throw InvalidConfig("gloo collective: group " + std::to_string(index) +
                          " does not exist; expected 0.." + std::to_string(groups.size() - 1));
    }
    if (!groups[static_cast<std::size_t>(index)]) {
      throw InvalidConfig("gloo collective: rank " + std::to_string(rendezvous.rank) +
                          " is not a member of group " + std::to_string(index));
    }
    return *groups[static_cast<std::size_t>(index)];
  }

  at::Tensor take(std::int64_t bytes) {
    {
      std::lock_guard lock(p2p_mutex);
      auto& free = p2p_pool[bytes];
      if (!free.empty()) {
        at::Tensor tensor = std::move(free.back());
        free.pop_back();
        return tensor;
      }
    }
    return at::zeros({bytes}, at::TensorOptions().dtype(at::kByte));
  }

  void give(std::int64_t bytes, at::Tensor tensor) {
    std::lock_guard lock(p2p_mutex);
    p2p_pool[bytes].push_back(std::move(tensor));
  }

  void check_peer(std::int32_t peer, const char* what) const {
    if (peer < 0 || peer >= rendezvous.world_size || peer == rendezvous.rank) {
      throw InvalidConfig(std::string("gloo ") + what + ": peer " + std::to_string(peer) +
                          " is not another rank of 0.." +
                          std::to_string(rendezvous.world_size - 1));
    }
  }

  /// A blocking send (or receive) of `tensor` to (from) `peer` on the world group; `size` says
  /// what it holds in the error ("4096 bytes", "512 floats").
  void transfer(bool sending, std::int32_t peer, const at::Tensor& tensor, std::int32_t tag,
                const std::string& size) {
    try {
      std::vector<at::Tensor> tensors{tensor};
      const auto work = sending ? world->send(tensors, peer, tag) : world->recv(tensors, peer, tag);
      work->wait(rendezvous.timeout);
    } catch (const std::exception& error) {
      throw BackendError(std::string(sending ? "gloo send of " : "gloo recv of ") + size +
                         (sending ? " to rank " : " from rank ") + std::to_string(peer) + " (tag " +
                         std::to_string(tag) + "): " + error_text(error));
    }
  }
};

namespace {

void validate(const Rendezvous& rendezvous, const std::vector<std::vector<std::int32_t>>& groups) {
  if (rendezvous.world_size < 1 || rendezvous.rank < 0 ||
      rendezvous.rank >= rendezvous.world_size || rendezvous.port < 0 || rendezvous.port > 65535) {
    throw InvalidConfig(
        "gloo rendezvous: expected 0 <= rank < world_size and a port in "
        "0..65535; got rank " +
        std::to_string(rendezvous.rank) + ", world_size " + std::to_string(rendezvous.world_size) +
        ", port " + std::to_string(rendezvous.port));
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::set<std::int32_t> seen;
    for (std::int32_t rank : groups[g]) {
      if (rank < 0 || rank >= rendezvous.world_size || !seen.insert(rank).second) {
        throw InvalidConfig("gloo group " + std::to_string(g) + ": rank " + std::to_string(rank) +
                            " is out of 0.." + std::to_string(rendezvous.world_size - 1) +
                            " or listed twice");
      }
    }
  }
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Every rank marks its arrival in the store and waits, up to the rendezvous timeout, for every
// other rank's mark. Without it a rank that never starts shows only as Gloo's "Socket Timeout"
// from the world group, after the store's timeout and Gloo's in a row (9 s for a 3 s timeout);
// with it the error names the ranks that never came, after one timeout.
void wait_for_every_rank(c10d::Store& store, const Rendezvous& rendezvous) {
  const auto key = [](std::int32_t rank) { return "joined/" + std::to_string(rank); };
  store.set(key(rendezvous.rank), std::vector<std::uint8_t>{1});
  std::vector<std::string> keys;
  for (std::int32_t r = 0; r < rendezvous.world_size; ++r) keys.push_back(key(r));
  const auto deadline = std::chrono::steady_clock::now() + rendezvous.timeout;
  while (!store.check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (std::int32_t r = 0; r < rendezvous.world_size; ++r) {
        if (!store.check({key(r)})) missing.push_back(std::to_string(r));
      }
      std::string list;
      for (const std::string& r : missing) list += (list.empty() ? "" : ", ") + r;
      const auto ms = rendezvous.timeout.count();
      // The caller adds where (host, port, rank) and what it was doing.
      throw std::runtime_error(
          std::to_string(missing.size()) + " of " + std::to_string(rendezvous.world_size) +
          " ranks did not join within " +
          (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") +
          " (rank" + (missing.size() == 1 ? " " : "s ") + list +
          "); expected one process per rank, each started with the same store address");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

GlooWorld::GlooWorld(const Rendezvous& rendezvous,
                     const std::vector<std::vector<std::int32_t>>& groups)
    : impl_(std::make_unique<Impl>()) {
  validate(rendezvous, groups);
  Impl& impl = *impl_;
  impl.rendezvous = rendezvous;
  std::string step = "connecting to the store";
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(rendezvous.port);
    options.isServer = rendezvous.rank == 0;
    options.numWorkers = static_cast<std::size_t>(rendezvous.world_size);
    // wait_for_every_rank below waits for the others and names who never came; c10d's own wait
    // would spend a timeout first and say nothing when it ran out.
    options.waitWorkers = false;
    // c10d 1.13 counts the connect timeout in whole seconds: below 1 s it gives up at once.
    options.timeout =
        std::max<std::chrono::milliseconds>(rendezvous.timeout, std::chrono::seconds(1));
    impl.store = c10::make_intrusive<c10d::TCPStore>(rendezvous.host, options);
    impl.user_store = c10::make_intrusive<c10d::PrefixStore>("user", impl.store);
    step = "waiting for every rank to join";
    wait_for_every_rank(*impl.store, rendezvous);
    step = "creating the Gloo device";
    // Local runs stay on the loopback; across hosts, Gloo binds this host's resolved address.
    impl.device = is_loopback(rendezvous.host)
                      ? c10d::ProcessGroupGloo::createDeviceForHostname(rendezvous.host)
                      : c10d::ProcessGroupGloo::createDefaultDevice();
    auto options_world = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
    options_world->devices = {impl.device};
    step = "creating the world group";
    impl.world = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("world", impl.store), rendezvous.rank,
        rendezvous.world_size, options_world);
    // In group order on every rank, so that no two ranks wait for each other's later group.
    impl.groups.resize(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& members = groups[g];
      if (std::find(members.begin(), members.end(), rendezvous.rank) == members.end()) continue;
      step = "creating group " + std::to_string(g);
      impl.groups[g] = std::make_unique<detail::GlooGroup>(static_cast<std::int32_t>(g), members,
                                                           rendezvous.rank, impl.store, impl.device,
                                                           rendezvous.timeout);
    }
  } catch (const metron::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw BackendError(impl.where() + ": " + step + ": " + error_text(error));
  }
}

GlooWorld::~GlooWorld() = default;

void GlooWorld::collective(std::int32_t group, std::int64_t ordinal,
                           const ir::Collective& collective) {
  impl_->group(group).run(ordinal, collective);
}

void GlooWorld::collective_floats(std::int32_t group, std::int64_t ordinal,
                                  const ir::Collective& collective, std::span<float> data) {
  if (data.empty()) {
    throw InvalidConfig("gloo collective_floats: no values; expected collective.bytes / 4");
  }
  impl_->group(group).run(ordinal, collective, data);
}

void GlooWorld::send(std::int32_t peer, std::int64_t bytes, std::int32_t tag) {
  if (bytes <= 0) return;
  impl_->check_peer(peer, "send");
  at::Tensor buffer = impl_->take(bytes);
  impl_->transfer(true, peer, buffer, tag, std::to_string(bytes) + " bytes");
  impl_->give(bytes, std::move(buffer));
}

void GlooWorld::recv(std::int32_t peer, std::int64_t bytes, std::int32_t tag) {
  if (bytes <= 0) return;
  impl_->check_peer(peer, "recv");
  at::Tensor buffer = impl_->take(bytes);
  impl_->transfer(false, peer, buffer, tag, std::to_string(bytes) + " bytes");
  impl_->give(bytes, std::move(buffer));
}

namespace {

/// A tensor over `data` (no copy): Gloo reads or writes the caller's memory.
at::Tensor float_view(std::span<const float> data) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): from_blob takes void*; a send reads it
  return at::from_blob(const_cast<float*>(data.data()), {static_cast<std::int64_t>(data.size())},
                       at::TensorOptions().dtype(at::kFloat));
}

}  // namespace

void GlooWorld::send_floats(std::int32_t peer, std::span<const float> data, std::int32_t tag) {
  if (data.empty()) return;
  impl_->check_peer(peer, "send");
  impl_->transfer(true, peer, float_view(data), tag, std::to_string(data.size()) + " floats");
}

void GlooWorld::recv_floats(std::int32_t peer, std::span<float> data, std::int32_t tag) {
  if (data.empty()) return;
  impl_->check_peer(peer, "recv");
  impl_->transfer(false, peer, float_view(data), tag, std::to_string(data.size()) + " floats");
}

void GlooWorld::barrier() {
  try {
    impl_->world->barrier()->wait();
  } catch (const std::exception& error) {
    throw BackendError("gloo barrier: " + error_text(error));
  }
}

void GlooWorld::store_set(const std::string& key, const std::string& value) {
  try {
    impl_->user_store->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    throw BackendError(impl_->where() + ": setting key '" + key + "': " + error_text(error));
  }
}

std::string GlooWorld::store_get(const std::string& key) {
  try {
    impl_->user_store->wait({key}, impl_->rendezvous.timeout);
    const std::vector<std::uint8_t> value = impl_->user_store->get(key);
    return {value.begin(), value.end()};
  } catch (const std::exception& error) {
    throw BackendError(impl_->where() + ": getting key '" + key + "': " + error_text(error));
  }
}

void GlooWorldTestAccess::write_input(GlooWorld& world, std::int32_t group,
                                      const ir::Collective& collective,
                                      const std::vector<std::byte>& bytes) {
  world.impl_->group(group).write_input(collective, bytes);
}

std::vector<std::byte> GlooWorldTestAccess::read_output(GlooWorld& world, std::int32_t group,
                                                        const ir::Collective& collective) {
  return world.impl_->group(group).read_output(collective);
}

}  // namespace metron::exec
