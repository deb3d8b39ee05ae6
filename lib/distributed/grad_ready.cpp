#include "distributed/grad_ready.hpp"

#include "core/error.hpp"

namespace sdp {

#ifdef SDP_HAVE_CUDA
// grad_ready_cuda.cpp
std::unique_ptr<GradReadyEvents> make_cuda_grad_ready_events(const Device& device, void* stream, int params);
#endif

namespace {

class HostGradReadyEvents final : public GradReadyEvents {
 public:
  const GradReadyEvent* record(int /*param*/) override { return nullptr; }
};

}  // namespace

std::unique_ptr<GradReadyEvents> make_grad_ready_events(const Device& device, void* stream, int params) {
  if (device.is_cpu()) return std::make_unique<HostGradReadyEvents>();
#ifdef SDP_HAVE_CUDA
  if (device.kind == DeviceKind::kCuda) return make_cuda_grad_ready_events(device, stream, params);
#endif
  (void)stream;
  (void)params;
  throw RuntimeError("gradient events: this sdp-train has no backend for " + device.str());
}

}  // namespace sdp
