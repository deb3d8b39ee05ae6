// Sgd's GPU twin (optim/sgd.hpp): the update as optim/cuda_updates.hpp's kernels, enqueued on the
// optimizer's stream. Built only with the CUDA backend.
#include "optim/cuda_updates.hpp"
#include "optim/sgd.hpp"

namespace sdp {

bool SgdCuda::update(float lr, int64_t t) {
  cuda_updates::sgd(segment_table(), store_.param_arena().data<float>(), store_.grad_arena().data<float>(), momentum_,
                    scalar_source(lr, t), options_.momentum, 1.0f - options_.dampening, options_.nesterov, stream_);
  return true;  // not checked here: step_checking_gradients checks first on GPUs
}

}  // namespace sdp
