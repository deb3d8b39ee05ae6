// The cuBLAS handle of a context's stream (private: CUDA-typed, included only by CUDA files).
// One handle per stream, created at the first configure that asks, bound to the stream, with
// its own workspace so cuBLAS allocates nothing in the step loop.
#pragma once

#include <cublas_v2.h>

#include "nn/context.hpp"

namespace sdp::nn::cuda {

void check_cublas(cublasStatus_t status, const char* call);
// ctx's stream's handle, in CUBLAS_PEDANTIC_MATH: f32 GEMMs stay in f32 (no TF32 tensor
// cores, whatever NVIDIA_TF32_OVERRIDE says), so the CUDA layers match their CPU twins to
// f32 rounding. Mixed precision will ask for tensor-op math explicitly.
cublasHandle_t cublas_handle(Context& ctx);

}  // namespace sdp::nn::cuda
