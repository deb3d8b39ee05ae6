// cuBLAS, loaded on first use. Linking libcublas costs every process ~90 MB of private memory
// at start (libcublasLt's relocations, measured with /proc/self/smaps_rollup), CPU-only runs
// of a CUDA build included. So sdp_nn does not link it: the few cuBLAS entry points
// LinearCuda calls are defined here and forward to the library, which dlopen brings in the
// first time one of them runs. Their declarations come from cublas_v2.h, so the compiler
// checks every signature against the toolkit's.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "nn/library_versions.hpp"

namespace {

void* cublas_library() {
  static void* handle = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    // The soname first (RUNPATH, LD_LIBRARY_PATH, ld.so.cache), then where CMake found it.
    handle = dlopen("libcublas.so." SDP_CUBLAS_SOVERSION, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) handle = dlopen(SDP_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  });
  if (handle == nullptr)
    throw sdp::RuntimeError(std::string("cannot load cuBLAS (libcublas.so." SDP_CUBLAS_SOVERSION " or " SDP_CUBLAS_PATH
                                        "): ") +
                            (dlerror() ? dlerror() : "not found"));
  return handle;
}

template <typename Fn>
Fn cublas_function(const char* name) {
  void* f = dlsym(cublas_library(), name);
  if (f == nullptr) throw sdp::RuntimeError(std::string("cuBLAS has no ") + name);
  return reinterpret_cast<Fn>(f);
}

}  // namespace

#define SDP_CUBLAS_FORWARD(name, ret, params, args)                     \
  extern "C" ret CUBLASWINAPI name params {                             \
    static const auto f = cublas_function<ret(CUBLASWINAPI*) params>(#name); \
    return f args;                                                       \
  }

SDP_CUBLAS_FORWARD(cublasCreate_v2, cublasStatus_t, (cublasHandle_t * handle), (handle))
SDP_CUBLAS_FORWARD(cublasDestroy_v2, cublasStatus_t, (cublasHandle_t handle), (handle))
SDP_CUBLAS_FORWARD(cublasSetStream_v2, cublasStatus_t, (cublasHandle_t handle, cudaStream_t stream),
                   (handle, stream))
SDP_CUBLAS_FORWARD(cublasSetWorkspace_v2, cublasStatus_t,
                   (cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes),
                   (handle, workspace, workspaceSizeInBytes))
SDP_CUBLAS_FORWARD(cublasSetMathMode, cublasStatus_t, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
SDP_CUBLAS_FORWARD(cublasGetStatusName, const char*, (cublasStatus_t status), (status))
SDP_CUBLAS_FORWARD(cublasGetStatusString, const char*, (cublasStatus_t status), (status))
SDP_CUBLAS_FORWARD(cublasSgemm_v2, cublasStatus_t,
                   (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                    const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                    float* C, int ldc),
                   (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
SDP_CUBLAS_FORWARD(cublasGemmEx, cublasStatus_t,
                   (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                    const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                    int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                    cublasGemmAlgo_t algo),
                   (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                    computeType, algo))

std::string sdp::nn::cublas_version() {
  using GetProperty = cublasStatus_t(CUBLASWINAPI*)(libraryPropertyType, int*);
  GetProperty get = nullptr;
  try {
    get = cublas_function<GetProperty>("cublasGetProperty");
  } catch (const std::exception& e) {
    return std::string("not loadable: ") + e.what();
  }
  int major = 0, minor = 0, patch = 0;
  if (get(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS || get(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      get(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "";
  return sdp::version_and_file(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch),
                               reinterpret_cast<const void*>(get));
}
