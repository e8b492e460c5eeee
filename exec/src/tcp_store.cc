#include "metron/exec/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "metron/base/error.h"

namespace metron::exec {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSet = 's';
constexpr char kGet = 'g';
constexpr char kAdd = 'a';

std::string where(const Rendezvous& r) { return r.host + ":" + std::to_string(r.port); }

std::string errno_text(int err) { return std::strerror(err); }

void put_length(std::string& out, std::size_t length) {
  const auto n = static_cast<std::uint32_t>(length);
  for (const unsigned shift : {24U, 16U, 8U, 0U}) out += static_cast<char>((n >> shift) & 0xFFU);
}

std::uint32_t get_length(std::string_view in) {
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < 4; ++i) n = (n << 8U) | static_cast<unsigned char>(in[i]);
  return n;
}

/// Writes all of `data`; false when the peer is gone.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

void set_no_delay(int fd) {
  // The barrier is a request and a reply: Nagle's delay would add tens of ms to every iteration.
  const int one = 1;
  static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
}

void set_send_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  static_cast<void>(::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv));
}

/// The IPv4 address rank 0 listens on: the loopback address when the rendezvous host is one (a
/// local run opens nothing to the network), else every address.
in_addr_t listen_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return htonl(INADDR_ANY);
  }
  in_addr_t address = htonl(INADDR_ANY);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): getaddrinfo returns sockaddr*
  const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  if ((ntohl(in->sin_addr.s_addr) >> 24U) == 127U) address = in->sin_addr.s_addr;
  ::freeaddrinfo(found);
  return address;
}

}  // namespace

/// Rank 0's side of Note [tcp store]: one thread, one poll loop over the listening socket, a pipe
/// that stops it, and every client's connection.
class TcpStore::Server {
 public:
  explicit Server(const Rendezvous& rendezvous)
      : where_(where(rendezvous)), drain_timeout_(rendezvous.timeout) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw BackendError("the store at " + where_ + ": " + errno_text(errno));
    const int one = 1;
    static_cast<void>(::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(rendezvous.port));
    address.sin_addr.s_addr = listen_address(rendezvous.host);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes sockaddr*
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, SOMAXCONN) != 0 || ::pipe2(wake_.data(), O_CLOEXEC) != 0) {
      const int err = errno;
      close_all();
      throw BackendError("rank 0 cannot serve the store on port " +
                         std::to_string(rendezvous.port) + ": " + errno_text(err) +
                         "; expected a free port (--store-port)");
    }
    thread_ = std::thread([this] { loop(); });
  }

  /// Returns once every rank's connection has closed, or after the timeout: a rank that left
  /// the last barrier may still be reading its reply.
  ~Server() {
    static_cast<void>(::write(wake_[1], "x", 1));
    thread_.join();
    close_all();
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&&) = delete;
  Server& operator=(Server&&) = delete;

 private:
  struct Client {
    int fd = -1;
    std::string in;
    bool dead = false;
    bool rank = false;  ///< sent a valid request: a rank, whose leaving the drain waits for
  };

  void close_all() {
    for (const Client& c : clients_) ::close(c.fd);
    clients_.clear();
    for (int& fd : wake_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }

  void loop() {
    std::vector<pollfd> fds;
    std::optional<Clock::time_point> drain_until;  // set once the owner ends the server
    for (;;) {
      if (drain_until && (Clock::now() >= *drain_until ||
                          std::ranges::none_of(clients_, [](const Client& c) { return c.rank; }))) {
        return;
      }
      fds.assign({{.fd = wake_[0], .events = POLLIN, .revents = 0},
                  {.fd = listen_fd_, .events = POLLIN, .revents = 0}});
      for (const Client& c : clients_) fds.push_back({.fd = c.fd, .events = POLLIN, .revents = 0});
      const int wait_ms = drain_until
                              ? static_cast<int>(std::max<std::int64_t>(
                                    0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           *drain_until - Clock::now())
                                           .count()))
                              : -1;
      if (::poll(fds.data(), fds.size(), wait_ms) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0 && !drain_until) {
        // The owner ends the server: serve on until every rank has gone (Note [tcp store]).
        drain_until = Clock::now() + drain_timeout_;
        char byte = 0;
        static_cast<void>(::read(wake_[0], &byte, 1));
      }
      if ((fds[1].revents & POLLIN) != 0) accept_client();
      // Clients accepted just now are not in `fds`: they are polled next time round.
      for (std::size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents != 0) read_from(clients_[i - 2]);
      }
      drop_dead_clients();
    }
  }

  void accept_client() {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    set_no_delay(fd);
    clients_.push_back({.fd = fd});
  }

  void read_from(Client& c) {
    std::array<char, 65536> buffer{};
    const ssize_t got = ::recv(c.fd, buffer.data(), buffer.size(), 0);
    if (got < 0 && errno == EINTR) return;
    if (got <= 0) {
      c.dead = true;
      return;
    }
    c.in.append(buffer.data(), static_cast<std::size_t>(got));
    while (!c.dead && serve_one(c)) {
    }
  }

  /// Serves the first whole request in `c.in`; false when none is complete (or `c` is dead).
  bool serve_one(Client& c) {
    const std::string_view in = c.in;
    if (in.size() < 5) return false;
    const char op = in[0];
    const std::uint32_t key_length = get_length(in.substr(1));
    if ((op != kSet && op != kGet && op != kAdd) || key_length > kMaxKeyBytes) {
      c.dead = true;  // not a metron rank: drop it, the run goes on
      return false;
    }
    if (in.size() < 9 + std::size_t{key_length}) return false;
    const std::uint32_t value_length = get_length(in.substr(5 + key_length));
    if (value_length > kMaxValueBytes) {
      c.dead = true;
      return false;
    }
    const std::size_t total = 9 + std::size_t{key_length} + value_length;
    if (in.size() < total) return false;
    std::string key(in.substr(5, key_length));
    std::string value(in.substr(9 + key_length, value_length));
    c.in.erase(0, total);
    c.rank = true;
    if (op == kSet) {
      set(key, std::move(value));
    } else if (op == kGet) {
      if (const auto it = values_.find(key); it != values_.end()) {
        reply(c, it->second);
      } else {
        waiting_[key].push_back(c.fd);
      }
    } else {
      std::int64_t delta = 0;
      std::int64_t sum = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), delta);
      if (parsed.ec != std::errc{} || parsed.ptr != value.data() + value.size()) {
        c.dead = true;
        return false;
      }
      if (const auto it = values_.find(key); it != values_.end()) {
        std::from_chars(it->second.data(), it->second.data() + it->second.size(), sum);
      }
      sum += delta;
      set(key, std::to_string(sum));
      reply(c, values_[key]);
    }
    return true;
  }

  void set(const std::string& key, std::string value) {
    values_[key] = std::move(value);
    const auto waiting = waiting_.find(key);
    if (waiting == waiting_.end()) return;
    for (const int fd : waiting->second) {
      const auto client =
          std::ranges::find_if(clients_, [fd](const Client& c) { return c.fd == fd; });
      if (client != clients_.end()) reply(*client, values_[key]);
    }
    waiting_.erase(waiting);
  }

  void reply(Client& c, const std::string& value) {
    std::string frame;
    put_length(frame, value.size());
    if (!send_all(c.fd, frame) || !send_all(c.fd, value)) c.dead = true;
  }

  void drop_dead_clients() {
    for (const Client& c : clients_) {
      if (!c.dead) continue;
      for (auto& [key, fds] : waiting_) std::erase(fds, c.fd);
      ::close(c.fd);
    }
    std::erase_if(clients_, [](const Client& c) { return c.dead; });
  }

  std::string where_;
  std::chrono::milliseconds drain_timeout_;
  int listen_fd_ = -1;
  std::array<int, 2> wake_{-1, -1};
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<int>> waiting_;  // key -> connections in a get of it
  std::thread thread_;                               // last: started once the rest exists
};

TcpStore::TcpStore(const Rendezvous& rendezvous) : rendezvous_(rendezvous) {
  if (rendezvous.world_size < 1 || rendezvous.rank < 0 ||
      rendezvous.rank >= rendezvous.world_size) {
    throw InvalidConfig("the store: rank " + std::to_string(rendezvous.rank) +
                        " is outside the world of " + std::to_string(rendezvous.world_size) +
                        " ranks; expected 0 <= rank < world size");
  }
  if (rendezvous.port < 1 || rendezvous.port > 65535) {
    throw InvalidConfig("the store: port " + std::to_string(rendezvous.port) +
                        "; expected a port in [1, 65535]");
  }
  if (rendezvous.rank == 0) server_ = std::make_unique<Server>(rendezvous);
  const auto deadline = Clock::now() + rendezvous.timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "nobody answered";
  // Rank 0 may not listen yet (it starts with the others): retry until the timeout.
  while (fd_ < 0) {
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(rendezvous.host.c_str(),
                                       std::to_string(rendezvous.port).c_str(), &hints, &found);
    if (resolved != 0) {
      last_error = ::gai_strerror(resolved);
    } else {
      for (const addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        // Linux bounds a blocking connect by the send timeout: an unreachable host fails in 2 s,
        // not the kernel's minutes, and the loop tries again until the deadline.
        set_send_timeout(fd, std::chrono::milliseconds(2000));
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          fd_ = fd;
        } else {
          last_error = errno_text(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(found);
    }
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline) {
      throw BackendError("the store at " + where(rendezvous) + " did not answer within " +
                         std::to_string(rendezvous.timeout.count()) + " ms (" + last_error +
                         "); expected rank 0 to serve it there");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  set_no_delay(fd_);
  set_send_timeout(fd_, rendezvous.timeout);
}

TcpStore::~TcpStore() {
  // Rank 0's own connection first: the server then waits only for the other ranks.
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::string TcpStore::request(char op, const std::string& key, const std::string& value,
                              bool has_reply) {
  if (key.size() > kMaxKeyBytes || value.size() > kMaxValueBytes) {
    throw InvalidConfig("the store: key '" + key.substr(0, 64) + "' or its value is too long (" +
                        std::to_string(key.size()) + " and " + std::to_string(value.size()) +
                        " bytes); expected at most " + std::to_string(kMaxKeyBytes) + " and " +
                        std::to_string(kMaxValueBytes));
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  // No "rank N:" here: whoever reports the error names the rank (the launcher, the CLI).
  const std::string store = "the store at " + where(rendezvous_);
  if (fd_ < 0) throw BackendError(store + ": the connection was lost at an earlier failure");
  const auto lost = [&](const std::string& why) {
    // A late reply would be read as the answer to the next request: never use it again.
    ::close(fd_);
    fd_ = -1;
    return BackendError(store + ": " + why);
  };
  std::string frame(1, op);
  put_length(frame, key.size());
  frame += key;
  put_length(frame, value.size());
  if (!send_all(fd_, frame) || !send_all(fd_, value)) {
    throw lost("the connection broke sending '" + key + "' (rank 0 ended?)");
  }
  if (!has_reply) return {};
  const auto deadline = Clock::now() + rendezvous_.timeout;
  std::string reply;
  std::size_t wanted = 4;
  bool have_length = false;
  while (reply.size() < wanted) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      throw lost("no value for '" + key + "' within " +
                 std::to_string(rendezvous_.timeout.count()) +
                 " ms; expected every rank to reach it (did one fail or hang?)");
    }
    std::array<char, 65536> buffer{};
    const std::size_t chunk = std::min(buffer.size(), wanted - reply.size());
    const ssize_t got = ::recv(fd_, buffer.data(), chunk, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw lost("rank 0 closed the store while this rank waited for '" + key + "'");
    reply.append(buffer.data(), static_cast<std::size_t>(got));
    if (!have_length && reply.size() == 4) {
      wanted = get_length(reply);
      reply.clear();
      have_length = true;
      if (wanted > kMaxValueBytes) throw lost("a garbled reply for '" + key + "'");
    }
  }
  return reply;
}

void TcpStore::store_set(const std::string& key, const std::string& value) {
  static_cast<void>(request(kSet, "user/" + key, value, /*has_reply=*/false));
}

std::string TcpStore::store_get(const std::string& key) {
  return request(kGet, "user/" + key, {}, /*has_reply=*/true);
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  const std::string sum = request(kAdd, "user/" + key, std::to_string(delta), /*has_reply=*/true);
  std::int64_t value = 0;
  std::from_chars(sum.data(), sum.data() + sum.size(), value);
  return value;
}

void TcpStore::barrier() {
  const std::string name = "barrier/" + std::to_string(barriers_++);
  const std::string arrived = request(kAdd, name, "1", /*has_reply=*/true);
  if (arrived == std::to_string(rendezvous_.world_size)) {
    static_cast<void>(request(kSet, name + "/open", "1", /*has_reply=*/false));
  }
  try {
    static_cast<void>(request(kGet, name + "/open", {}, /*has_reply=*/true));
  } catch (const BackendError& e) {
    throw BackendError(std::string(e.what()) + "; " + arrived + " of " +
                       std::to_string(rendezvous_.world_size) +
                       " ranks had reached this barrier when this rank did");
  }
}

}  // namespace metron::exec
