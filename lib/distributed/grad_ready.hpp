// GradReadyEvent: how a parameter's gradient tells the GradientReducer that it is final.
//
// backward calls GradientReducer::on_grad_ready(i, event) when it has PRODUCED gradient i:
// on the host that means written; on a device it means only enqueued on the compute stream.
// Before it launches the collective of the bucket holding i, the communication thread calls
// event->wait(), which returns once the gradient's producer is ordered before that
// collective:
//   host (no event, or HostGradReady): nothing to wait for; backward wrote the gradient
//     before reporting it.
//   CUDA (grad_ready_cuda.cpp): the event recorded on the compute stream after the layer's
//     backward enqueued the gradient; wait() is cudaEventSynchronize, which blocks only the
//     communication thread: it then enqueues the bucket on NCCL's stream while backward's
//     kernels for earlier layers keep the GPU busy.
// Lifetime: an event passed to on_grad_ready must stay valid until that step's wait_all
// returns (a layer keeps one event per parameter and re-records it every step).
#pragma once

#include <memory>

#include "core/dtype.hpp"

namespace sdp {

class GradReadyEvent {
 public:
  virtual ~GradReadyEvent() = default;
  // Called on the communication thread; may block it, never the training thread.
  virtual void wait() const = 0;
};

// The host event: complete when backward reports the gradient.
class HostGradReady final : public GradReadyEvent {
 public:
  void wait() const override {}
};

// One reusable event per parameter on a device's compute stream (what a data-parallel
// replica hands the reducer): record(i) marks parameter i's gradient as enqueued so far and
// returns its event, valid until the next record(i). On the CPU it returns null (the host
// event: the gradient is written).
class GradReadyEvents {
 public:
  virtual ~GradReadyEvents() = default;
  virtual const GradReadyEvent* record(int param) = 0;
};

// `stream`: the compute stream's handle (a cudaStream_t under CUDA; ignored on the CPU).
// Throws sdp::Error for a device this build has no backend for.
std::unique_ptr<GradReadyEvents> make_grad_ready_events(const Device& device, void* stream, int params);

}  // namespace sdp
