// CUDA-typed helpers of nn/'s CUDA files (private: included only by *.cu, *_cuda.cpp and
// other *_cuda.hpp that are themselves private). Every CUDA, cuBLAS and cuDNN call is
// checked and a failure is an sdp::RuntimeError naming the call and the library's text.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "core/grid_stride_cuda.hpp"
#include "nn/context.hpp"

namespace sdp::nn::cuda {

void check(cudaError_t status, const char* call);
// After a kernel launch: a bad configuration shows up in cudaGetLastError.
void check_launch(const char* kernel);

// The cudaStream_t of ctx's Stream (a CUDA context's stream is always a CudaStream).
cudaStream_t stream_of(Context& ctx);
// Per-stream state other CUDA files keep with ctx's stream under `key` (the cuBLAS and cuDNN
// handles bound to it, the workspace its layers share); released before the stream is.
std::shared_ptr<void>& stream_attachment(Context& ctx, const std::string& key);

// Element-wise kernels: core/grid_stride_cuda.hpp's launch shape.
using cuda_grid::grid_for;
using cuda_grid::kMaxBlocks;
using cuda_grid::kThreads;

}  // namespace sdp::nn::cuda
