#include "optim/adam.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/dense_update_kernels.hpp"
#include "optim/multi_tensor.hpp"
#include "optim/update_rules.hpp"

namespace sdp {

Adam::Adam(ParameterStore& store, const AdamOptions& options)
    : Optimizer(store, options.weight_decay, options.decay_all), options_(options) {
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1))
    throw InputError("optimizer adam: betas must be in [0, 1)");
  if (!(options.eps >= 0) || !(options.weight_decay >= 0))
    throw InputError("optimizer adam: eps and weight_decay must be >= 0");
  exp_avg_ = add_state("exp_avg");
  exp_avg_sq_ = add_state("exp_avg_sq");
}

std::unique_ptr<Adam> Adam::create(ParameterStore& store, const AdamOptions& options) {
  return make_for_device<Adam, AdamCpu, AdamCuda>(store, "optimizer adam", options);
}

bool AdamCpu::update(float lr, int64_t t) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  float* m_all = exp_avg_;
  float* v_all = exp_avg_sq_;
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const bool decoupled = options_.decoupled;
  // Scalars in double like PyTorch's Python-side arithmetic, then used as float.
  const double bias1 = update_rules::bias_correction(b1, t);
  const double bias2 = update_rules::bias_correction(b2, t);
  const float step_size = static_cast<float>(lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const std::vector<multi_tensor::Chunk>& chunks = segment_chunks();
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  const DenseUpdateKernels& kernels = dense_update_kernels();
  uint32_t non_finite = 0;
#pragma omp parallel for schedule(static) reduction(| : non_finite)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const multi_tensor::Chunk& chunk = chunks[c];
    const float wd = segments_[chunk.group].weight_decay;
    AdamChunkScalars s{b1, b2, eps, step_size, bias2_sqrt, decoupled ? 0.0f : wd, decoupled && wd != 0,
                       1.0f - lr * wd};
    non_finite |= kernels.adam(p_all + chunk.begin, g_all + chunk.begin, m_all + chunk.begin,
                               v_all + chunk.begin, chunk.count, s);
  }
  return non_finite == 0;
}

}  // namespace sdp
