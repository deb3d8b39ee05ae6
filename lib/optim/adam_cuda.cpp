// Adam's GPU twin (optim/adam.hpp): the update as optim/cuda_updates.hpp's kernels, enqueued on the
// optimizer's stream. Built only with the CUDA backend.
#include <cmath>

#include "optim/adam.hpp"
#include "optim/cuda_updates.hpp"
#include "optim/update_rules.hpp"

namespace sdp {

cuda_updates::StepScalars AdamCuda::step_scalars(float lr, int64_t t) const {
  // Exactly as the CPU update computes them.
  const double bias1 = update_rules::bias_correction(options_.beta1, t);
  const double bias2 = update_rules::bias_correction(options_.beta2, t);
  cuda_updates::StepScalars s = Optimizer::step_scalars(lr, t);
  s.step_size = static_cast<float>(lr / bias1);
  s.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  return s;
}

bool AdamCuda::update(float lr, int64_t t) {
  cuda_updates::adam(segment_table(), store_.param_arena().data<float>(), store_.grad_arena().data<float>(), exp_avg_,
                     exp_avg_sq_, scalar_source(lr, t), options_.beta1, options_.beta2, options_.eps,
                     options_.decoupled, stream_);
  return true;  // not checked here: step_checking_gradients checks first on GPUs
}

}  // namespace sdp
