// The CTR loops of ctr_kernels.hpp, compiled once per ISA (core/cpu_dispatch.hpp).
#include <cmath>

#include "ctr/ctr_kernels.hpp"

namespace sdp::SDP_ISA_NAMESPACE {

namespace {

void gather_scaled(const float* __restrict table, int width, const int64_t* __restrict ids,
                   const float* __restrict values, int64_t begin, int64_t end, float* __restrict first,
                   float* __restrict deep) {
  const int k = width - 1;
  for (int64_t p = begin; p < end; ++p) {
    const float* row = table + ids[p] * width;
    const float x = values[p];
    first[p] = row[0] * x;
    float* out = deep + p * k;
    for (int j = 0; j < k; ++j) out[j] = row[1 + j] * x;
  }
}

void fm_forward(const float* __restrict first, const float* __restrict deep, int fields, int k, int64_t begin,
                int64_t end, float* __restrict sums, float* __restrict out) {
  for (int64_t b = begin; b < end; ++b) {
    float linear = 0.0f;
    for (int f = 0; f < fields; ++f) linear += first[b * fields + f];
    if (k == 0) {
      out[b] = linear;
      continue;
    }
    float* s = sums + b * k;
    for (int j = 0; j < k; ++j) s[j] = 0.0f;
    float squares = 0.0f;
    const float* e = deep + b * fields * k;
    for (int f = 0; f < fields; ++f) {
      // Fields in order, lanes across k: the same sums whatever the vector width.
      for (int j = 0; j < k; ++j) s[j] += e[f * k + j];
    }
    float square_of_sums = 0.0f;
    for (int j = 0; j < k; ++j) square_of_sums += s[j] * s[j];
    for (int i = 0; i < fields * k; ++i) squares += e[i] * e[i];
    out[b] = linear + 0.5f * (square_of_sums - squares);
  }
}

void pair_gradients(const float* __restrict deep, const float* __restrict sums, const float* __restrict dlogit,
                    const float* __restrict ddeep, const float* __restrict values, int fields, int k, int64_t begin,
                    int64_t end, float* __restrict grad) {
  const int width = k + 1;
  for (int64_t b = begin; b < end; ++b) {
    const float dl = dlogit[b];
    const float* s = sums + b * k;
    for (int f = 0; f < fields; ++f) {
      const int64_t p = b * fields + f;
      const float x = values[p];
      float* g = grad + p * width;
      g[0] = dl * x;
      const float* e = deep + p * k;
      if (ddeep != nullptr) {
        const float* dd = ddeep + p * k;
        for (int j = 0; j < k; ++j) g[1 + j] = (dl * (s[j] - e[j]) + dd[j]) * x;
      } else {
        for (int j = 0; j < k; ++j) g[1 + j] = dl * (s[j] - e[j]) * x;
      }
    }
  }
}

double sigmoid_log_loss(const float* __restrict logit, const float* __restrict label, int64_t begin, int64_t end,
                        float scale, float* __restrict prob, float* __restrict dlogit) {
  double total = 0.0;
  for (int64_t b = begin; b < end; ++b) {
    const float z = logit[b], y = label[b];
    // log(1 + e^-|z|) + max(z, 0) - z y: no overflow for any z (TensorFlow's form).
    total += static_cast<double>(std::log1p(std::exp(-std::fabs(z))) + std::fmax(z, 0.0f) - z * y);
    const float p = z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
    prob[b] = p;
    if (dlogit != nullptr) dlogit[b] = (p - y) * scale;
  }
  return total;
}

void adagrad(float* __restrict p, const float* __restrict g, float* __restrict acc, int64_t n, float lr, float l2,
             float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    acc[i] += gi * gi;
    p[i] -= lr * gi / (std::sqrt(acc[i]) + eps);
  }
}

void ftrl(float* __restrict p, const float* __restrict g, float* __restrict z, float* __restrict nacc, int64_t count,
          float lr, float l1, float l2) {
  for (int64_t i = 0; i < count; ++i) {
    const float gi = g[i] + l2 * p[i];
    const float n_old = nacc[i];
    const float n_new = n_old + gi * gi;
    const float sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / lr;
    const float zi = z[i] + gi - sigma * p[i];
    z[i] = zi;
    nacc[i] = n_new;
    const float shrunk = std::fabs(zi) <= l1 ? 0.0f : (zi > 0 ? l1 - zi : -l1 - zi);
    p[i] = shrunk / (std::sqrt(n_new) / lr);
  }
}

}  // namespace

extern const CtrKernels ctr_kernels = {gather_scaled, fm_forward, pair_gradients, sigmoid_log_loss, adagrad, ftrl};

}  // namespace sdp::SDP_ISA_NAMESPACE
