// Multi-tensor passes of the CPU optimizers, the CPU's counterpart of PyTorch's foreach /
// fused optimizers and apex's multi_tensor_apply: every parameter is updated in one OpenMP
// region over fixed-size chunks of the arenas, instead of one serial loop per tensor.
//
// A chunk never crosses a group (a parameter tensor, or a run of them sharing a weight decay),
// so each chunk's loop has one set of scalars and vectorizes. Chunks depend only on the
// store's layout, never on the thread count, and each element's arithmetic is the same
// function of its inputs whichever thread runs it: the update's bits do not depend on how
// the work is split. The per-tensor L2 norms of LARS and LAMB are summed by one thread per
// tensor in optim/norms.hpp's fixed order, for the same reason.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "core/parameter_store.hpp"
#include "optim/dense_update_kernels.hpp"

namespace sdp::multi_tensor {

// 16K floats: 64 KiB of each arena a chunk touches, so its 3-5 arenas stay in L2.
constexpr int64_t kChunkElements = int64_t{1} << 14;

struct Group {
  int64_t begin = 0;
  int64_t count = 0;
};

struct Chunk {
  int64_t begin = 0;
  int64_t count = 0;
  int32_t group = 0;  // index into the groups the chunks were made from
};

inline std::vector<Chunk> split_into_chunks(const std::vector<Group>& groups) {
  std::vector<Chunk> chunks;
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (int64_t off = 0; off < groups[g].count; off += kChunkElements)
      chunks.push_back({groups[g].begin + off, std::min(kChunkElements, groups[g].count - off),
                        static_cast<int32_t>(g)});
  return chunks;
}

// 1 when x is NaN or infinite (its exponent bits all ones), else 0. OR-ed over a loop it
// vectorizes, where a float test would not, and the order of the OR does not matter: the
// gradients' finiteness check rides along in the update's pass at no measurable cost.
inline uint32_t non_finite_bit(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
}

// The norms of LARS's and LAMB's trust ratios, called inside their parallel region (a
// worksharing loop of its own, with the barrier at its end): norms[2j] = ||a_j|| and
// norms[2j + 1] = ||b_j|| of every parameter tensor j that takes weight decay (the others
// take plain steps and need none). Each norm is summed by one thread in norms.hpp's fixed
// order, so the bits do not depend on the thread count; a tensor's two norms may go to two
// threads.
inline void decayed_tensor_norms(const std::deque<Param>& params, const float* a, const float* b, double* norms) {
  const int64_t n_params = static_cast<int64_t>(params.size());
#pragma omp for schedule(dynamic, 1)
  for (int64_t k = 0; k < 2 * n_params; ++k) {
    const Param& param = params[k / 2];
    if (!param.weight_decay) continue;
    norms[k] = dense_update_kernels().l2_norm((k % 2 == 0 ? a : b) + param.offset, shape_numel(param.shape));
  }
}

}  // namespace sdp::multi_tensor
