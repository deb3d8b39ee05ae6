#include "optim/lars.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/norms.hpp"
#include "optim/update_rules.hpp"

namespace sdp {

Lars::Lars(ParameterStore& store, const LarsOptions& options)
    // decay_all false: the base class's segments then follow Param::weight_decay; the
    // update below reads the flag per parameter anyway.
    : Optimizer(store, options.weight_decay, /*decay_all=*/false), options_(options) {
  if (!(options.momentum >= 0 && options.momentum < 1))
    throw InputError("optimizer lars: momentum must be in [0, 1)");
  if (!(options.weight_decay >= 0) || !(options.eps >= 0))
    throw InputError("optimizer lars: weight_decay and eps must be >= 0");
  if (!(options.trust_coefficient > 0))
    throw InputError("optimizer lars: trust_coefficient must be > 0");
  momentum_ = add_state("momentum_buffer");
}

void Lars::update_cpu(float lr, int64_t /*t*/) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  const float mu = options_.momentum;
  for (const Param& param : store_.params()) {
    const int64_t n = shape_numel(param.shape);
    float* __restrict p = p_all + param.offset;
    const float* __restrict g = g_all + param.offset;
    float* __restrict v = momentum_ + param.offset;
    float scale = lr;  // lr * local_lr
    float wd = 0.0f;
    if (param.weight_decay) {
      wd = options_.weight_decay;
      const double local_lr = update_rules::lars_local_lr(l2_norm(p, n), l2_norm(g, n),
                                                          options_.trust_coefficient, wd, options_.eps);
      scale = static_cast<float>(double{lr} * local_lr);
    }
    for (int64_t i = 0; i < n; ++i) {
      v[i] = update_rules::lars_velocity(v[i], g[i], p[i], mu, scale, wd);
      p[i] -= v[i];
    }
  }
}

#ifdef SDP_HAVE_CUDA
void Lars::update_cuda(float lr, int64_t /*t*/) {
  cuda_updates::lars(parameter_table(options_.weight_decay), store_.param_arena().data<float>(),
                     store_.grad_arena().data<float>(), momentum_, lr, options_.momentum, options_.trust_coefficient,
                     options_.eps, device_stream_);
}
#endif

}  // namespace sdp
