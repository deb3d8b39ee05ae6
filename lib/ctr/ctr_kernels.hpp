// The CTR models' CPU loops (embedding gathers, the FM term, the sparse optimizers' row
// updates), compiled once per ISA (*_isa.cpp, core/cpu_dispatch.hpp). Every loop is either
// element-wise or sums in a fixed order with -ffp-contract=off, so each ISA gives the same bits
// and replicas on hosts with different CPUs stay identical.
//
// Layouts. A table row is packed HugeCTR-style: [w | v_1 .. v_K] (width K + 1; the logistic
// regression's width is 1), so one gather and one scatter serve the first and second order.
// A batch of B samples has B*F (id, value) pairs, sample-major.
#pragma once

#include <cstdint>

#include "core/cpu_dispatch.hpp"

namespace sdp {

struct CtrKernels {
  // For pairs [begin, end): first[p] = w[id_p] * x_p, and (K > 0) deep[p*K + k] = v[id_p][k] * x_p
  // (deep is then [B, F*K] row-major: the MLP's input).
  void (*gather_scaled)(const float* table, int width, const int64_t* ids, const float* values, int64_t begin,
                        int64_t end, float* first, float* deep);
  // For samples [begin, end): out[b] = sum_f first[b,f] + 0.5 * sum_k (s_k^2 - sum_f deep[b,f,k]^2)
  // with s_k = sum_f deep[b,f,k], kept in sums[b*K + k] for backward (K = 0: the first order only).
  void (*fm_forward)(const float* first, const float* deep, int fields, int k, int64_t begin, int64_t end,
                     float* sums, float* out);
  // The table rows' gradient of each pair, grad[p] = [dl_b * x_p | (dl_b * (s_k - e_pk) + ddeep_pk) * x_p],
  // for samples [begin, end); ddeep (the MLP's input gradient) may be null (fm, lr).
  void (*pair_gradients)(const float* deep, const float* sums, const float* dlogit, const float* ddeep,
                         const float* values, int fields, int k, int64_t begin, int64_t end, float* grad);
  // Sigmoid log loss of samples [begin, end): prob[b] = sigmoid(logit[b]); returns the sum of
  // the losses (in double); dlogit[b] = (prob[b] - label[b]) * scale when dlogit is not null.
  double (*sigmoid_log_loss)(const float* logit, const float* label, int64_t begin, int64_t end, float scale,
                             float* prob, float* dlogit);
  // Adagrad (TensorFlow's, with optimizer.eps added to the root): g += l2 * p; acc += g^2;
  // p -= lr * g / (sqrt(acc) + eps).
  void (*adagrad)(float* p, const float* g, float* acc, int64_t n, float lr, float l2, float eps);
  // FTRL-Proximal (TensorFlow's FtrlOptimizer, learning_rate_power -0.5): g += l2 * p;
  // n' = n + g^2; z += g - (sqrt(n') - sqrt(n)) / lr * p; p = |z| <= l1 ? 0 : (sign(z) l1 - z) / (sqrt(n') / lr).
  void (*ftrl)(float* p, const float* g, float* z, float* n, int64_t count, float lr, float l1, float l2);
};

SDP_ISA_KERNEL_TABLE(CtrKernels, ctr_kernels)

}  // namespace sdp
