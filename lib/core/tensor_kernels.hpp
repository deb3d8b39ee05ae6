// Tensor's whole-arena passes on the CPU (tensor.cpp: the per-step gradient check and the
// scale), compiled once per ISA (tensor_kernels_isa.cpp, core/cpu_dispatch.hpp). Same bits on
// every ISA: an OR of exponent tests, and one multiply per element.
#pragma once

#include <cstdint>

#include "core/cpu_dispatch.hpp"

namespace sdp {

struct TensorKernels {
  // 1 when one of x[0..n) is NaN or infinite, else 0.
  uint32_t (*non_finite)(const float* x, int64_t n);
  // x[i] *= factor
  void (*scale)(float* x, int64_t n, float factor);
};

SDP_ISA_KERNEL_TABLE(TensorKernels, tensor_kernels)

}  // namespace sdp
