// The collectives' host loops (distributed/reduce_kernels.hpp), compiled once per ISA
// (core/cpu_dispatch.hpp). Element-wise and without contraction: every variant gives the same bits.
#include "distributed/reduce_kernels_isa.hpp"

#include "core/half_float.hpp"

namespace sdp::SDP_ISA_NAMESPACE {

namespace {

template <typename Load, typename Store>
void add16(uint16_t* dst, const uint16_t* src, int64_t n, float scale, Load load, Store store) {
  for (int64_t i = 0; i < n; ++i) dst[i] = store((load(dst[i]) + load(src[i])) * scale);
}

void add_scale_into(DType dtype, void* dst, const void* src, int64_t count, float scale) {
  switch (dtype) {
    case DType::kF32: {
      float* __restrict d = static_cast<float*>(dst);
      const float* __restrict s = static_cast<const float*>(src);
      if (scale == 1.0f) {
        for (int64_t i = 0; i < count; ++i) d[i] += s[i];
      } else {
        for (int64_t i = 0; i < count; ++i) d[i] = (d[i] + s[i]) * scale;
      }
      return;
    }
    case DType::kF16:
      add16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, scale, half_to_float,
            float_to_half);
      return;
    case DType::kBF16:
      add16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, scale, bfloat16_to_float,
            float_to_bfloat16);
      return;
  }
}

void scale_in_place(DType dtype, void* data, int64_t count, float scale) {
  switch (dtype) {
    case DType::kF32: {
      float* d = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] *= scale;
      return;
    }
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] = float_to_half(half_to_float(d[i]) * scale);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] = float_to_bfloat16(bfloat16_to_float(d[i]) * scale);
      return;
    }
  }
}

void convert_from_f32(DType dtype, void* dst, const float* src, int64_t count, float scale) {
  switch (dtype) {
    case DType::kF32: {
      float* d = static_cast<float*>(dst);
      for (int64_t i = 0; i < count; ++i) d[i] = src[i] * scale;
      return;
    }
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) d[i] = float_to_half(src[i] * scale);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) d[i] = float_to_bfloat16(src[i] * scale);
      return;
    }
  }
}

void convert_to_f32(DType dtype, float* dst, const void* src, int64_t count, float scale) {
  switch (dtype) {
    case DType::kF32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < count; ++i) dst[i] = s[i] * scale;
      return;
    }
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < count; ++i) dst[i] = half_to_float(s[i]) * scale;
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < count; ++i) dst[i] = bfloat16_to_float(s[i]) * scale;
      return;
    }
  }
}

}  // namespace

extern const ReduceKernels reduce_kernels = {add_scale_into, scale_in_place, convert_from_f32, convert_to_f32};

}  // namespace sdp::SDP_ISA_NAMESPACE
