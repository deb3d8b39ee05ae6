#include <cstring>

#include "core/tensor_kernels.hpp"

namespace sdp::SDP_ISA_NAMESPACE {

namespace {

// A float is NaN or infinite exactly when its exponent bits are all ones. An integer OR over
// that test vectorizes (a float sum would not: without -ffast-math the compiler keeps its
// order, one add at a time).
uint32_t non_finite(const float* x, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any;
}

void scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace

extern const TensorKernels tensor_kernels = {non_finite, scale};

}  // namespace sdp::SDP_ISA_NAMESPACE
