// The ring AllReduce's schedule (Patarasuk & Yuan 2009), written once for the ring over
// communicators (allreduce.cpp) and the socket ring across nodes (socket_ring.cpp). The buffer
// is cut into `size` parts; rank r sends to r + 1 and receives from r - 1.
#pragma once

namespace sdp::ring {

struct Step {
  int send_part;
  int recv_part;
};

// Reduce-scatter step s (0 .. size - 2): pass part (r - s) right and add part (r - s - 1) from
// the left into mine; after the last step part (r + 1) holds the full sum here.
inline Step reduce_scatter_step(int rank, int size, int s) {
  return {(rank - s + 2 * size) % size, (rank - s - 1 + 2 * size) % size};
}

// Allgather step s (0 .. size - 2): pass part (r + 1 - s) on and receive part (r - s) in place.
inline Step allgather_step(int rank, int size, int s) {
  return {(rank + 1 - s + 2 * size) % size, (rank - s + 2 * size) % size};
}

}  // namespace sdp::ring
