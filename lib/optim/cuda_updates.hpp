// The optimizers' device twins: launchers of the CUDA kernels in cuda_updates.cu,
// which run the per-element arithmetic of update_rules.hpp, the very functions the CPU loops
// call. Only launch shapes, the per-tensor norms of LARS/LAMB and the stream are GPU-only.
// No CUDA type appears here, so host code can include it; the functions exist only in a build
// with the CUDA backend (SDP_HAVE_CUDA).
//
// Every launcher enqueues its kernels on `stream` (a CUDA stream; null = the legacy default
// stream) and returns without synchronizing: the step's next work on the same stream sees the
// result, and the host never waits for it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/stream.hpp"

namespace sdp::cuda_updates {

// A run of the arenas updated with one weight decay. For LARS and LAMB a range is one
// parameter tensor, and `adapt` says whether the layer-wise trust ratio applies (weights:
// yes; BatchNorm parameters and biases: no, and they take no weight decay).
struct Range {
  int64_t begin = 0;
  int64_t count = 0;
  float weight_decay = 0;
  int32_t adapt = 0;
};

// The ranges copied to device memory once (plus scratch for two norms per range), on the
// GPU `device_ordinal`. Defined in cuda_updates.cu.
struct RangeTable;
std::shared_ptr<const RangeTable> make_range_table(const std::vector<Range>& ranges, int device_ordinal);

// SGD (torch.optim.SGD). `buf` null: no momentum. `first`: the first update (buf = g').
void sgd(const RangeTable& ranges, float* p, const float* g, float* buf, float lr, float momentum,
         float keep, bool first, bool nesterov, Stream* stream);

// Adam (decoupled = false: L2 decay folded into g) and AdamW (decoupled: p *= 1 - lr wd
// first). step_size = lr / bias1 and bias2_sqrt = sqrt(bias2) as the CPU computes them.
void adam(const RangeTable& ranges, float* p, const float* g, float* m, float* v, float lr,
          float beta1, float beta2, float eps, float step_size, float bias2_sqrt, bool decoupled,
          Stream* stream);

// LARS: per range, local_lr from ||p|| and ||g|| (in double, deterministic order), then the
// momentum step.
void lars(const RangeTable& ranges, float* p, const float* g, float* v, float lr, float momentum,
          float trust_coefficient, float eps, Stream* stream);

// LAMB: moments, then per range ||p|| and ||r|| (in double, deterministic order), then
// p -= lr ratio r.
void lamb(const RangeTable& ranges, float* p, const float* g, float* m, float* v, float lr,
          float beta1, float beta2, float bias1, float bias2, float eps, Stream* stream);

}  // namespace sdp::cuda_updates
