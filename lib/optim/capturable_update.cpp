#include "optim/capturable_update.hpp"

#include <stdexcept>
#include <string>

#include "core/device_memory.hpp"
#include "optim/cuda_updates.hpp"

namespace sdp {

namespace {

// The skip flag follows the scalars, 4-byte aligned.
constexpr std::size_t kSkipOffset = (sizeof(cuda_updates::StepScalars) + 3) / 4 * 4;

}  // namespace

CapturableUpdate::CapturableUpdate(Optimizer& optimizer, Stream& stream) : optimizer_(optimizer), stream_(stream) {
#ifndef SDP_HAVE_CUDA
  throw std::logic_error("optimizer.capturable: this build has no CUDA backend");
#endif
  if (!stream.device().is_cuda() || optimizer.checks_gradients_in_update())
    throw std::logic_error(std::string("optimizer.capturable: the ") + optimizer.name() + " update runs on the " +
                           stream.device().str() + ", not a GPU");
  {
    const MemoryPurposeScope purpose(MemoryPurpose::kOptimizer);
    device_ = allocate(stream.device(), kSkipOffset + sizeof(int32_t));
  }
  for (Slot& slot : slots_) {
    slot.host = allocate_pinned_host(sizeof(cuda_updates::StepScalars));
    slot.copied = stream.make_event();
  }
  host_skip_ = allocate_pinned_host(sizeof(int32_t));
  read_ = stream.make_event();
  auto* base = static_cast<char*>(device_.get());
  optimizer_.read_scalars_from_device(reinterpret_cast<const cuda_updates::StepScalars*>(base),
                                      reinterpret_cast<const int32_t*>(base + kSkipOffset));
}

CapturableUpdate::~CapturableUpdate() {
  optimizer_.read_scalars_from_device(nullptr, nullptr);
  try {
    stream_.synchronize();  // launches still queued read the device memory freed here
  } catch (...) {
    // A failed device (the run is ending with its error already): nothing left to wait for.
  }
}

void CapturableUpdate::stage(float lr) {
  Slot& slot = slots_[next_slot_];
  next_slot_ ^= 1;
  slot.copied->synchronize();  // the copy two steps back (long done: each step's end was read)
  *static_cast<cuda_updates::StepScalars*>(slot.host.get()) =
      optimizer_.step_scalars(lr, optimizer_.step_count() + 1);
  stream_.copy_from_host_async(device_.get(), slot.host.get(), sizeof(cuda_updates::StepScalars));
  slot.copied->record();
}

void CapturableUpdate::queue(const Tensor& grads, float loss_scale, const double* loss_sum, int64_t rows) {
  Tensor unscaled = grads;  // shares the arena
  if (loss_scale != 1.0f) unscaled.scale(1.0f / loss_scale, &stream_);  // exact: a power of two
#ifdef SDP_HAVE_CUDA
  auto* skip = reinterpret_cast<int32_t*>(static_cast<char*>(device_.get()) + kSkipOffset);
  cuda_updates::check_step(unscaled.data<float>(), unscaled.numel(), loss_sum, rows, skip, &stream_);
#endif
  // The scalars and the flag come from the device (read_scalars_from_device): the arguments
  // here are not read.
  optimizer_.update(0.0f, optimizer_.step_count() + 1);
}

void CapturableUpdate::queue_read() {
  stream_.copy_to_host_async(host_skip_.get(), static_cast<char*>(device_.get()) + kSkipOffset, sizeof(int32_t));
  read_->record();
  read_queued_ = true;
}

bool CapturableUpdate::applied() {
  if (!read_queued_) throw std::logic_error("CapturableUpdate::applied before queue_read");
  read_queued_ = false;
  read_->synchronize();
  const bool applied = *static_cast<const int32_t*>(host_skip_.get()) == 0;
  if (applied) optimizer_.count_applied_update();
  return applied;
}

}  // namespace sdp
