#include "core/socket_io.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace sdp {

int send_fully(int fd, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return sent == 0 ? ECONNRESET : errno;
    p += sent;
    n -= static_cast<std::size_t>(sent);
  }
  return 0;
}

int64_t recv_fully(int fd, void* data, std::size_t n) noexcept {
  auto* p = static_cast<char*>(data);
  std::size_t have = 0;
  while (have < n) {
    const ssize_t got = ::recv(fd, p + have, n - have, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -static_cast<int64_t>(errno);
    if (got == 0) break;
    have += static_cast<std::size_t>(got);
  }
  return static_cast<int64_t>(have);
}

}  // namespace sdp
