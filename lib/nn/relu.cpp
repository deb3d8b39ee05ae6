#include "nn/relu.hpp"

#include <functional>
#include <stdexcept>

#include "nn/relu_cpu.hpp"
#include "nn/relu_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<ReLU> ReLU::create(Context& ctx, std::string name) {
  return make_for_device<ReLU, ReLUCpu, ReLUCuda>(ctx, "ReLU", std::move(name));
}

}  // namespace sdp::nn
