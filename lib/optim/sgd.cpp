#include "optim/sgd.hpp"

#include "core/error.hpp"
#include "optim/update_rules.hpp"

namespace sdp {

Sgd::Sgd(ParameterStore& store, const SgdOptions& options)
    : Optimizer(store, options.weight_decay, options.decay_all), options_(options) {
  if (options.momentum < 0 || options.dampening < 0 || options.weight_decay < 0)
    throw InputError("optimizer sgd: momentum, dampening and weight_decay must be >= 0");
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw InputError("optimizer sgd: nesterov needs momentum > 0 and dampening 0");
  if (options.momentum != 0) momentum_ = add_state("momentum_buffer");
}

void Sgd::update_cpu(float lr, int64_t t) {
  float* __restrict p_all = store_.param_arena().data<float>();
  const float* __restrict g_all = store_.grad_arena().data<float>();
  const float mu = options_.momentum;
  const float keep = 1.0f - options_.dampening;
  for (const Segment& seg : segments_) {
    float* __restrict p = p_all + seg.begin;
    const float* __restrict g = g_all + seg.begin;
    const float wd = seg.weight_decay;
    const int64_t n = seg.count;
    if (momentum_ == nullptr) {
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd(p[i], g[i], lr, wd);
      continue;
    }
    float* __restrict buf = momentum_ + seg.begin;
    // Branches hoisted out of the loops so each loop vectorizes.
    if (t == 1) {
      for (int64_t i = 0; i < n; ++i) buf[i] = update_rules::sgd_momentum_first(g[i], p[i], wd);
    } else {
      for (int64_t i = 0; i < n; ++i) buf[i] = update_rules::sgd_momentum(buf[i], g[i], p[i], mu, keep, wd);
    }
    if (options_.nesterov) {
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_nesterov(p[i], g[i], buf[i], lr, mu, wd);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_heavy_ball(p[i], buf[i], lr);
    }
  }
}

#ifdef SDP_HAVE_CUDA
void Sgd::update_cuda(float lr, int64_t t) {
  cuda_updates::sgd(segment_table(), store_.param_arena().data<float>(), store_.grad_arena().data<float>(), momentum_,
                    lr, options_.momentum, 1.0f - options_.dampening, t == 1, options_.nesterov, device_stream_);
}
#endif

}  // namespace sdp
