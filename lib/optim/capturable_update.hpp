// CapturableUpdate (optimizer.capturable): a GPU step's update decided and applied on the
// device, so a CUDA graph can hold the whole step, as PyTorch's capturable optimizers and
// NVIDIA's MLPerf ResNet-50 (the whole step in one graph) do.
//
// The host path reads the loss, then checks the gradients with a second wait, then launches
// the update with the learning rate and bias corrections as launch arguments. Here:
//   stage(lr)      host, before the step's device work: update number step_count() + 1's
//                  scalars (Optimizer::step_scalars) copied to device memory, from one of two
//                  page-locked slots (the one a still-queued copy reads is never rewritten);
//   queue(...)     device work, recordable: the gradients unscaled by the loss scale, the skip
//                  flag set when a gradient or the mean loss is not finite
//                  (cuda_updates::check_step), the optimizer's update reading both from the
//                  device (a skipped update changes nothing: weights and state stay);
//   queue_read()   the flag's copy back, queued after the step (outside any recording);
//   applied()      host, at the step's end: the device's decision; an applied update is
//                  counted (Optimizer::count_applied_update), so update t's scalars follow.
// The arithmetic and its scalars are the launched update's own: the weights are bitwise those
// of the host path.
#pragma once

#include <cstdint>
#include <memory>

#include "core/stream.hpp"
#include "core/tensor.hpp"
#include "optim/optimizer.hpp"

namespace sdp {

class CapturableUpdate {
 public:
  // `optimizer`: a GPU twin, enqueueing on `stream` (both must outlive this). Throws
  // std::logic_error for a CPU optimizer or in a build without the CUDA backend.
  CapturableUpdate(Optimizer& optimizer, Stream& stream);
  ~CapturableUpdate();
  CapturableUpdate(const CapturableUpdate&) = delete;
  CapturableUpdate& operator=(const CapturableUpdate&) = delete;

  void stage(float lr);
  // `grads`: the gradient arena (f32); `loss_scale`: the step's (1: none); `loss_sum`, `rows`:
  // the step's loss on the device (nn::Model::loss_on_device), or null: the gradients alone
  // decide (several ranks, whose averaged gradients are the same bits everywhere).
  void queue(const Tensor& grads, float loss_scale, const double* loss_sum, int64_t rows);
  void queue_read();
  bool applied();

 private:
  Optimizer& optimizer_;
  Stream& stream_;
  std::shared_ptr<void> device_;  // StepScalars, then the int32 skip flag
  struct Slot {
    std::shared_ptr<void> host;      // page-locked StepScalars
    std::unique_ptr<Event> copied;   // recorded after the slot's last copy to the device
  };
  Slot slots_[2];
  int next_slot_ = 0;
  std::shared_ptr<void> host_skip_;  // page-locked: the flag, copied back by queue_read
  std::unique_ptr<Event> read_;
  bool read_queued_ = false;
};

}  // namespace sdp
