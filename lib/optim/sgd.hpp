// SGD with momentum, dampening, Nesterov and L2 weight decay, exactly
// torch.optim.SGD: g' = g + wd * p; buf = g' on the first step, else
// buf = momentum * buf + (1 - dampening) * g'; d = nesterov ? g' + momentum * buf : buf;
// p -= lr * d.
#pragma once

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
  const char* name() const override { return "sgd"; }
  const SgdOptions& options() const { return options_; }

 private:
  bool update_cpu(float lr, int64_t t) override;
#ifdef SDP_HAVE_CUDA
  void update_cuda(float lr, int64_t t) override;
#endif

  SgdOptions options_;
  float* momentum_ = nullptr;  // "momentum_buffer" arena, when momentum != 0
};

}  // namespace sdp
