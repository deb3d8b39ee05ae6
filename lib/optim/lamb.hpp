// LAMB, layer-wise adaptive moments (You et al. 2019, Algorithm 2; NVIDIA's FusedLAMB
// without its global gradient-norm clipping): Adam's direction, rescaled per parameter
// tensor so that each layer moves by lr times its own weight norm at most.
//
// For each parameter w with gradient g, t the 1-based update number:
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   m_hat = m / (1 - beta1^t);     v_hat = v / (1 - beta2^t)
//   r = m_hat / (sqrt(v_hat) + eps) + weight_decay * w
//   ratio = ||w|| / ||r||, 1 when ||w|| = 0 or ||r|| = 0
//   w -= lr * ratio * r
// Parameters with Param::weight_decay false (biases, BatchNorm) are excluded from both
// decay and adaptation: r = m_hat / (sqrt(v_hat) + eps), ratio = 1 (plain Adam for them),
// whatever decay_all says. Norms are L2 over the whole tensor, summed in double. On the CPU r
// is kept for one step in a scratch arena (computed once for its norm and the step), which
// is not state: a checkpoint holds Adam's moments only.
#pragma once

#include <memory>
#include <vector>

#include "optim/optimizer.hpp"

namespace sdp {

struct LambOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;  // the paper and FusedLAMB use 1e-6; the job spec's default is Adam's
  float weight_decay = 0.0f;
};

class Lamb : public Optimizer {
 public:
  // Throws InputError for betas outside [0, 1) or negative eps / weight_decay.
  Lamb(ParameterStore& store, const LambOptions& options);
  // The implementation for the store's device (LambCpu, LambCuda), as layers pick theirs.
  static std::unique_ptr<Lamb> create(ParameterStore& store, const LambOptions& options);
  const char* name() const override { return "lamb"; }
  const LambOptions& options() const { return options_; }

 protected:
  LambOptions options_;
  float* exp_avg_ = nullptr;
  float* exp_avg_sq_ = nullptr;
  // CPU: the update direction r of every element this step (the norm and the step read it),
  // and ||w||, ||r|| per parameter tensor.
  std::vector<float> direction_;
  std::vector<double> norms_;
};

// The CPU update: one multi-tensor pass over the arenas (lamb.cpp).
class LambCpu final : public Lamb {
 public:
  using Lamb::Lamb;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return true; }
};

// The GPU update: optim/cuda_updates.hpp's kernels on the optimizer's stream (lamb_cuda.cpp,
// built with the CUDA backend).
class LambCuda final : public Lamb {
 public:
  using Lamb::Lamb;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return false; }
  cuda_updates::StepScalars step_scalars(float lr, int64_t t) const override;
};

}  // namespace sdp
