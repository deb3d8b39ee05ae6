// LARS, layer-wise adaptive rate scaling (You, Gitman, Ginsburg 2017), in the form of
// TensorFlow's LARSOptimizer and NVIDIA apex's LARC (clip off): each parameter tensor (a
// "layer") gets its own learning rate from the ratio of its weight norm to its gradient norm,
// so a large global batch's large LR cannot blow up layers whose gradients are large
// relative to their weights.
//
// For each parameter w with gradient g and momentum buffer v (zero at the start):
//   adapted (Param::weight_decay true: conv and linear weights):
//     local_lr = trust_coefficient * ||w|| / (||g|| + weight_decay * ||w|| + eps),
//                1 when ||w|| = 0 or ||g|| = 0
//     v = momentum * v + lr * local_lr * (g + weight_decay * w)
//   excluded (Param::weight_decay false: biases and BatchNorm): plain momentum SGD, no
//   decay, no trust ratio
//     v = momentum * v + lr * g
//   w -= v
// Norms are L2 over the whole tensor, summed in double. lr sits inside the buffer (TF's
// form), so a change of lr acts on the next updates only. Excluded parameters are excluded
// whatever decay_all says: the recipe needs it.
#pragma once

#include <memory>
#include <vector>

#include "optim/optimizer.hpp"

namespace sdp {

struct LarsOptions {
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float trust_coefficient = 0.001f;  // "eta" of the paper
  float eps = 1e-8f;
};

class Lars : public Optimizer {
 public:
  // Throws InputError for momentum outside [0, 1), negative weight_decay or eps, or a
  // trust_coefficient that is not positive.
  Lars(ParameterStore& store, const LarsOptions& options);
  // The implementation for the store's device (LarsCpu, LarsCuda), as layers pick theirs.
  static std::unique_ptr<Lars> create(ParameterStore& store, const LarsOptions& options);
  const char* name() const override { return "lars"; }
  const LarsOptions& options() const { return options_; }

 protected:
  LarsOptions options_;
  float* momentum_ = nullptr;  // "momentum_buffer" arena (always, even with momentum 0)
  std::vector<double> norms_;  // CPU: ||w||, ||g|| per parameter tensor, this step
};

// The CPU update: one multi-tensor pass over the arenas (lars.cpp).
class LarsCpu final : public Lars {
 public:
  using Lars::Lars;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return true; }
};

// The GPU update: optim/cuda_updates.hpp's kernels on the optimizer's stream (lars_cuda.cpp,
// built with the CUDA backend).
class LarsCuda final : public Lars {
 public:
  using Lars::Lars;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return false; }
};

}  // namespace sdp
