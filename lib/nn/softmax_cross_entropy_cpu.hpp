// SoftmaxCrossEntropyCpu: the loss head as a loop over plain [N, K] logits.
#pragma once

#include "nn/onednn.hpp"
#include "nn/softmax_cross_entropy.hpp"

namespace sdp::nn {

class SoftmaxCrossEntropyCpu final : public SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropyCpu(Context& ctx) : ctx_(ctx) {}

  void configure(const TensorDesc& logits, int num_classes) override;
  float forward(const TensorRef& logits, const int32_t* labels, int64_t* correct, uint8_t* hits) override;
  const TensorRef& backward() override;

 private:
  Context& ctx_;
  int64_t batch_ = 0;
  int num_classes_ = 0;
  LayoutAdapter to_plain_, from_plain_;
  OneDnnPort logits_port_;
  memory diff_plain_;  // plain [N, K]
  TensorRef diff_;
};

}  // namespace sdp::nn
