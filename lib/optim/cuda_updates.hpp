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

// The scalars an update takes each step, as the CPU computes them from the learning rate and the
// update's number t: bias corrections (Adam's step_size = lr / bias1 and bias2_sqrt =
// sqrt(bias2); LAMB's bias1, bias2) and SGD's first step (buf = g').
struct StepScalars {
  float lr = 0;
  float bias1 = 1;
  float bias2 = 1;
  float step_size = 0;
  float bias2_sqrt = 1;
  int32_t first = 0;
};

// Where a launch takes its StepScalars: `value`, passed with the launch; or, when `on_device`
// is set (optimizer.capturable), device memory written before each step, so that one recorded
// launch serves every step of a CUDA graph. A non-zero *skip (when set) makes the launch
// change nothing: the step's gradients were not finite (check_step, on the device).
struct ScalarSource {
  StepScalars value;
  const StepScalars* on_device = nullptr;
  const int32_t* skip = nullptr;
};

// *skip = 1 when a gradient in g[0, count) or the mean loss (float)(*loss_sum / batch), as the
// host takes it, is NaN or infinite, else 0: the update's decision, made on the device
// (optimizer.capturable). A null loss_sum: the gradients alone (several ranks' averaged ones).
void check_step(const float* g, int64_t count, const double* loss_sum, int64_t batch, int32_t* skip, Stream* stream);

// The ranges copied to device memory once (plus scratch for two norms per range), on the
// GPU `device_ordinal`. Defined in cuda_updates.cu.
struct RangeTable;
std::shared_ptr<const RangeTable> make_range_table(const std::vector<Range>& ranges, int device_ordinal);

// SGD (torch.optim.SGD). `buf` null: no momentum. `first`: the first update (buf = g').
// Scalars: lr, first.
void sgd(const RangeTable& ranges, float* p, const float* g, float* buf, const ScalarSource& scalars, float momentum,
         float keep, bool nesterov, Stream* stream);

// Adam (decoupled = false: L2 decay folded into g) and AdamW (decoupled: p *= 1 - lr wd
// first). Scalars: lr, step_size, bias2_sqrt.
void adam(const RangeTable& ranges, float* p, const float* g, float* m, float* v, const ScalarSource& scalars,
          float beta1, float beta2, float eps, bool decoupled, Stream* stream);

// LARS: per range, local_lr from ||p|| and ||g|| (in double, deterministic order), then the
// momentum step. Scalars: lr.
void lars(const RangeTable& ranges, float* p, const float* g, float* v, const ScalarSource& scalars, float momentum,
          float trust_coefficient, float eps, Stream* stream);

// LAMB: moments, then per range ||p|| and ||r|| (in double, deterministic order), then
// p -= lr ratio r. Scalars: lr, bias1, bias2.
void lamb(const RangeTable& ranges, float* p, const float* g, float* m, float* v, const ScalarSource& scalars,
          float beta1, float beta2, float eps, Stream* stream);

}  // namespace sdp::cuda_updates
