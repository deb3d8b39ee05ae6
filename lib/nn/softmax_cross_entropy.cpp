#include "nn/softmax_cross_entropy.hpp"

#include <stdexcept>

#include "nn/layer_factory.hpp"
#include "nn/softmax_cross_entropy_cpu.hpp"
#include "nn/softmax_cross_entropy_cuda.hpp"

namespace sdp::nn {

std::unique_ptr<SoftmaxCrossEntropy> SoftmaxCrossEntropy::create(Context& ctx) {
  return make_for_device<SoftmaxCrossEntropy, SoftmaxCrossEntropyCpu, SoftmaxCrossEntropyCuda>(ctx, "SoftmaxCrossEntropy");
}

void SoftmaxCrossEntropy::stage_labels(const int32_t* /*labels*/) {
  throw std::logic_error("SoftmaxCrossEntropy: a step is recorded only on a GPU");
}

void SoftmaxCrossEntropy::queue_loss(const TensorRef& /*logits*/) {
  throw std::logic_error("SoftmaxCrossEntropy: a step is recorded only on a GPU");
}

void SoftmaxCrossEntropy::queue_loss_read() {
  throw std::logic_error("SoftmaxCrossEntropy: a step is recorded only on a GPU");
}

}  // namespace sdp::nn
