// SDP_HOST_DEVICE marks the small math that is written once and runs on both devices
// ("one definition of the small math"): the CPU compiles it as an inline function
// inside its vectorized OpenMP loops, nvcc as a __host__ __device__ function inside the CUDA
// kernels. The CPU tests therefore exercise the very arithmetic the GPU runs; only launch
// shapes, streams and copies are GPU-only.
//
// Rules for such functions: scalars in and out (no pointers to device-specific memory), no
// std:: calls that have no device twin (std::sqrt/std::exp of float are fine: nvcc maps them),
// no exceptions, no allocation.
#pragma once

#if defined(__CUDACC__)
#define SDP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SDP_HOST_DEVICE inline
#endif
