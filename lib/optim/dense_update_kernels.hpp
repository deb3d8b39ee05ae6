// The CPU optimizers' per-chunk loops (optim/multi_tensor.hpp's chunks), compiled once per
// ISA (dense_updates_isa.cpp, core/cpu_dispatch.hpp). Element-wise, with update_rules.hpp's
// operation order and no contraction into FMA: every variant gives the same bits, so a job
// whose hosts have different CPUs keeps its replicas identical.
//
// Each update returns 1 when one of the chunk's gradients is NaN or infinite, else 0
// (multi_tensor::non_finite_bit, OR-ed along the same pass).
#pragma once

#include <cstdint>

#include "core/cpu_dispatch.hpp"

namespace sdp {

struct AdamChunkScalars {
  float beta1, beta2, eps;
  float step_size, bias2_sqrt;  // lr / (1 - beta1^t), sqrt(1 - beta2^t)
  float l2;                     // weight decay folded into the gradient (Adam), else 0
  bool decay;                   // AdamW: p *= shrink before the step
  float shrink;                 // 1 - lr * weight decay
};

struct DenseUpdateKernels {
  // SGD without momentum.
  uint32_t (*sgd)(float* p, const float* g, int64_t n, float lr, float wd);
  // SGD with momentum: the buffer (first: PyTorch's clone on step 1), then heavy ball or Nesterov.
  uint32_t (*sgd_momentum)(float* p, const float* g, float* buf, int64_t n, float lr, float wd,
                           float mu, float keep, bool first, bool nesterov);
  uint32_t (*adam)(float* p, const float* g, float* m, float* v, int64_t n, const AdamChunkScalars& s);
  // LARS: velocity with the tensor's scaled lr s, then p -= v.
  uint32_t (*lars)(float* p, const float* g, float* v, int64_t n, float mu, float s, float wd);
  // LAMB's moments and update direction r; then, once the norms are known, its step.
  uint32_t (*lamb_direction)(const float* p, const float* g, float* m, float* v, float* r, int64_t n,
                             float beta1, float beta2, float bias1, float bias2, float eps, float wd);
  void (*lamb_step)(float* p, const float* r, int64_t n, float s);
  // sqrt(sum x^2) in double, optim/norms.hpp's fixed order of 8 interleaved partial sums.
  double (*l2_norm)(const float* x, int64_t n);
};

SDP_ISA_KERNEL_TABLE(DenseUpdateKernels, dense_update_kernels)

}  // namespace sdp
