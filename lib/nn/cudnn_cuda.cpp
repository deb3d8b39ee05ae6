// cuDNN handles, workspaces and descriptors (cudnn_cuda.hpp).
#include "nn/cudnn_cuda.hpp"

#include <climits>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "nn/context_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"

namespace sdp::nn::cuda {

namespace {
struct CudnnState {
  cudnnHandle_t handle = nullptr;
  CudaBuffer workspace;
  ~CudnnState() {
    if (handle != nullptr) cudnnDestroy(handle);
  }
};

CudnnState& cudnn_state(Context& ctx) {
  std::shared_ptr<void>& slot = stream_attachment(ctx, "cudnn");
  if (!slot) {
    auto state = std::make_shared<CudnnState>();
    check_cudnn(cudnnCreate(&state->handle), "cudnnCreate");
    check_cudnn(cudnnSetStream(state->handle, stream_of(ctx)), "cudnnSetStream");
    slot = state;
  }
  return *static_cast<CudnnState*>(slot.get());
}
}  // namespace

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

cudnnHandle_t cudnn_handle(Context& ctx) { return cudnn_state(ctx).handle; }

void reserve_cudnn_workspace(Context& ctx, std::size_t bytes) {
  const MemoryPurposeScope purpose(MemoryPurpose::kWorkspace);
  if (bytes > 0) cudnn_state(ctx).workspace.reserve(ctx.device, bytes);
}

Workspace cudnn_workspace(Context& ctx) {
  CudnnState& state = cudnn_state(ctx);
  return {state.workspace.get(), state.workspace.bytes()};
}

void release_cudnn_workspace(Context& ctx) {
  if (const std::shared_ptr<void>& slot = stream_attachment(ctx, "cudnn"))
    static_cast<CudnnState*>(slot.get())->workspace.release();
}

}  // namespace sdp::nn::cuda

namespace sdp::nn {
void release_shared_scratch_cuda(Context& ctx) { cuda::release_cudnn_workspace(ctx); }
}  // namespace sdp::nn

namespace sdp::nn::cuda {

void OperationWorkspace::configure(Context& ctx, std::size_t bytes, bool planned) {
  planned_ = planned && bytes > 0;
  bytes_ = bytes;
  if (planned_)
    buffer_.configure(ctx.device, bytes, /*planned=*/true);
  else
    reserve_cudnn_workspace(ctx, bytes);
}

void OperationWorkspace::plan(GradientPlan& plan) {
  if (planned_) buffer_.write(plan);
}

Workspace OperationWorkspace::get(Context& ctx) {
  if (!planned_) return cudnn_workspace(ctx);
  const MemoryPurposeScope purpose(MemoryPurpose::kWorkspace);  // a layer used without its plan (tests)
  return {buffer_.get(), bytes_};
}

int to_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX)
    throw std::invalid_argument(std::string(what) + ": dimension " + std::to_string(value) +
                                " is outside cuDNN's int range");
  return static_cast<int>(value);
}

TensorDescriptor::TensorDescriptor() {
  check_cudnn(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
}
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDNN_DATA_FLOAT;
    case DType::kF16: return CUDNN_DATA_HALF;
    case DType::kBF16: return CUDNN_DATA_BFLOAT16;
  }
  throw std::logic_error(std::string("no cuDNN type for ") + dtype_name(dtype));
}

void TensorDescriptor::set_nchw(const Shape& shape, DType dtype) {
  if (shape.size() != 4) throw std::invalid_argument("cuDNN tensor: expected [N, C, H, W], got " + shape_str(shape));
  check_cudnn(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, cudnn_type(dtype), to_int(shape[0], "N"),
                                         to_int(shape[1], "C"), to_int(shape[2], "H"), to_int(shape[3], "W")),
              "cudnnSetTensor4dDescriptor");
}

void TensorDescriptor::set_nhwc(const Shape& shape, DType dtype) {
  if (shape.size() != 4) throw std::invalid_argument("cuDNN tensor: expected [N, C, H, W], got " + shape_str(shape));
  check_cudnn(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NHWC, cudnn_type(dtype), to_int(shape[0], "N"),
                                         to_int(shape[1], "C"), to_int(shape[2], "H"), to_int(shape[3], "W")),
              "cudnnSetTensor4dDescriptor");
}

void TensorDescriptor::set_channels(int64_t channels, DType dtype) {
  check_cudnn(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, cudnn_type(dtype), 1, to_int(channels, "C"), 1, 1),
              "cudnnSetTensor4dDescriptor");
}

FilterDescriptor::FilterDescriptor() {
  check_cudnn(cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor");
}
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }

void FilterDescriptor::set_oihw(int out, int in, int kh, int kw, DType dtype) {
  check_cudnn(cudnnSetFilter4dDescriptor(desc_, cudnn_type(dtype), CUDNN_TENSOR_NCHW, out, in, kh, kw),
              "cudnnSetFilter4dDescriptor");
}

void FilterDescriptor::set_ohwi(int out, int in, int kh, int kw, DType dtype) {
  check_cudnn(cudnnSetFilter4dDescriptor(desc_, cudnn_type(dtype), CUDNN_TENSOR_NHWC, out, in, kh, kw),
              "cudnnSetFilter4dDescriptor");
}

ReluDescriptor::ReluDescriptor() {
  check_cudnn(cudnnCreateActivationDescriptor(&desc_), "cudnnCreateActivationDescriptor");
  check_cudnn(cudnnSetActivationDescriptor(desc_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
              "cudnnSetActivationDescriptor");
}
ReluDescriptor::~ReluDescriptor() { cudnnDestroyActivationDescriptor(desc_); }

ConvolutionDescriptor::ConvolutionDescriptor() {
  check_cudnn(cudnnCreateConvolutionDescriptor(&desc_), "cudnnCreateConvolutionDescriptor");
}
ConvolutionDescriptor::~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }

void ConvolutionDescriptor::set(int padding, int stride, DType data, bool tf32) {
  check_cudnn(cudnnSetConvolution2dDescriptor(desc_, padding, padding, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor");
  check_cudnn(cudnnSetConvolutionMathType(desc_, data == DType::kF32 && !tf32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
              "cudnnSetConvolutionMathType");
}

PoolingDescriptor::PoolingDescriptor() {
  check_cudnn(cudnnCreatePoolingDescriptor(&desc_), "cudnnCreatePoolingDescriptor");
}
PoolingDescriptor::~PoolingDescriptor() { cudnnDestroyPoolingDescriptor(desc_); }

void PoolingDescriptor::set(cudnnPoolingMode_t mode, int window_h, int window_w, int padding, int stride) {
  check_cudnn(cudnnSetPooling2dDescriptor(desc_, mode, CUDNN_PROPAGATE_NAN, window_h, window_w, padding, padding,
                                          stride, stride),
              "cudnnSetPooling2dDescriptor");
}

}  // namespace sdp::nn::cuda
