#include "distributed/shm_collectives.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "distributed/reduce_kernels.hpp"

namespace sdp {

namespace {

// Elements per step: the chunk is reduced and then copied out while it is still in L2.
constexpr int64_t kChunkBytes = 64 * 1024;

void check(const SharedArena& arena, const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  if (!buffer.device.is_cpu() || !arena.holds(buffer.data, buffer.nbytes()))
    throw std::logic_error("shm collective: the buffer is not inside this rank's SharedArena segment");
  if (static_cast<int>(counts.size()) != arena.local_size())
    throw std::logic_error("shm collective: counts do not match the node size");
}

// Sum of every rank's copy of [begin, begin + n) into my copy, scaled: my copy first, then
// the peers in rank order (the same order on every rank: one writer per element anyway).
void reduce_range(SharedArena& arena, const CommBuffer& buffer, int64_t begin, int64_t n, float scale) {
  const int me = arena.local_rank(), peers = arena.local_size();
  void* mine = buffer.slice(begin, 0).data;
  if (peers == 1) {
    scale_in_place(buffer.dtype, mine, n, scale);
    return;
  }
  int added = 0;
  for (int r = 0; r < peers; ++r) {
    if (r == me) continue;
    ++added;
    const void* theirs = arena.peer_address(mine, r);
    if (added == peers - 1)
      add_scale_into(buffer.dtype, mine, theirs, n, scale);
    else
      add_into(buffer.dtype, mine, theirs, n);
  }
}

// Buffers at least this large do not stay in cache anyway: their copies to the peers
// use non-temporal stores, which skip the read-for-ownership of each destination line
// (a third less memory traffic for the copy).
constexpr int64_t kStreamingBytes = 4 << 20;

void copy_streaming(void* dst, const void* src, std::size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, bytes - i);
}

void copy_range_to_peers(SharedArena& arena, const CommBuffer& buffer, int64_t begin, int64_t n, bool streaming) {
  const int me = arena.local_rank(), peers = arena.local_size();
  const void* mine = buffer.slice(begin, 0).data;
  const auto bytes = static_cast<std::size_t>(n * buffer.element_size());
  // Start with the next rank: ranks pushing at once spread their stores over the peers.
  for (int k = 1; k < peers; ++k) {
    void* theirs = arena.peer_address(mine, (me + k) % peers);
    if (streaming)
      copy_streaming(theirs, mine, bytes);
    else
      std::memcpy(theirs, mine, bytes);
  }
}

}  // namespace

void shm_allreduce(SharedArena& arena, const CommBuffer& buffer, float scale) {
  const std::vector<int64_t> counts = split_counts(buffer.count, arena.local_size(), kShmAlign);
  check(arena, buffer, counts);
  const int64_t begin = part_offsets(counts)[arena.local_rank()];
  const int64_t mine = counts[arena.local_rank()];
  const int64_t chunk = kChunkBytes / buffer.element_size();
  const bool streaming = buffer.nbytes() >= kStreamingBytes;
  arena.sync();  // every rank's buffer is final before anyone reads it
  for (int64_t i = 0; i < mine; i += chunk) {
    const int64_t n = std::min(chunk, mine - i);
    reduce_range(arena, buffer, begin + i, n, scale);
    copy_range_to_peers(arena, buffer, begin + i, n, streaming);
  }
  // Non-temporal stores are weakly ordered: fence them before the release in sync().
  if (streaming) _mm_sfence();
  arena.sync();  // every part has arrived everywhere, and nobody still reads my segment
}

void shm_reduce_part(SharedArena& arena, const CommBuffer& buffer, const std::vector<int64_t>& counts, float scale) {
  check(arena, buffer, counts);
  const int64_t begin = part_offsets(counts)[arena.local_rank()];
  const int64_t mine = counts[arena.local_rank()];
  const int64_t chunk = kChunkBytes / buffer.element_size();
  arena.sync();  // inputs final everywhere
  for (int64_t i = 0; i < mine; i += chunk) reduce_range(arena, buffer, begin + i, std::min(chunk, mine - i), scale);
  // No sync here: peers read only their own parts, which I did not write.
}

void shm_broadcast_part(SharedArena& arena, const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  check(arena, buffer, counts);
  const int64_t begin = part_offsets(counts)[arena.local_rank()];
  // Safe without a sync before: a peer reads or writes only ITS part of my segment, never
  // mine, between shm_reduce_part's sync and the sync below.
  const bool streaming = buffer.nbytes() >= kStreamingBytes;
  copy_range_to_peers(arena, buffer, begin, counts[arena.local_rank()], streaming);
  if (streaming) _mm_sfence();  // weakly ordered stores complete before the release in sync()
  arena.sync();  // all parts arrived; nobody still reads my segment
}

}  // namespace sdp
