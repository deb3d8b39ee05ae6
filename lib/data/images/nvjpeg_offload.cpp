// nvjpeg_offload.hpp in a build without the CUDA backend (nvjpeg_offload_cuda.cpp has the
// real one): no GPU, so no GPU decoding, said once in the same words as everywhere else.
#include "data/images/nvjpeg_offload.hpp"

#include <mutex>

namespace sdp {

namespace {
std::mutex phase_mutex;
NvjpegPhaseTotals phase_totals;
}  // namespace

NvjpegPhaseTotals nvjpeg_phase_totals() {
  const std::lock_guard<std::mutex> lock(phase_mutex);
  return phase_totals;
}

void add_nvjpeg_phase_times(const NvjpegPhaseTotals& batch) {
  const std::lock_guard<std::mutex> lock(phase_mutex);
  phase_totals.inspect_s += batch.inspect_s;
  phase_totals.decode_call_s += batch.decode_call_s;
  phase_totals.queue_s += batch.queue_s;
  phase_totals.wait_s += batch.wait_s;
  phase_totals.batches += batch.batches;
  phase_totals.images += batch.images;
}

}  // namespace sdp

#ifndef SDP_HAVE_CUDA

#include "core/error.hpp"

namespace sdp {

const NvjpegStatus& nvjpeg_status() {
  static const NvjpegStatus status{false, "", "", "this build has no CUDA backend"};
  return status;
}

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device&, bool, const std::string&) {
  throw InputError("key 'data.decode': gpu needs nvJPEG, but " + nvjpeg_status().reason +
                   "; use data.decode: cpu or auto");
}

}  // namespace sdp

#endif  // SDP_HAVE_CUDA
