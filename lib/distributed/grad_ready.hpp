// GradReadyEvent: how a parameter's gradient tells the GradientReducer that it is final.
//
// backward calls GradientReducer::on_grad_ready(i, event) when it has PRODUCED gradient i:
// on the host that means written; on a device it means only enqueued on the compute stream.
// Before it launches the collective of the bucket holding i, the communication thread calls
// event->wait(), which returns once the gradient's producer is ordered before that
// collective:
//   host (no event, or HostGradReady): nothing to wait for; backward wrote the gradient
//     before reporting it.
//   CUDA (next issue): the event recorded on the compute stream after the layer's backward;
//     wait() is cudaStreamWaitEvent(comm stream, event) (the NCCL stream then starts the
//     allreduce after the gradient kernels, without blocking any host thread; llm.c
//     zero.cuh), or cudaEventSynchronize where the communicator has no stream.
// Lifetime: an event passed to on_grad_ready must stay valid until that step's wait_all
// returns (a layer keeps one event per parameter and re-records it every step).
#pragma once

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

}  // namespace sdp
