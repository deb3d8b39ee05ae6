// Whole buffers over a stream socket: exactly n bytes sent or received, through partial
// transfers and EINTR. Errors are returned, not thrown, so that each caller names its own peer
// (and a sender thread may call them without an exception crossing it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sdp {

// 0 once all n bytes are sent; else the errno (ECONNRESET for a peer that has closed). Never
// raises SIGPIPE.
int send_fully(int fd, const void* data, std::size_t n) noexcept;

// The number of bytes received before the stream ended (n: all of them; 0: it had ended), or
// minus the errno of a failure.
int64_t recv_fully(int fd, void* data, std::size_t n) noexcept;

}  // namespace sdp
