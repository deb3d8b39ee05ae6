// Lamb's GPU twin (optim/lamb.hpp): the update as optim/cuda_updates.hpp's kernels, enqueued on the
// optimizer's stream. Built only with the CUDA backend.
#include "optim/cuda_updates.hpp"
#include "optim/lamb.hpp"
#include "optim/update_rules.hpp"

namespace sdp {

cuda_updates::StepScalars LambCuda::step_scalars(float lr, int64_t t) const {
  cuda_updates::StepScalars s = Optimizer::step_scalars(lr, t);
  s.bias1 = static_cast<float>(update_rules::bias_correction(options_.beta1, t));
  s.bias2 = static_cast<float>(update_rules::bias_correction(options_.beta2, t));
  return s;
}

bool LambCuda::update(float lr, int64_t t) {
  cuda_updates::lamb(parameter_table(options_.weight_decay), store_.param_arena().data<float>(),
                     store_.grad_arena().data<float>(), exp_avg_, exp_avg_sq_, scalar_source(lr, t), options_.beta1,
                     options_.beta2, options_.eps, stream_);
  return true;  // not checked here: step_checking_gradients checks first on GPUs
}

}  // namespace sdp
