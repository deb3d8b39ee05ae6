// nvjpeg_offload.hpp in a build without the CUDA backend (nvjpeg_offload_cuda.cpp has the
// real one): no GPU, so no GPU decoding, said once in the same words as everywhere else.
#include "data/images/nvjpeg_offload.hpp"

#ifndef SDP_HAVE_CUDA

#include "core/error.hpp"

namespace sdp {

const NvjpegStatus& nvjpeg_status() {
  static const NvjpegStatus status{false, "", "", "this build has no CUDA backend"};
  return status;
}

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device&, bool) {
  throw InputError("key 'data.decode': gpu needs nvJPEG, but " + nvjpeg_status().reason +
                   "; use data.decode: cpu or auto");
}

}  // namespace sdp

#endif  // SDP_HAVE_CUDA
