// The check of a CUDA runtime call's status that every CUDA source of sdp-train uses (private:
// CUDA-typed, included only by *.cu and *_cuda.cpp files). No allocation unless it fails, so
// it may guard calls in the step loop.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace sdp {

// Throws RuntimeError "[<context>: ]<call> failed: <error name> (<description>)" unless
// `status` is cudaSuccess; a non-sticky error is cleared first, so that a later call does not
// report it again.
inline void check_cuda(cudaError_t status, const char* call, const char* context = nullptr) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw RuntimeError((context != nullptr ? std::string(context) + ": " : std::string()) + call + " failed: " +
                     cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

// The last kernel launch's status (cudaGetLastError), named `launch`.
inline void check_launch(const char* launch, const char* context = nullptr) {
  check_cuda(cudaGetLastError(), launch, context);
}

}  // namespace sdp
