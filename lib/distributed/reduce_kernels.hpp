// Host kernels the collectives are made of: elementwise add and scale for f32/f16/bf16,
// conversions between f32 and the 16-bit wire formats used by gradient compression, and
// the MPI datatype/op pair that reduces each of them.
//
// 16-bit sums are done in f32 and rounded once per add (round to nearest even), so a
// reduction over n ranks rounds n-1 times: the error bound the compression tests use.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "core/half_float.hpp"  // float_to_half & co., shared with the CUDA casts

namespace sdp {


// dst[i] += src[i]
void add_into(DType dtype, void* dst, const void* src, int64_t count);
// dst[i] = (dst[i] + src[i]) * scale   (the last add of an average, fused)
void add_scale_into(DType dtype, void* dst, const void* src, int64_t count, float scale);
// data[i] *= scale
void scale_in_place(DType dtype, void* data, int64_t count, float scale);
// dst = src * scale, converting from f32 to `dtype` (f16 / bf16 / f32).
void convert_from_f32(DType dtype, void* dst, const float* src, int64_t count, float scale);
// dst = src * scale, converting from `dtype` to f32.
void convert_to_f32(DType dtype, float* dst, const void* src, int64_t count, float scale);

// MPI datatype and SUM op for `dtype` (user-defined ops for the 16-bit formats, created on
// first use and freed at MPI_Finalize).
MPI_Datatype mpi_datatype(DType dtype);
MPI_Op mpi_sum_op(DType dtype);

}  // namespace sdp
