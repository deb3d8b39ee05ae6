// CUDA gradient-ready events (grad_ready.hpp): one cudaEvent_t per parameter, recorded on the
// compute stream after backward enqueued that parameter's gradient, waited by the
// communication thread before the bucket's collective.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/cuda_check_cuda.hpp"
#include "distributed/grad_ready.hpp"

namespace sdp {

namespace {

void check(cudaError_t status, const char* call) { check_cuda(status, call, "gradient events"); }

class CudaGradReady final : public GradReadyEvent {
 public:
  explicit CudaGradReady(cudaEvent_t event) : event_(event) {}
  void wait() const override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

 private:
  cudaEvent_t event_;
};

class CudaGradReadyEvents final : public GradReadyEvents {
 public:
  CudaGradReadyEvents(const Device& device, void* stream, int params)
      : stream_(static_cast<cudaStream_t>(stream)) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    events_.reserve(static_cast<std::size_t>(params));
    ready_.reserve(static_cast<std::size_t>(params));
    for (int i = 0; i < params; ++i) {
      cudaEvent_t event = nullptr;
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      events_.push_back(event);
      ready_.emplace_back(event);
    }
  }
  ~CudaGradReadyEvents() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  const GradReadyEvent* record(int param) override {
    const auto i = static_cast<std::size_t>(param);
    check(cudaEventRecord(events_.at(i), stream_), "cudaEventRecord");
    return &ready_[i];
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  std::vector<CudaGradReady> ready_;
};

}  // namespace

std::unique_ptr<GradReadyEvents> make_cuda_grad_ready_events(const Device& device, void* stream, int params) {
  return std::make_unique<CudaGradReadyEvents>(device, stream, params);
}

}  // namespace sdp
