// CUDA kernels of cuda_casts.hpp: grid-stride loops over half_float.hpp's conversions.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/cuda_casts.hpp"
#include "core/cuda_check_cuda.hpp"
#include "core/error.hpp"
#include "core/half_float.hpp"
#include "core/grid_stride_cuda.hpp"
#include "core/stream_cuda.hpp"

namespace sdp::cuda_casts {

namespace {

using cuda_grid::grid_for;
using cuda_grid::kThreads;


cudaStream_t as_stream(Stream* stream) { return cuda_stream_of(stream); }

constexpr const char* kContext = "casts and checks on the GPU";

__global__ void add_scale_kernel(float* dst, const float* src, int64_t n, float scale) {
  // reduce_kernels.cpp's add_scale_into: (d + s) * 1 is d + s exactly.
  SDP_GRID_STRIDE(i, n) dst[i] = (dst[i] + src[i]) * scale;
}

__global__ void scale_f32_kernel(float* dst, const float* src, int64_t n, float scale) {
  SDP_GRID_STRIDE(i, n) dst[i] = src[i] * scale;
}
__global__ void f32_to_half_kernel(uint16_t* dst, const float* src, int64_t n, float scale) {
  SDP_GRID_STRIDE(i, n) dst[i] = float_to_half(src[i] * scale);
}
__global__ void f32_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n, float scale) {
  SDP_GRID_STRIDE(i, n) dst[i] = float_to_bfloat16(src[i] * scale);
}
__global__ void half_to_f32_kernel(float* dst, const uint16_t* src, int64_t n, float scale) {
  SDP_GRID_STRIDE(i, n) dst[i] = half_to_float(src[i]) * scale;
}
__global__ void bf16_to_f32_kernel(float* dst, const uint16_t* src, int64_t n, float scale) {
  SDP_GRID_STRIDE(i, n) dst[i] = bfloat16_to_float(src[i]) * scale;
}
__global__ void flag_nonfinite_kernel(const float* data, int64_t n, int* flag) {
  bool bad = false;
  SDP_GRID_STRIDE(i, n) bad = bad || !is_finite_float(data[i]);
  // A flag, not a count: the outcome is the same whatever order the blocks write in.
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(flag, 1);
}

}  // namespace

void from_f32(DType dtype, void* dst, const float* src, int64_t count, float scale, Stream* stream) {
  if (count <= 0) return;
  const unsigned blocks = grid_for(count);
  switch (dtype) {
    case DType::kF32:
      scale_f32_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(static_cast<float*>(dst), src, count, scale);
      break;
    case DType::kF16:
      f32_to_half_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(static_cast<uint16_t*>(dst), src, count, scale);
      break;
    case DType::kBF16:
      f32_to_bf16_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(static_cast<uint16_t*>(dst), src, count, scale);
      break;
    default:
      throw RuntimeError(std::string("cast on the GPU: no cast from f32 to ") + dtype_name(dtype));
  }
  check_launch("the f32 cast kernel launch", kContext);
}

void to_f32(DType dtype, float* dst, const void* src, int64_t count, float scale, Stream* stream) {
  if (count <= 0) return;
  const unsigned blocks = grid_for(count);
  switch (dtype) {
    case DType::kF32:
      scale_f32_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(dst, static_cast<const float*>(src), count, scale);
      break;
    case DType::kF16:
      half_to_f32_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(dst, static_cast<const uint16_t*>(src), count,
                                                                     scale);
      break;
    case DType::kBF16:
      bf16_to_f32_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(dst, static_cast<const uint16_t*>(src), count,
                                                                     scale);
      break;
    default:
      throw RuntimeError(std::string("cast on the GPU: no cast from ") + dtype_name(dtype) + " to f32");
  }
  check_launch("the f32 cast kernel launch", kContext);
}

void flag_nonfinite(const float* data, int64_t count, int* flag, Stream* stream) {
  if (count <= 0) return;
  flag_nonfinite_kernel<<<grid_for(count), kThreads, 0, as_stream(stream)>>>(data, count, flag);
  check_launch("the non-finite check kernel launch", kContext);
}

void add_scale(float* dst, const float* src, int64_t count, float scale, Stream* stream) {
  if (count <= 0) return;
  add_scale_kernel<<<grid_for(count), kThreads, 0, as_stream(stream)>>>(dst, src, count, scale);
  check_launch("the gradient sum kernel launch", kContext);
}

void set_device(int device) { check_cuda(cudaSetDevice(device), "cudaSetDevice", kContext); }

void synchronize(Stream* stream) {
  check_cuda(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize", kContext);
}

bool all_finite(const float* data, int64_t count, int device, Stream* stream) {
  if (count <= 0) return true;
  // One flag per device and thread, kept for the process: no allocation per check (it runs
  // on the gradients every step).
  thread_local std::map<int, int*> flags;
  int*& flag = flags[device];
  if (flag == nullptr) check_cuda(cudaMalloc(&flag, sizeof(int)), "cudaMalloc (non-finite flag)", kContext);
  const cudaStream_t s = as_stream(stream);
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), s), "cudaMemsetAsync (non-finite flag)", kContext);
  flag_nonfinite(data, count, flag, stream);
  int host = 0;
  check_cuda(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (non-finite flag)", kContext);
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (non-finite check)", kContext);
  return host == 0;
}

}  // namespace sdp::cuda_casts
