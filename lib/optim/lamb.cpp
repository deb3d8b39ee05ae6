#include "optim/lamb.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/norms.hpp"

namespace sdp {

Lamb::Lamb(ParameterStore& store, const LambOptions& options)
    // decay_all false: the base class's segments then follow Param::weight_decay; the
    // update below reads the flag per parameter anyway.
    : Optimizer(store, options.weight_decay, /*decay_all=*/false), options_(options) {
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1))
    throw InputError("optimizer lamb: betas must be in [0, 1)");
  if (!(options.eps >= 0) || !(options.weight_decay >= 0))
    throw InputError("optimizer lamb: eps and weight_decay must be >= 0");
  exp_avg_ = add_state("exp_avg");
  exp_avg_sq_ = add_state("exp_avg_sq");
}

void Lamb::update_cpu(float lr, int64_t t) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  // Scalars in double, as Adam's, then used as float.
  const float bias1 = static_cast<float>(1.0 - std::pow(double{b1}, double(t)));
  const float bias2 = static_cast<float>(1.0 - std::pow(double{b2}, double(t)));
  for (const Param& param : store_.params()) {
    const int64_t n = shape_numel(param.shape);
    float* __restrict p = p_all + param.offset;
    const float* __restrict g = g_all + param.offset;
    float* __restrict m = exp_avg_ + param.offset;
    float* __restrict v = exp_avg_sq_ + param.offset;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    }
    const float wd = param.weight_decay ? options_.weight_decay : 0.0f;
    // The update direction, computed the same way for its norm and for the step.
    auto r = [=](int64_t i) {
      return (m[i] / bias1) / (std::sqrt(v[i] / bias2) + eps) + wd * p[i];
    };
    float ratio = 1.0f;
    if (param.weight_decay) {
      const double w_norm = l2_norm(p, n);
      const double r_norm = l2_norm_of(n, r);
      if (w_norm > 0 && r_norm > 0) ratio = static_cast<float>(w_norm / r_norm);
    }
    const float step = lr * ratio;
    for (int64_t i = 0; i < n; ++i) p[i] -= step * r(i);
  }
}

}  // namespace sdp
