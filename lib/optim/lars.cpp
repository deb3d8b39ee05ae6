#include "optim/lars.hpp"

#include <cmath>

#include "core/error.hpp"
#include "optim/dense_update_kernels.hpp"
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

std::unique_ptr<Lars> Lars::create(ParameterStore& store, const LarsOptions& options) {
  return make_for_device<Lars, LarsCpu, LarsCuda>(store, "optimizer lars", options);
}

bool LarsCpu::update(float lr, int64_t /*t*/) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  float* v_all = momentum_;
  const float mu = options_.momentum;
  const auto& params = store_.params();
  norms_.resize(2 * params.size());
  double* norms = norms_.data();  // per tensor: ||w||, ||g||
  const std::vector<multi_tensor::Chunk>& chunks = parameter_chunks();
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  const DenseUpdateKernels& kernels = dense_update_kernels();
  uint32_t non_finite = 0;
#pragma omp parallel
  {
    // ||w|| and ||g|| for the trust ratios (biases and BatchNorm take plain lr steps).
    multi_tensor::decayed_tensor_norms(params, p_all, g_all, norms);
    // (the barrier at the loop's end: every norm is known before any weight moves)
#pragma omp for schedule(static) reduction(| : non_finite)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const multi_tensor::Chunk& chunk = chunks[c];
      float* p = p_all + chunk.begin;
      const float* g = g_all + chunk.begin;
      float* v = v_all + chunk.begin;
      const int32_t j = chunk.group;
      float s = lr;  // lr * local_lr
      float wd = 0.0f;
      if (params[j].weight_decay) {
        wd = options_.weight_decay;
        const double local_lr = update_rules::lars_local_lr(norms[2 * j], norms[2 * j + 1],
                                                            options_.trust_coefficient, wd, options_.eps);
        s = static_cast<float>(double{lr} * local_lr);
      }
      non_finite |= kernels.lars(p, g, v, chunk.count, mu, s, wd);
    }
  }
  return non_finite == 0;
}

}  // namespace sdp
