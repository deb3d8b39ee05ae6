// L2 norms of whole parameter tensors, for the layer-wise optimizers (LARS, LAMB).
#pragma once

#include <cmath>
#include <cstdint>

namespace sdp {

// sqrt(sum_i value(i)^2) for i in [0, n), summed in double over 8 interleaved partial sums
// (independent chains the compiler can keep in vector registers) that are then added in a
// fixed order: the same inputs give the same bits on every rank and every run, which
// bitwise resume relies on. Always inlined: the ISA variants of the optimizers' loops
// (dense_updates_isa.cpp) use it, and an out-of-line copy compiled for AVX2 there could be
// the one the whole program links (tests/isa_objects_test.sh).
template <typename Value>
__attribute__((always_inline)) inline double l2_norm_of(int64_t n, Value value) {
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const double x = value(i + k);
      part[k] += x * x;
    }
  for (; i < n; ++i) {
    const double x = value(i);
    part[0] += x * x;
  }
  double sum = 0;
  for (double s : part) sum += s;
  return std::sqrt(sum);
}

__attribute__((always_inline)) inline double l2_norm(const float* x, int64_t n) {
  return l2_norm_of(n, [x](int64_t i) { return x[i]; });
}

}  // namespace sdp
