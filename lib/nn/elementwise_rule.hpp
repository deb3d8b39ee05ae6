// The per-element math of ReLU and the residual Add, written once for both devices
// (core/host_device.hpp). The CUDA twins (relu_cuda.cu, add_cuda.cu) run these in their
// kernels; the CPU twins stay on oneDNN's eltwise and binary primitives, whose results these
// reproduce (the device tests compare the two).
#pragma once

#include "core/host_device.hpp"

namespace sdp::nn {

// max(x, 0) that keeps a NaN (PyTorch's and oneDNN's relu propagate it).
SDP_HOST_DEVICE float relu_forward(float x) { return x > 0.0f || x != x ? x : 0.0f; }

// ReLU's input gradient from its OUTPUT y (relu'(x) == (y > 0)), so the input need not stay
// alive: oneDNN's eltwise_relu_use_dst_for_bwd.
SDP_HOST_DEVICE float relu_backward_from_output(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

SDP_HOST_DEVICE float residual_add(float a, float b) { return a + b; }

}  // namespace sdp::nn
