// The ISA variants of distributed/reduce_kernels.hpp's loops (reduce_kernels_isa.cpp,
// core/cpu_dispatch.hpp): the functions of that header, one table per ISA.
#pragma once

#include <cstdint>

#include "core/cpu_dispatch.hpp"
#include "core/dtype.hpp"

namespace sdp {

struct ReduceKernels {
  void (*add_scale_into)(DType dtype, void* dst, const void* src, int64_t count, float scale);
  void (*scale_in_place)(DType dtype, void* data, int64_t count, float scale);
  void (*convert_from_f32)(DType dtype, void* dst, const float* src, int64_t count, float scale);
  void (*convert_to_f32)(DType dtype, float* dst, const void* src, int64_t count, float scale);
};

SDP_ISA_KERNEL_TABLE(ReduceKernels, reduce_kernels)

}  // namespace sdp
