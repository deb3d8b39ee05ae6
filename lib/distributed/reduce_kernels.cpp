#include "distributed/reduce_kernels.hpp"

#include <cmath>
#include <cstring>
#include <mutex>

#include "distributed/mpi_check.hpp"

namespace sdp {

namespace {

template <typename Load, typename Store>
void add16(uint16_t* dst, const uint16_t* src, int64_t n, float scale, Load load, Store store) {
  for (int64_t i = 0; i < n; ++i) dst[i] = store((load(dst[i]) + load(src[i])) * scale);
}

}  // namespace

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

void add_into(DType dtype, void* dst, const void* src, int64_t count) {
  add_scale_into(dtype, dst, src, count, 1.0f);
}

void scale_in_place(DType dtype, void* data, int64_t count, float scale) {
  if (scale == 1.0f) return;
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

namespace {

void sum_half(void* in, void* inout, int* len, MPI_Datatype*) { add_into(DType::kF16, inout, in, *len); }
void sum_bfloat16(void* in, void* inout, int* len, MPI_Datatype*) { add_into(DType::kBF16, inout, in, *len); }

MPI_Op g_half_sum = MPI_OP_NULL, g_bf16_sum = MPI_OP_NULL;
std::once_flag g_ops_once;

void create_ops() {
  // Commutative: lets MPI pick the same algorithms it uses for MPI_SUM. The ops live until
  // MPI_Finalize frees them with the rest of MPI's state.
  SDP_MPI_CHECK(MPI_Op_create(&sum_half, 1, &g_half_sum));
  SDP_MPI_CHECK(MPI_Op_create(&sum_bfloat16, 1, &g_bf16_sum));
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) { return dtype == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }

MPI_Op mpi_sum_op(DType dtype) {
  if (dtype == DType::kF32) return MPI_SUM;
  std::call_once(g_ops_once, create_ops);
  return dtype == DType::kF16 ? g_half_sum : g_bf16_sum;
}

}  // namespace sdp
