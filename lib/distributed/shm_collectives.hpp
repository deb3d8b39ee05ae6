// Intra-node collectives that work directly in a SharedArena: each rank reduces its part of
// the buffer by loading every peer's copy of that part (no message, no staging copy), then
// stores the result into every peer's copy. Rank r only ever reads and writes part r of
// any segment between two sync() points, so the ranks never touch the same bytes and the
// only ordering needed is a sync() before (inputs final everywhere) and after (results
// arrived everywhere). Cost for S bytes on n ranks: each rank reads n*S/n and writes n*S/n,
// i.e. about 2S + 2S per node for n = 2 (plus write-allocate reads), one pass, no copies.
//
// Preconditions: `buffer` lies in the arena's segment of the calling rank, at the SAME
// offset on every rank of the node, with the same count and dtype (true for a gradient
// arena placed in the window, whose layout is the same on every replica). Collective over
// the node; the parts are `counts` (split_counts(count, local_size, kShmAlign) by default).
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/communicator.hpp"
#include "distributed/shared_arena.hpp"

namespace sdp {

// Part boundaries fall on multiples of 32 elements (128 B of f32, 64 B of a 16-bit type):
// ranks storing neighbouring parts never share a cache line.
constexpr int64_t kShmAlign = 32;

// Reduce-scatter + allgather fused: every rank's buffer ends up holding the sum (times
// `scale`, e.g. 1/size for an average) of all ranks' buffers.
void shm_allreduce(SharedArena& arena, const CommBuffer& buffer, float scale);

// The two halves, for the hierarchical algorithm that reduces across nodes in between:
// shm_reduce_part: sync, then MY part of my buffer := scale * sum over the node's buffers.
void shm_reduce_part(SharedArena& arena, const CommBuffer& buffer, const std::vector<int64_t>& counts, float scale);
// shm_broadcast_part: my part of my buffer -> my part of every peer's buffer, then sync.
void shm_broadcast_part(SharedArena& arena, const CommBuffer& buffer, const std::vector<int64_t>& counts);

}  // namespace sdp
