#include "nn/softmax_cross_entropy.hpp"

#include "nn/layer_factory.hpp"
#include "nn/softmax_cross_entropy_cpu.hpp"
#include "nn/softmax_cross_entropy_cuda.hpp"

namespace sdp::nn {

std::unique_ptr<SoftmaxCrossEntropy> SoftmaxCrossEntropy::create(Context& ctx) {
  return make_for_device<SoftmaxCrossEntropy, SoftmaxCrossEntropyCpu, SoftmaxCrossEntropyCuda>(ctx, "SoftmaxCrossEntropy");
}

}  // namespace sdp::nn
