// Adam and AdamW, exactly torch.optim.Adam / AdamW (amsgrad off):
//   Adam:  g' = g + wd * p          AdamW: p *= 1 - lr * wd, g' = g (decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)   (eps outside the sqrt)
#pragma once

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
  const char* name() const override { return options_.decoupled ? "adamw" : "adam"; }
  const AdamOptions& options() const { return options_; }

 private:
  bool update_cpu(float lr, int64_t t) override;
#ifdef SDP_HAVE_CUDA
  void update_cuda(float lr, int64_t t) override;
#endif

  AdamOptions options_;
  float* exp_avg_ = nullptr;
  float* exp_avg_sq_ = nullptr;
};

}  // namespace sdp
