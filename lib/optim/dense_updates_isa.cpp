// The CPU optimizers' chunk loops, compiled once per ISA (core/cpu_dispatch.hpp): one pass over a
// chunk's arenas each, the branches hoisted out so each loop vectorizes.
#include "optim/dense_update_kernels.hpp"
#include "optim/multi_tensor.hpp"
#include "optim/norms.hpp"
#include "optim/update_rules.hpp"

namespace sdp::SDP_ISA_NAMESPACE {

namespace {

using multi_tensor::non_finite_bit;

uint32_t sgd(float* __restrict p, const float* __restrict g, int64_t n, float lr, float wd) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= non_finite_bit(g[i]);
    p[i] = update_rules::sgd(p[i], g[i], lr, wd);
  }
  return bad;
}

uint32_t sgd_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
                      float lr, float wd, float mu, float keep, bool first, bool nesterov) {
  uint32_t bad = 0;
  if (first) {
    for (int64_t i = 0; i < n; ++i) {
      bad |= non_finite_bit(g[i]);
      buf[i] = update_rules::sgd_momentum_first(g[i], p[i], wd);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      bad |= non_finite_bit(g[i]);
      buf[i] = update_rules::sgd_momentum(buf[i], g[i], p[i], mu, keep, wd);
    }
  }
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_nesterov(p[i], g[i], buf[i], lr, mu, wd);
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = update_rules::sgd_heavy_ball(p[i], buf[i], lr);
  }
  return bad;
}

uint32_t adam(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
              int64_t n, const AdamChunkScalars& s) {
  // AdamW decays the weights before the Adam step; Adam folds the decay into g (s.l2).
  if (s.decay)
    for (int64_t i = 0; i < n; ++i) p[i] = update_rules::decoupled_decay(p[i], s.shrink);
  const float b1 = s.beta1, b2 = s.beta2, l2 = s.l2, step_size = s.step_size,
              bias2_sqrt = s.bias2_sqrt, eps = s.eps;
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= non_finite_bit(g[i]);
    const float gi = update_rules::decayed(g[i], p[i], l2);
    m[i] = update_rules::first_moment(m[i], gi, b1);
    v[i] = update_rules::second_moment(v[i], gi, b2);
    p[i] = update_rules::adam_step(p[i], m[i], v[i], step_size, bias2_sqrt, eps);
  }
  return bad;
}

uint32_t lars(float* __restrict p, const float* __restrict g, float* __restrict v, int64_t n, float mu,
              float s, float wd) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= non_finite_bit(g[i]);
    v[i] = update_rules::lars_velocity(v[i], g[i], p[i], mu, s, wd);
    p[i] -= v[i];
  }
  return bad;
}

uint32_t lamb_direction(const float* __restrict p, const float* __restrict g, float* __restrict m,
                        float* __restrict v, float* __restrict r, int64_t n, float b1, float b2,
                        float bias1, float bias2, float eps, float wd) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= non_finite_bit(g[i]);
    m[i] = update_rules::first_moment(m[i], g[i], b1);
    v[i] = update_rules::second_moment(v[i], g[i], b2);
    r[i] = update_rules::lamb_direction(m[i], v[i], p[i], bias1, bias2, eps, wd);
  }
  return bad;
}

void lamb_step(float* __restrict p, const float* __restrict r, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) p[i] = update_rules::lamb_step(p[i], r[i], s);
}

double norm(const float* x, int64_t n) {
  return sdp::l2_norm(x, n);
}

}  // namespace

extern const DenseUpdateKernels dense_update_kernels = {sgd, sgd_momentum, adam, lars, lamb_direction, lamb_step,
                                                        norm};

}  // namespace sdp::SDP_ISA_NAMESPACE
