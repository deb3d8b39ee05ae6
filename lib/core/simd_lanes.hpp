// Fixed-width vectors for the *_isa.cpp kernels (core/cpu_dispatch.hpp), as GCC's and Clang's
// vector extensions: 8 or 16 float or int32 lanes that each ISA's compilation maps onto its
// own registers (one AVX-512 register, two AVX2 ones, four SSE ones). The loops say which
// lanes go together, instead of hoping the vectorizer picks the same dimension.
//
// Always inlined: a copy compiled for AVX2 that another object linked would crash a baseline
// CPU (tests/isa_objects_test.sh).
#pragma once

#include <cstdint>
#include <cstring>

#define SDP_LANES_INLINE __attribute__((always_inline)) inline

namespace sdp::simd {

template <int kLanes>
struct Lanes;
template <>
struct Lanes<8> {
  typedef float F32 __attribute__((vector_size(32)));
  typedef int32_t I32 __attribute__((vector_size(32)));
  typedef uint8_t U8 __attribute__((vector_size(8)));
};
template <>
struct Lanes<16> {
  typedef float F32 __attribute__((vector_size(64)));
  typedef int32_t I32 __attribute__((vector_size(64)));
  typedef uint8_t U8 __attribute__((vector_size(16)));
};

// Unaligned loads and stores of a whole vector.
template <typename V, typename T>
SDP_LANES_INLINE V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T>
SDP_LANES_INLINE void store(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// x where mask is set (all ones), 0 elsewhere.
template <typename F, typename I>
SDP_LANES_INLINE F keep_where(I mask, F x) {
  return (F)((I)x & mask);  // vector casts reinterpret the bits
}

}  // namespace sdp::simd
