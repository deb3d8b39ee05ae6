// cuDNN for the CUDA layers (private: CUDA-typed, included only by CUDA files). The legacy
// cudnnConvolution*/cudnnBatchNormalization*/cudnnPooling* API, which cuDNN 9 still ships.
//  * One handle per stream, kept with the CudaStream, created at the first configure.
//  * One workspace per stream shared by every layer on it (their calls run one after the
//    other on that stream): configure() grows it to what the layer's chosen algorithms
//    need; forward/backward only read its address, so nothing is allocated in the step loop.
//  * RAII descriptors; activations are described as plain NCHW, or as NHWC where a 16-bit
//    layer of a channels_last model computes on it natively (Context::channels_last).
#pragma once

#include <cudnn.h>

#include <cstddef>

#include "core/tensor.hpp"
#include "nn/context.hpp"
#include "nn/context_cuda.hpp"

namespace sdp::nn::cuda {

void check_cudnn(cudnnStatus_t status, const char* call);
cudnnHandle_t cudnn_handle(Context& ctx);

struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};
// Grows the stream's workspace to at least `bytes` (configure time only).
void reserve_cudnn_workspace(Context& ctx, std::size_t bytes);
Workspace cudnn_workspace(Context& ctx);
// Frees the stream's shared workspace once the device is idle (Model::configure under a lean
// plan, so each configuration holds only the workspace it uses).
void release_cudnn_workspace(Context& ctx);

// The cuDNN workspace of one operation of a layer (its forward, or its backward). Planned
// (a training configure under Context::lean_plan), it is a buffer of the GradientPlan's arena
// alive only during that operation; otherwise it is the stream's shared workspace, grown to
// the largest any layer asked for.
class OperationWorkspace {
 public:
  void configure(Context& ctx, std::size_t bytes, bool planned);
  // Back to none: the shared workspace, nothing planned.
  void reset() {
    planned_ = false;
    bytes_ = 0;
  }
  // Declares it in the plan's current operation (a planned one only).
  void plan(GradientPlan& plan);
  Workspace get(Context& ctx);

 private:
  bool planned_ = false;
  std::size_t bytes_ = 0;
  PlannedCudaBuffer buffer_;
};

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  // NCHW of a 4-D shape ([N, C, H, W]).
  void set_nchw(const Shape& shape, DType dtype = DType::kF32);
  // The same logical [N, C, H, W] stored channels-last (NHWC): what the 16-bit layers of a
  // channels_last model compute on (tensor-core kernels and the fused BatchNorm want it).
  void set_nhwc(const Shape& shape, DType dtype);
  // [1, C, 1, 1] (a per-channel bias).
  void set_channels(int64_t channels, DType dtype = DType::kF32);
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  // OIHW (PyTorch's layout, as the arena holds it).
  void set_oihw(int out, int in, int kh, int kw, DType dtype = DType::kF32);
  // OHWI (cuDNN's NHWC filter format, KRSC): what its tensor-core kernels read with NHWC
  // activations. The layer keeps a cast, reordered copy; the arena stays OIHW.
  void set_ohwi(int out, int in, int kh, int kw, DType dtype);
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  // Cross-correlation (PyTorch's convolution), accumulated in f32. f32 data: CUDNN_FMA_MATH,
  // no TF32 tensor cores (CUDNN_DEFAULT_MATH allows TF32 for f32 data on A100 and later),
  // unless `tf32` (precision: tf32). f16/bf16 data (mixed precision): tensor-core math, which
  // is what it is for.
  void set(int padding, int stride, DType data = DType::kF32, bool tf32 = false);
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

class PoolingDescriptor {
 public:
  PoolingDescriptor();
  ~PoolingDescriptor();
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  void set(cudnnPoolingMode_t mode, int window_h, int window_w, int padding, int stride);
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

// A ReLU for cuDNN's fused BatchNorm (CUDNN_BATCHNORM_OPS_BN_ACTIVATION / _ADD_ACTIVATION).
class ReluDescriptor {
 public:
  ReluDescriptor();
  ~ReluDescriptor();
  ReluDescriptor(const ReluDescriptor&) = delete;
  ReluDescriptor& operator=(const ReluDescriptor&) = delete;
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

// int arguments of cuDNN's 4-D descriptors; throws for a dimension past INT_MAX.
int to_int(int64_t value, const char* what);
// cuDNN's name for an element type (f32, f16, bf16).
cudnnDataType_t cudnn_type(DType dtype);

}  // namespace sdp::nn::cuda
