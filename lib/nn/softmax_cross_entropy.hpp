// SoftmaxCrossEntropy: the loss head. forward() returns the mean over the batch of
// -log softmax(logits)[label] and counts top-1 hits; backward() returns
// d(loss)/d(logits) = (softmax - onehot) / N in the logits' layout.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/context.hpp"

namespace sdp::nn {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(Context& ctx) : ctx_(ctx) {}

  void configure(const memory::desc& logits_md, int num_classes);
  float forward(const memory& logits, const int32_t* labels, int64_t* correct);
  const memory& backward();

 private:
  Context& ctx_;
  int64_t batch_ = 0;
  int num_classes_ = 0;
  LayoutAdapter to_plain_, from_plain_;
  memory diff_plain_;  // plain [N, K]
};

}  // namespace sdp::nn
