// Gradient-ready events: how a parameter's gradient tells the GradientReducer that it is final.
//
// backward calls GradientReducer::on_grad_ready(i, event) when it has PRODUCED gradient i:
// on the host that means written; on a device it means only enqueued on the compute stream.
// Before it launches the collective of the bucket holding i, the communication thread calls
// event->synchronize(), which returns once the gradient's producer is done:
//   host (no event): nothing to wait for; backward wrote the gradient before reporting it.
//   device (core/stream.hpp's Event, recorded on the compute stream after the layer's
//     backward enqueued the gradient): synchronize() blocks only the communication thread,
//     which then enqueues the bucket on the communicator's stream while backward's kernels
//     for earlier layers keep the GPU busy.
// Lifetime: an event passed to on_grad_ready must stay valid until that step's wait_all
// returns (one event per parameter, re-recorded every step).
#pragma once

#include <memory>
#include <vector>

#include "core/stream.hpp"

namespace sdp {

// One reusable event per parameter on a model's compute stream (what a data-parallel replica
// hands the reducer): record(i) marks parameter i's gradient as enqueued so far and returns
// its event, valid until the next record(i). On a host stream it returns null (the gradient
// is written).
class GradReadyEvents {
 public:
  GradReadyEvents(Stream& stream, int params) {
    if (stream.device().is_cpu()) return;
    for (int i = 0; i < params; ++i) events_.push_back(stream.make_event());
  }
  const Event* record(int param) {
    if (events_.empty()) return nullptr;
    Event& event = *events_.at(static_cast<std::size_t>(param));
    event.record();
    return &event;
  }

 private:
  std::vector<std::unique_ptr<Event>> events_;
};

}  // namespace sdp
