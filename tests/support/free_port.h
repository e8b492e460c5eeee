#pragma once
// A TCP port on the loopback interface that nobody listens on right now, for the tests that start
// a store (the store binds it a moment later; the kernel does not hand it out again meanwhile
// unless the ephemeral range wraps).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace metron::testing {

inline std::int32_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes sockaddr*
  const bool ok = fd >= 0 &&
                  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot find a free port");
  return ntohs(address.sin_port);
}

}  // namespace metron::testing
