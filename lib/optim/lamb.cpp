#include "optim/lamb.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/dense_update_kernels.hpp"
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

std::unique_ptr<Lamb> Lamb::create(ParameterStore& store, const LambOptions& options) {
  return make_for_device<Lamb, LambCpu, LambCuda>(store, "optimizer lamb", options);
}

bool LambCpu::update(float lr, int64_t t) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  float* m_all = exp_avg_;
  float* v_all = exp_avg_sq_;
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  // Scalars in double, as Adam's, then used as float.
  const float bias1 = static_cast<float>(update_rules::bias_correction(b1, t));
  const float bias2 = static_cast<float>(update_rules::bias_correction(b2, t));
  const auto& params = store_.params();
  direction_.resize(static_cast<std::size_t>(store_.param_arena().numel()));
  norms_.resize(2 * params.size());
  float* r_all = direction_.data();
  double* norms = norms_.data();  // per tensor: ||w||, ||r||
  const std::vector<multi_tensor::Chunk>& chunks = parameter_chunks();
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  const DenseUpdateKernels& kernels = dense_update_kernels();
  uint32_t non_finite = 0;
#pragma omp parallel
  {
    // The moments and the update direction r, kept for the norm and the step.
#pragma omp for schedule(static) reduction(| : non_finite)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const multi_tensor::Chunk& chunk = chunks[c];
      const float* p = p_all + chunk.begin;
      const float* g = g_all + chunk.begin;
      float* m = m_all + chunk.begin;
      float* v = v_all + chunk.begin;
      float* r = r_all + chunk.begin;
      const float wd = params[chunk.group].weight_decay ? options_.weight_decay : 0.0f;
      non_finite |= kernels.lamb_direction(p, g, m, v, r, chunk.count, b1, b2, bias1, bias2, eps, wd);
    }
    // ||w|| and ||r|| for the trust ratios; BatchNorm and bias parameters (no weight decay)
    // take plain Adam-like steps of lr.
    multi_tensor::decayed_tensor_norms(params, p_all, r_all, norms);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const multi_tensor::Chunk& chunk = chunks[c];
      float* p = p_all + chunk.begin;
      const float* r = r_all + chunk.begin;
      const int32_t j = chunk.group;
      const float ratio =
          params[j].weight_decay ? update_rules::lamb_ratio(norms[2 * j], norms[2 * j + 1]) : 1.0f;
      const float s = lr * ratio;
      kernels.lamb_step(p, r, chunk.count, s);
    }
  }
  return non_finite == 0;
}

}  // namespace sdp
