// The CTR loops of ctr_kernels.hpp, compiled once per ISA (core/cpu_dispatch.hpp).
#include <cmath>

#include "ctr/ctr_kernels.hpp"
#include "ctr/sparse_rows.hpp"

namespace sdp::SDP_ISA_NAMESPACE {

namespace {

void gather_scaled(const float* __restrict table, int width, const int64_t* __restrict ids,
                   const float* __restrict values, int64_t begin, int64_t end, float* __restrict first,
                   float* __restrict deep) {
  const int k = width - 1;
  // The rows lie scattered over a table larger than the caches: ask for them a few pairs ahead.
  constexpr int64_t kAhead = 8;
  const int64_t row_bytes = static_cast<int64_t>(sizeof(float)) * width;
  for (int64_t p = begin; p < end; ++p) {
    if (p + kAhead < end) {
      const char* ahead = reinterpret_cast<const char*>(table + ids[p + kAhead] * width);
      for (int64_t byte = 0; byte < row_bytes; byte += 64) __builtin_prefetch(ahead + byte);
      __builtin_prefetch(ahead + row_bytes - 1);
    }
    const float* row = table + ids[p] * width;
    const float x = values[p];
    first[p] = row[0] * x;
    float* out = deep + p * k;
    for (int j = 0; j < k; ++j) out[j] = row[1 + j] * x;
  }
}

void fm_forward(const float* __restrict first, const float* __restrict deep, int fields, int k, int64_t begin,
                int64_t end, float* __restrict sums, float* __restrict out) {
  constexpr int kLanes = 64;  // q_k of up to 64 k at a time, on the stack
  for (int64_t b = begin; b < end; ++b) {
    float linear = 0.0f;
    for (int f = 0; f < fields; ++f) linear += first[b * fields + f];
    float* s = sums + b * k;
    const float* e = deep + b * fields * k;
    float second = 0.0f;
    for (int j0 = 0; j0 < k; j0 += kLanes) {
      const int lanes = k - j0 < kLanes ? k - j0 : kLanes;
      float q[kLanes];
      for (int j = 0; j < lanes; ++j) {
        s[j0 + j] = 0.0f;
        q[j] = 0.0f;
      }
      // Fields in order, lanes across k: the same sums whatever the vector width.
      for (int f = 0; f < fields; ++f) {
        const float* ef = e + f * k + j0;
        for (int j = 0; j < lanes; ++j) {
          s[j0 + j] += ef[j];
          q[j] += ef[j] * ef[j];
        }
      }
      for (int j = 0; j < lanes; ++j) second += s[j0 + j] * s[j0 + j] - q[j];
    }
    out[b] = k == 0 ? linear : linear + 0.5f * second;
  }
}

// Pair p's table gradient (ctr_kernels.hpp) written into row r, or added to it.
inline void pair_gradient_into(float* __restrict r, bool write, const float* __restrict deep,
                               const float* __restrict sums, const float* __restrict dlogit,
                               const float* __restrict ddeep, const float* __restrict values, int fields, int k,
                               int64_t p) {
  const int64_t b = p / fields;
  const float dl = dlogit[b], x = values[p];
  const float* s = sums + b * k;
  const float* e = deep + p * k;
  const float* dd = ddeep != nullptr ? ddeep + p * k : nullptr;
  if (write) {
    r[0] = dl * x;
    if (dd != nullptr)
      for (int j = 0; j < k; ++j) r[1 + j] = (dl * (s[j] - e[j]) + dd[j]) * x;
    else
      for (int j = 0; j < k; ++j) r[1 + j] = dl * (s[j] - e[j]) * x;
  } else {
    r[0] += dl * x;
    if (dd != nullptr)
      for (int j = 0; j < k; ++j) r[1 + j] += (dl * (s[j] - e[j]) + dd[j]) * x;
    else
      for (int j = 0; j < k; ++j) r[1 + j] += dl * (s[j] - e[j]) * x;
  }
}

void add_pair_gradients(const float* __restrict deep, const float* __restrict sums, const float* __restrict dlogit,
                        const float* __restrict ddeep, const float* __restrict values, int fields, int k,
                        const uint32_t* __restrict pair_slots, int64_t begin, int64_t end, uint32_t slot_begin,
                        uint32_t slot_end, float* __restrict rows) {
  const int width = k + 1;
  for (int64_t p = begin; p < end; ++p) {
    const uint32_t flagged = pair_slots[p], slot = flagged & ~RowAccumulator::kNewSlot;
    if (slot < slot_begin || slot >= slot_end) continue;
    pair_gradient_into(rows + static_cast<int64_t>(slot) * width, (flagged & RowAccumulator::kNewSlot) != 0, deep,
                       sums, dlogit, ddeep, values, fields, k, p);
  }
}

void bias_relu_dropout(float* __restrict out, const float* __restrict bias, const uint64_t* __restrict row_keys,
                       int64_t width, int64_t begin, int64_t end, uint32_t drop_below, float keep_scale,
                       float* __restrict mask) {
  for (int64_t i = begin; i < end; ++i) {
    float* o = out + i * width;
    float* m = mask + i * width;
    if (drop_below == 0) {
      for (int64_t j = 0; j < width; ++j) m[j] = keep_scale;
    } else {
      const uint64_t key = row_keys[i];
      for (int64_t j = 0; j < width; ++j) m[j] = dropout_bits(key, j) < drop_below ? 0.0f : keep_scale;
    }
    if (bias != nullptr) {
      for (int64_t j = 0; j < width; ++j) {
        const float z = o[j] + bias[j];
        const float factor = z > 0.0f ? m[j] : 0.0f;
        m[j] = factor;
        o[j] = z * factor;
      }
    } else {
      for (int64_t j = 0; j < width; ++j) o[j] *= m[j];
    }
  }
}

void mask_column_sums(float* __restrict dz, const float* __restrict mask, int64_t rows, int64_t width,
                      int64_t col_begin, int64_t col_end, float* __restrict column_sums) {
  if (column_sums != nullptr)
    for (int64_t j = col_begin; j < col_end; ++j) column_sums[j] = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dz + i * width;
    if (mask != nullptr) {
      const float* m = mask + i * width;
      for (int64_t j = col_begin; j < col_end; ++j) d[j] *= m[j];
    }
    if (column_sums != nullptr)
      for (int64_t j = col_begin; j < col_end; ++j) column_sums[j] += d[j];
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

extern const CtrKernels ctr_kernels = {gather_scaled,    fm_forward,       add_pair_gradients, bias_relu_dropout,
                                       mask_column_sums, sigmoid_log_loss, adagrad,            ftrl};

}  // namespace sdp::SDP_ISA_NAMESPACE
