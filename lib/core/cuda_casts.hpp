// Casts between f32 and the 16-bit formats on a GPU, the overflow check of loss scaling and
// the element-wise sum of gradient accumulation,
// with half_float.hpp's arithmetic: a value cast on the GPU has the bits the CPU
// (reduce_kernels.hpp's convert_from_f32 / convert_to_f32) gives it. No CUDA type here; the
// functions exist only in a build with the CUDA backend (SDP_HAVE_CUDA). Each enqueues on
// `stream` (a CudaStream; null = CUDA's default stream) and returns without waiting.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "core/stream.hpp"

namespace sdp::cuda_casts {

// dst[i] = dtype(src[i] * scale); dtype f32, f16 or bf16. Device pointers.
void from_f32(DType dtype, void* dst, const float* src, int64_t count, float scale, Stream* stream);
// dst[i] = f32(src[i]) * scale.
void to_f32(DType dtype, float* dst, const void* src, int64_t count, float scale, Stream* stream);
// *flag (a device int) becomes nonzero when any of data[0..count) is NaN or infinite; it is
// never cleared here, so one flag can collect every bucket of a step.
void flag_nonfinite(const float* data, int64_t count, int* flag, Stream* stream);
// true when all of data[0..count) on cuda:`device` are finite, after the work queued on
// `stream` so far (it waits for the stream: the answer decides the step on the host).
bool all_finite(const float* data, int64_t count, int device, Stream* stream);
// dst[i] = (dst[i] + src[i]) * scale, as reduce_kernels.hpp's add_scale_into (gradient
// accumulation's sums on a GPU).
void add_scale(float* dst, const float* src, int64_t count, float scale, Stream* stream);
// Makes cuda:`device` the calling thread's device (where the casts above launch).
void set_device(int device);
// Waits until the work queued on `stream` so far is done.
void synchronize(Stream* stream);

}  // namespace sdp::cuda_casts
