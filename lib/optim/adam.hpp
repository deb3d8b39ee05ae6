// Adam and AdamW, exactly torch.optim.Adam / AdamW (amsgrad off):
//   Adam:  g' = g + wd * p          AdamW: p *= 1 - lr * wd, g' = g (decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)   (eps outside the sqrt)
#pragma once

#include <memory>

#include "optim/optimizer.hpp"

namespace sdp {

struct AdamOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // torch defaults: 0 for Adam, 0.01 for AdamW
  bool decoupled = false;     // true = AdamW
  bool decay_all = true;      // see Optimizer
};

class Adam : public Optimizer {
 public:
  Adam(ParameterStore& store, const AdamOptions& options);
  // The implementation for the store's device (AdamCpu, AdamCuda), as layers pick theirs.
  static std::unique_ptr<Adam> create(ParameterStore& store, const AdamOptions& options);
  const char* name() const override { return options_.decoupled ? "adamw" : "adam"; }
  const AdamOptions& options() const { return options_; }

 protected:
  AdamOptions options_;
  float* exp_avg_ = nullptr;
  float* exp_avg_sq_ = nullptr;
};

// The CPU update: one multi-tensor pass over the arenas (adam.cpp).
class AdamCpu final : public Adam {
 public:
  using Adam::Adam;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return true; }
};

// The GPU update: optim/cuda_updates.hpp's kernels on the optimizer's stream (adam_cuda.cpp,
// built with the CUDA backend).
class AdamCuda final : public Adam {
 public:
  using Adam::Adam;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return false; }
  cuda_updates::StepScalars step_scalars(float lr, int64_t t) const override;
};

}  // namespace sdp
