#include "optim/lars.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/norms.hpp"

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
      const double w_norm = l2_norm(p, n);
      const double g_norm = l2_norm(g, n);
      if (w_norm > 0 && g_norm > 0) {
        const double local_lr = double{options_.trust_coefficient} * w_norm /
                                (g_norm + double{wd} * w_norm + double{options_.eps});
        scale = static_cast<float>(double{lr} * local_lr);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + scale * (g[i] + wd * p[i]);
      p[i] -= v[i];
    }
  }
}

}  // namespace sdp
