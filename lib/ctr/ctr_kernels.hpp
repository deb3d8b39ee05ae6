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

// The 32 random bits deciding dropout of unit j in a row whose key is row_key: a 32-bit
// integer hash (Chris Wellons' lowbias32), cheap in vector lanes where a 64-bit multiply is not.
inline uint32_t dropout_bits(uint64_t row_key, int64_t j) {
  uint32_t x = static_cast<uint32_t>(row_key ^ (row_key >> 32)) + static_cast<uint32_t>(j) * 0x9e3779b9U;
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

struct CtrKernels {
  // For pairs [begin, end): first[p] = w[id_p] * x_p, and (K > 0) deep[p*K + k] = v[id_p][k] * x_p
  // (deep is then [B, F*K] row-major: the MLP's input).
  void (*gather_scaled)(const float* table, int width, const int64_t* ids, const float* values, int64_t begin,
                        int64_t end, float* first, float* deep);
  // For samples [begin, end): out[b] = sum_f first[b,f] + 0.5 * sum_k (s_k^2 - q_k) with
  // s_k = sum_f deep[b,f,k] (kept in sums[b*K + k] for backward) and q_k = sum_f deep[b,f,k]^2,
  // fields in order, then k in order (K = 0: the first order only).
  void (*fm_forward)(const float* first, const float* deep, int fields, int k, int64_t begin, int64_t end,
                     float* sums, float* out);
  // The table rows' gradient, summed per slot in pair order: for pairs [begin, end) whose slot
  // (pair_slots[p] without RowAccumulator::kNewSlot, from assign_slots) lies in [slot_begin,
  // slot_end), rows[slot] (width K + 1) gets [dl_b * x_p | (dl_b * (s_bk - e_pk) + ddeep_pk) * x_p]
  // (b = p / fields), written when pair_slots[p] has kNewSlot, else added. Threads taking
  // disjoint slot ranges over the same pairs make the sums of one thread's pass. ddeep (the
  // MLP's input gradient) may be null (fm, lr; K = 0: the first order only).
  void (*add_pair_gradients)(const float* deep, const float* sums, const float* dlogit, const float* ddeep,
                             const float* values, int fields, int k, const uint32_t* pair_slots, int64_t begin,
                             int64_t end, uint32_t slot_begin, uint32_t slot_end, float* rows);
  // A hidden layer's epilogue on rows [begin, end) of out [rows, width], the product before its
  // bias: z = out + bias; mask = z > 0 ? the unit's dropout factor : 0; out = z * mask. With bias
  // null (dropout after BatchNorm) there is no bias and no ReLU: mask = the factor, out *= mask.
  // Unit j of row i is dropped (factor 0, else keep_scale) when dropout_bits(row_keys[i], j) <
  // drop_below; drop_below 0 keeps every unit. Integer hashing: the same masks on every ISA.
  void (*bias_relu_dropout)(float* out, const float* bias, const uint64_t* row_keys, int64_t width, int64_t begin,
                            int64_t end, uint32_t drop_below, float keep_scale, float* mask);
  // For columns [col_begin, col_end) of dz [rows, width]: dz *= mask (when mask is not null),
  // then column_sums[j] = sum over rows in order of dz[i][j] (when column_sums is not null).
  void (*mask_column_sums)(float* dz, const float* mask, int64_t rows, int64_t width, int64_t col_begin,
                           int64_t col_end, float* column_sums);
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
