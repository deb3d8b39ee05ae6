#include "distributed/socket_ring.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "core/log.hpp"
#include "core/socket_io.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/reduce_kernels.hpp"
#include "distributed/ring_schedule.hpp"

namespace sdp {

namespace {

// Incoming data is added in segments of this size, while the next ones arrive.
constexpr int64_t kSegmentBytes = 256 << 10;
constexpr int kAddressWidth = 64;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string pick_address() {
  const char* wanted = std::getenv("SDP_SOCKET_IFNAME");
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "127.0.0.1";
  std::string found;
  for (struct ifaddrs* p = list; p && found.empty(); p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !(p->ifa_flags & IFF_UP)) continue;
    const std::string name = p->ifa_name;
    if (wanted && *wanted) {
      if (!starts_with(name, wanted)) continue;
    } else if ((p->ifa_flags & IFF_LOOPBACK) || starts_with(name, "docker") || starts_with(name, "br-") ||
               starts_with(name, "veth") || starts_with(name, "virbr")) {
      continue;
    }
    char ip[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr, ip, sizeof ip);
    found = ip;
  }
  freeifaddrs(list);
  return found.empty() ? "127.0.0.1" : found;
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // segments go out at once
}

// Connects with a timeout; -1 on failure.
int connect_to(const std::string& ip, int port, int timeout_ms) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &address.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t len = sizeof error;
  if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
    close(fd);
    return -1;
  }
  // Back to blocking: the transfers block by design (the kernel wakes us when data comes).
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

[[noreturn]] void fail(const std::string& what, int error) {
  throw RuntimeError("inter-node sockets: " + what + ": " + std::strerror(error) +
                     " (a rank on another node failed or the network dropped; SDP_INTER_TRANSPORT=mpi uses MPI instead)");
}

void send_all(int fd, const char* data, int64_t bytes) {
  if (const int error = send_fully(fd, data, static_cast<std::size_t>(bytes))) fail("send", error);
}

void recv_all(int fd, char* data, int64_t bytes) {
  const int64_t got = recv_fully(fd, data, static_cast<std::size_t>(bytes));
  if (got < 0) fail("recv", static_cast<int>(-got));
  if (got < bytes) fail("recv", ECONNRESET);  // the peer closed mid-message
}

// Listens on an ephemeral port of `ip`; the kernel completes connections to it from its
// backlog, so every rank can connect before anyone calls accept(). Returns the socket (or -1)
// and sets *port (0 when it could not listen).
int listen_on(const std::string& ip, int* port) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  socklen_t len = sizeof address;
  *port = 0;
  if (listener >= 0 && bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      listen(listener, 4) == 0 && getsockname(listener, reinterpret_cast<sockaddr*>(&address), &len) == 0)
    *port = ntohs(address.sin_port);
  return listener;
}

// Every rank's "ip:port" gathered over `inter`; returns the one of rank (r + 1) % n.
std::string right_neighbour_address(const std::string& mine, MPI_Comm inter, int r, int n) {
  char text[kAddressWidth] = {0};
  std::strncpy(text, mine.c_str(), kAddressWidth - 1);
  std::vector<char> all(static_cast<std::size_t>(kAddressWidth) * n);
  SDP_MPI_CHECK(MPI_Allgather(text, kAddressWidth, MPI_CHAR, all.data(), kAddressWidth, MPI_CHAR, inter));
  return std::string(&all[static_cast<std::size_t>((r + 1) % n) * kAddressWidth]);
}

}  // namespace

std::string inter_transport_from_env() {
  const char* v = std::getenv("SDP_INTER_TRANSPORT");
  return v && std::string(v) == "mpi" ? "mpi" : "sockets";
}

std::unique_ptr<SocketRing> SocketRing::create(MPI_Comm inter, MPI_Comm world) {
  // Sockets only when every rank wants them (SDP_INTER_TRANSPORT may differ between hosts).
  int wanted = inter_transport_from_env() == "sockets", all_want = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&wanted, &all_want, 1, MPI_INT, MPI_MIN, world));
  if (!all_want) return nullptr;
  std::unique_ptr<SocketRing> ring(new SocketRing());
  SDP_MPI_CHECK(MPI_Comm_rank(inter, &ring->rank_));
  SDP_MPI_CHECK(MPI_Comm_size(inter, &ring->size_));
  const int n = ring->size_, r = ring->rank_;

  const std::string ip = pick_address();
  int port = 0;
  const int listener = listen_on(ip, &port);
  ring->address_ = ip + ":" + std::to_string(port);
  const std::string right = right_neighbour_address(ring->address_, inter, r, n);
  const std::size_t colon = right.rfind(':');
  const int right_port = std::atoi(right.c_str() + colon + 1);
  int ok = port > 0 && right_port > 0;
  if (ok) ring->right_fd_ = connect_to(right.substr(0, colon), right_port, 10000);
  ok = ok && ring->right_fd_ >= 0;
  if (ok) {  // introduce myself, so the acceptor can check who connected
    const int32_t me = r;
    send_all(ring->right_fd_, reinterpret_cast<const char*>(&me), sizeof me);
  }
  int all_ok = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world));
  if (all_ok) {
    ring->left_fd_ = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    int32_t who = -1;
    if (ring->left_fd_ >= 0) recv_all(ring->left_fd_, reinterpret_cast<char*>(&who), sizeof who);
    ok = who == (r + n - 1) % n;
    SDP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world));
  }
  if (listener >= 0) close(listener);
  if (!all_ok) {  // the destructor closes what was opened
    int world_rank = 0;
    MPI_Comm_rank(world, &world_rank);
    if (world_rank == 0)
      log_warn("the inter-node sockets of the hierarchical AllReduce could not connect; it "
               "uses MPI_Allreduce between nodes instead (slower on TCP: set "
               "SDP_SOCKET_IFNAME to the interface the hosts share)");
    return nullptr;
  }
  tune(ring->right_fd_);
  tune(ring->left_fd_);
  return ring;
}

SocketRing::~SocketRing() {
  if (right_fd_ >= 0) close(right_fd_);
  if (left_fd_ >= 0) close(left_fd_);
}

void SocketRing::allreduce(const CommBuffer& buffer) {
  const int n = size_, r = rank_;
  if (n == 1 || buffer.count == 0) return;
  if (!buffer.device.is_cpu()) throw std::logic_error("SocketRing::allreduce: host buffers only");
  const std::vector<int64_t> counts = split_counts(buffer.count, n);
  const std::vector<int64_t> offsets = part_offsets(counts);
  const int64_t esize = buffer.element_size();
  const int64_t segment = std::max<int64_t>(1, kSegmentBytes / esize);
  scratch_.resize(static_cast<std::size_t>(segment * esize));

  // One ring step: my part `send_part` goes right while part `recv_part` comes from the
  // left, added into mine (reduce) or stored in place (gather) segment by segment.
  auto step = [&](int send_part, int recv_part, bool reduce) {
    const char* out = buffer.slice(offsets[send_part], 0).bytes();
    const int64_t out_bytes = counts[send_part] * esize;
    int send_error = 0;
    std::thread sender = start_thread([&] { send_error = send_fully(right_fd_, out, static_cast<std::size_t>(out_bytes)); });
    try {
      for (int64_t i = 0; i < counts[recv_part]; i += segment) {
        const int64_t k = std::min(segment, counts[recv_part] - i);
        char* dst = buffer.slice(offsets[recv_part] + i, 0).bytes();
        if (reduce) {
          recv_all(left_fd_, scratch_.data(), k * esize);
          add_into(buffer.dtype, dst, scratch_.data(), k);
        } else {
          recv_all(left_fd_, dst, k * esize);
        }
      }
    } catch (...) {
      shutdown(right_fd_, SHUT_RDWR);  // unblocks the sender; the ring is unusable now
      sender.join();
      throw;
    }
    sender.join();
    if (send_error) fail("send", send_error);
    bytes_sent_ += out_bytes;
  };
  // The ring's schedule (ring_schedule.hpp): reduce-scatter, then allgather.
  for (int s = 0; s < n - 1; ++s) {
    const ring::Step at = ring::reduce_scatter_step(r, n, s);
    step(at.send_part, at.recv_part, true);
  }
  for (int s = 0; s < n - 1; ++s) {
    const ring::Step at = ring::allgather_step(r, n, s);
    step(at.send_part, at.recv_part, false);
  }
}

SocketRingCommunicator::SocketRingCommunicator(std::unique_ptr<SocketRing> ring, std::shared_ptr<Communicator> group)
    : ring_(std::move(ring)), group_(std::move(group)) {
  if (!ring_ || !group_ || group_->size() != ring_->size() || group_->rank() != ring_->rank())
    throw std::logic_error("SocketRingCommunicator: the ring and the group must span the same ranks");
}

std::shared_ptr<Work> SocketRingCommunicator::allreduce(const CommBuffer& buffer, const AllreduceOptions& options) {
  ring_->allreduce(buffer);
  if (options.op == ReduceOp::kAvg) scale_in_place(buffer.dtype, buffer.data, buffer.count, 1.0f / size());
  return completed_work();
}

}  // namespace sdp
