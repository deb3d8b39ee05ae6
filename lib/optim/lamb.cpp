#include "optim/lamb.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/norms.hpp"
#include "optim/update_rules.hpp"

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
  const float bias1 = static_cast<float>(update_rules::bias_correction(b1, t));
  const float bias2 = static_cast<float>(update_rules::bias_correction(b2, t));
  for (const Param& param : store_.params()) {
    const int64_t n = shape_numel(param.shape);
    float* __restrict p = p_all + param.offset;
    const float* __restrict g = g_all + param.offset;
    float* __restrict m = exp_avg_ + param.offset;
    float* __restrict v = exp_avg_sq_ + param.offset;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = update_rules::first_moment(m[i], g[i], b1);
      v[i] = update_rules::second_moment(v[i], g[i], b2);
    }
    const float wd = param.weight_decay ? options_.weight_decay : 0.0f;
    // The update direction, computed the same way for its norm and for the step.
    auto r = [=](int64_t i) { return update_rules::lamb_direction(m[i], v[i], p[i], bias1, bias2, eps, wd); };
    // BatchNorm and bias parameters (no weight decay) take plain Adam-like steps of lr.
    const float ratio = param.weight_decay ? update_rules::lamb_ratio(l2_norm(p, n), l2_norm_of(n, r)) : 1.0f;
    const float step = lr * ratio;
    for (int64_t i = 0; i < n; ++i) p[i] = update_rules::lamb_step(p[i], r(i), step);
  }
}

#ifdef SDP_HAVE_CUDA
void Lamb::update_cuda(float lr, int64_t t) {
  const float bias1 = static_cast<float>(update_rules::bias_correction(options_.beta1, t));
  const float bias2 = static_cast<float>(update_rules::bias_correction(options_.beta2, t));
  cuda_updates::lamb(parameter_table(options_.weight_decay), store_.param_arena().data<float>(),
                     store_.grad_arena().data<float>(), exp_avg_, exp_avg_sq_, lr, options_.beta1, options_.beta2,
                     bias1, bias2, options_.eps, device_stream_);
}
#endif

}  // namespace sdp
