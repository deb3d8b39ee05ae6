// Lars's GPU twin (optim/lars.hpp): the update as optim/cuda_updates.hpp's kernels, enqueued on the
// optimizer's stream. Built only with the CUDA backend.
#include "optim/cuda_updates.hpp"
#include "optim/lars.hpp"

namespace sdp {

bool LarsCuda::update(float lr, int64_t t) {
  cuda_updates::lars(parameter_table(options_.weight_decay), store_.param_arena().data<float>(),
                     store_.grad_arena().data<float>(), momentum_, scalar_source(lr, t), options_.momentum,
                     options_.trust_coefficient, options_.eps, stream_);
  return true;  // not checked here: step_checking_gradients checks first on GPUs
}

}  // namespace sdp
