// SGD with momentum, dampening, Nesterov and L2 weight decay, exactly
// torch.optim.SGD: g' = g + wd * p; buf = g' on the first step, else
// buf = momentum * buf + (1 - dampening) * g'; d = nesterov ? g' + momentum * buf : buf;
// p -= lr * d.
#pragma once

#include <memory>

#include "optim/optimizer.hpp"

namespace sdp {

struct SgdOptions {
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  bool decay_all = true;  // see Optimizer
};

class Sgd : public Optimizer {
 public:
  // Throws InputError for PyTorch's invalid combinations (nesterov without momentum or
  // with dampening, negative values).
  Sgd(ParameterStore& store, const SgdOptions& options);
  // The implementation for the store's device (SgdCpu, SgdCuda), as layers pick theirs.
  static std::unique_ptr<Sgd> create(ParameterStore& store, const SgdOptions& options);
  const char* name() const override { return "sgd"; }
  const SgdOptions& options() const { return options_; }

 protected:
  SgdOptions options_;
  float* momentum_ = nullptr;  // "momentum_buffer" arena, when momentum != 0
};

// The CPU update: one multi-tensor pass over the arenas (sgd.cpp).
class SgdCpu final : public Sgd {
 public:
  using Sgd::Sgd;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return true; }
};

// The GPU update: optim/cuda_updates.hpp's kernels on the optimizer's stream (sgd_cuda.cpp,
// built with the CUDA backend).
class SgdCuda final : public Sgd {
 public:
  using Sgd::Sgd;
  bool update(float lr, int64_t t) override;
  bool checks_gradients_in_update() const override { return false; }
};

}  // namespace sdp
