// SoftmaxCrossEntropy: the loss head. forward() returns the mean over the batch of
// -log softmax(logits)[label] and counts top-1 hits; backward() returns
// d(loss)/d(logits) = (softmax - onehot) / N in the logits' layout. Labels are host memory.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/context.hpp"

namespace sdp::nn {

class SoftmaxCrossEntropy {
 public:
  static std::unique_ptr<SoftmaxCrossEntropy> create(Context& ctx);
  virtual ~SoftmaxCrossEntropy() = default;

  virtual void configure(const TensorDesc& logits, int num_classes) = 0;
  virtual float forward(const TensorRef& logits, const int32_t* labels, int64_t* correct) = 0;
  virtual const TensorRef& backward() = 0;
};

}  // namespace sdp::nn
