#include "train/gradient_accumulator.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/cuda_casts.hpp"
#include "distributed/reduce_kernels.hpp"

namespace sdp {

GradientAccumulator::GradientAccumulator(const ParameterStore& store, int steps, Stream* stream)
    : steps_(steps),
      inverse_steps_(1.0f / static_cast<float>(steps)),
      sum_(store.grad_arena().shape(), store.grad_arena().dtype(), store.device()),
      stream_(stream),
      params_(store.params().size()) {
  if (steps < 2)
    throw std::logic_error("GradientAccumulator: needs 2 or more micro-batches per step");
  if (store.grad_arena().dtype() != DType::kF32)
    throw std::logic_error("GradientAccumulator: f32 gradients only");
#ifdef SDP_HAVE_CUDA
  if (store.device().is_cuda()) return;
#endif
  if (!store.device().is_cpu())
    throw std::logic_error("GradientAccumulator: no sums for gradients on " + store.device().str());
}

void GradientAccumulator::begin_micro_batch(int micro) {
  if (micro < 0 || micro >= steps_)
    throw std::logic_error("GradientAccumulator: no micro-batch " + std::to_string(micro));
  micro_ = micro;
  added_ = 0;
}

bool GradientAccumulator::add(const Param& p) {
  const int64_t count = shape_numel(p.shape);
  float* grad = p.grad.data<float>();
  float* sum = sum_.data<float>() + p.offset;
  ++added_;
#ifdef SDP_HAVE_CUDA
  if (sum_.device().is_cuda()) {  // the same three cases, as kernels on the compute stream
    if (micro_ == 0) {
      cuda_casts::from_f32(DType::kF32, sum, grad, count, 1.0f, stream_);  // x * 1 is x
      return false;
    }
    cuda_casts::add_scale(micro_ < steps_ - 1 ? sum : grad, micro_ < steps_ - 1 ? grad : sum, count,
                          micro_ < steps_ - 1 ? 1.0f : inverse_steps_, stream_);
    return micro_ == steps_ - 1;
  }
#endif
  if (micro_ == 0) {
    std::memcpy(sum, grad, static_cast<std::size_t>(count) * sizeof(float));
    return false;
  }
  if (micro_ < steps_ - 1) {
    add_into(DType::kF32, sum, grad, count);
    return false;
  }
  add_scale_into(DType::kF32, grad, sum, count, inverse_steps_);
  return true;
}

void GradientAccumulator::check_complete() const {
  if (micro_ != steps_ - 1 || added_ != params_)
    throw std::logic_error("GradientAccumulator: the step ended at micro-batch " +
                           std::to_string(micro_) + " with " + std::to_string(added_) + " of " +
                           std::to_string(params_) + " gradients folded in");
}

}  // namespace sdp
