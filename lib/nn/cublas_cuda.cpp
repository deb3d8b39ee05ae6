// cuBLAS handles per stream (cublas_cuda.hpp).
#include "nn/cublas_cuda.hpp"

#include <string>

#include "core/error.hpp"
#include "nn/context_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"

namespace sdp::nn::cuda {

namespace {
// cuBLAS's recommendation for Hopper is 32 MiB; our f32 GEMMs are small and single-stream.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{8} << 20;

struct CublasState {
  cublasHandle_t handle = nullptr;
  CudaBuffer workspace;
  ~CublasState() {
    if (handle != nullptr) cublasDestroy(handle);
  }
};
}  // namespace

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(std::string(call) + " failed: " + cublasGetStatusName(status) + " (" +
                       cublasGetStatusString(status) + ")");
}

cublasHandle_t cublas_handle(Context& ctx) {
  std::shared_ptr<void>& slot = stream_attachment(ctx, "cublas");
  if (!slot) {
    auto state = std::make_shared<CublasState>();
    check_cublas(cublasCreate(&state->handle), "cublasCreate");
    check_cublas(cublasSetStream(state->handle, stream_of(ctx)), "cublasSetStream");
    check_cublas(cublasSetMathMode(state->handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    void* ws = state->workspace.reserve(ctx.device, kCublasWorkspaceBytes);
    check_cublas(cublasSetWorkspace(state->handle, ws, kCublasWorkspaceBytes), "cublasSetWorkspace");
    slot = state;
  }
  return static_cast<CublasState*>(slot.get())->handle;
}

}  // namespace sdp::nn::cuda
