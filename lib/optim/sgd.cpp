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

std::unique_ptr<Sgd> Sgd::create(ParameterStore& store, const SgdOptions& options) {
  return make_for_device<Sgd, SgdCpu, SgdCuda>(store, "optimizer sgd", options);
}

bool SgdCpu::update(float lr, int64_t t) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  float* buf_all = momentum_;
  const float mu = options_.momentum;
  const float keep = 1.0f - options_.dampening;
  const bool nesterov = options_.nesterov;
  const std::vector<multi_tensor::Chunk>& chunks = segment_chunks();
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  uint32_t non_finite = 0;
#pragma omp parallel for schedule(static) reduction(| : non_finite)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const multi_tensor::Chunk& chunk = chunks[c];
    float* __restrict p = p_all + chunk.begin;
    const float* __restrict g = g_all + chunk.begin;
    const float wd = segments_[chunk.group].weight_decay;
    const int64_t n = chunk.count;
    uint32_t bad = 0;
    if (buf_all == nullptr) {
      for (int64_t i = 0; i < n; ++i) {
        bad |= multi_tensor::non_finite_bit(g[i]);
        p[i] = update_rules::sgd(p[i], g[i], lr, wd);
      }
      non_finite |= bad;
      continue;
    }
    float* __restrict buf = buf_all + chunk.begin;
    // Branches hoisted out of the loops so each loop vectorizes.
    if (t == 1) {
      for (int64_t i = 0; i < n; ++i) {
        bad |= multi_tensor::non_finite_bit(g[i]);
        buf[i] = update_rules::sgd_momentum_first(g[i], p[i], wd);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        bad |= multi_tensor::non_finite_bit(g[i]);
        buf[i] = update_rules::sgd_momentum(buf[i], g[i], p[i], mu, keep, wd);
      }
    }
    if (nesterov) {
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_nesterov(p[i], g[i], buf[i], lr, mu, wd);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_heavy_ball(p[i], buf[i], lr);
    }
    non_finite |= bad;
  }
  return non_finite == 0;
}

}  // namespace sdp
