#include "nn/library_versions.hpp"

#include <oneapi/dnnl/dnnl.h>

#ifdef SDP_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "core/device_info.hpp"

namespace sdp::nn {

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return version_and_file(
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch),
      reinterpret_cast<const void*>(&dnnl_version));
}

std::string cudnn_version() {
#ifdef SDP_HAVE_CUDNN
  // cuDNN 9 encodes 9.19.0 as 91900.
  const size_t v = cudnnGetVersion();
  return version_and_file(std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                              std::to_string(v % 100),
                          reinterpret_cast<const void*>(&cudnnGetVersion));
#else
  return "";
#endif
}

#ifndef SDP_HAVE_CUDA
std::string cublas_version() {
  return "";
}
#endif

}  // namespace sdp::nn
