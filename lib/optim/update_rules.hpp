// The per-element arithmetic of every optimizer, written once for both devices
// (core/host_device.hpp): the CPU updates (sgd.cpp, adam.cpp, lars.cpp, lamb.cpp) call these
// inside their vectorized loops, the CUDA kernels (optimizer_updates.cu) inside one thread
// per element. Whole-tensor pieces (the L2 norms of LARS and LAMB, the bias corrections, which
// are per-step scalars) are computed by each device around them.
//
// Operation order is part of the contract: it is PyTorch's, and the CPU results are checked
// bit for bit against hand-computed updates (tests/unit/optim). Changing a parenthesis here
// changes every checkpoint's bits.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::update_rules {

// SGD without momentum, L2 weight decay folded into the gradient: p - lr (g + wd p).
SDP_HOST_DEVICE float sgd(float p, float g, float lr, float wd) { return p - lr * (g + wd * p); }

// The gradient with L2 weight decay, as SGD, Adam and LARS fold it in.
SDP_HOST_DEVICE float decayed(float g, float p, float wd) { return g + wd * p; }

// Momentum buffer: on the first update PyTorch clones the decayed gradient; after it,
// mu buf + (1 - dampening) g'.
SDP_HOST_DEVICE float sgd_momentum_first(float g, float p, float wd) { return decayed(g, p, wd); }
SDP_HOST_DEVICE float sgd_momentum(float buf, float g, float p, float mu, float keep, float wd) {
  return mu * buf + keep * decayed(g, p, wd);
}
// Parameter after the momentum update: heavy ball p - lr buf, Nesterov p - lr (g' + mu buf).
SDP_HOST_DEVICE float sgd_heavy_ball(float p, float buf, float lr) { return p - lr * buf; }
SDP_HOST_DEVICE float sgd_nesterov(float p, float g, float buf, float lr, float mu, float wd) {
  return p - lr * (decayed(g, p, wd) + mu * buf);
}

// Adam's bias correction 1 - beta^t, a per-step scalar the host computes (in double, like
// PyTorch's Python-side arithmetic) for either device.
inline double bias_correction(float beta, int64_t t) { return 1.0 - pow(double{beta}, double(t)); }

// Adam / AdamW. Moments: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2.
SDP_HOST_DEVICE float first_moment(float m, float g, float b1) { return b1 * m + (1.0f - b1) * g; }
SDP_HOST_DEVICE float second_moment(float v, float g, float b2) { return b2 * v + (1.0f - b2) * g * g; }
// p - step_size m / (sqrt(v) / sqrt(bias2) + eps), with step_size = lr / bias1: PyTorch's
// addcdiv_(m, sqrt(v) / bias2_sqrt + eps, value=-step_size).
SDP_HOST_DEVICE float adam_step(float p, float m, float v, float step_size, float bias2_sqrt, float eps) {
  return p + -step_size * (m / (sqrtf(v) / bias2_sqrt + eps));
}
// AdamW's decoupled decay, before the Adam step: p (1 - lr wd).
SDP_HOST_DEVICE float decoupled_decay(float p, float shrink) { return p * shrink; }

// LAMB's update direction r = m^ / (sqrt(v^) + eps) + wd p (m^, v^ bias-corrected); the
// same function feeds its norm and the step p - lr ratio r.
SDP_HOST_DEVICE float lamb_direction(float m, float v, float p, float bias1, float bias2, float eps,
                                     float wd) {
  return (m / bias1) / (sqrtf(v / bias2) + eps) + wd * p;
}
SDP_HOST_DEVICE float lamb_step(float p, float r, float step) { return p - step * r; }

// LARS: v = mu v + lr local_lr (g + wd p); p - v.
SDP_HOST_DEVICE float lars_velocity(float v, float g, float p, float mu, float scale, float wd) {
  return mu * v + scale * decayed(g, p, wd);
}
// LARS's trust ratio (You et al. 2017) in double, as the CPU computes it from the norms:
// eta ||w|| / (||g|| + wd ||w|| + eps); 1 (plain lr) when either norm is zero.
SDP_HOST_DEVICE double lars_local_lr(double w_norm, double g_norm, double trust, double wd, double eps) {
  return (w_norm > 0 && g_norm > 0) ? trust * w_norm / (g_norm + wd * w_norm + eps) : 1.0;
}
// LAMB's trust ratio ||w|| / ||r||, 1 when either is zero.
SDP_HOST_DEVICE float lamb_ratio(double w_norm, double r_norm) {
  return (w_norm > 0 && r_norm > 0) ? static_cast<float>(w_norm / r_norm) : 1.0f;
}

}  // namespace sdp::update_rules
