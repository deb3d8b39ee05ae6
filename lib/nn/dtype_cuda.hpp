// The element types of the CUDA layers (private: CUDA-typed, included only by CUDA files).
// Activations and their gradients are f32, or f16 / bf16 under mixed precision (the model's
// compute dtype); parameters, their gradients and BatchNorm's statistics stay f32. Kernels
// are templates over the storage type T and compute in f32: they read `float(x[i])` and write
// `T(value)` (CUDA's own round-to-nearest-even conversions), so one kernel body serves all.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "core/dtype.hpp"

namespace sdp::nn::cuda {

// f(static_cast<T*>(nullptr)) with T the storage type of `dtype`: a generic lambda's
// argument names the type (`using T = std::remove_pointer_t<decltype(tag)>`).
template <class F>
void with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(static_cast<float*>(nullptr)); return;
    case DType::kF16: f(static_cast<__half*>(nullptr)); return;
    case DType::kBF16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
  }
  throw std::logic_error(std::string("no CUDA storage type for ") + dtype_name(dtype));
}

template <class Tag>
using storage_t = std::remove_pointer_t<Tag>;

// A value of storage type T as f32, and back (device code).
template <class T>
__device__ __forceinline__ float load_f32(T v) {
  return static_cast<float>(v);
}
template <class T>
__device__ __forceinline__ T store_as(float v) {
  return static_cast<T>(v);
}

}  // namespace sdp::nn::cuda
